"""Workers as real processes on the real databases: draining, dying, stopping."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from tests.scheduling.conftest import add_schedule, requests_of, spawn_tracker
from tests.waiting import wait_for
from tracker.inputs.configs import build_loaded_config, load_config
from tracker.results import RunStatus
from tracker.scheduling.queueing import enqueue_schedule
from tracker.scheduling.worker import with_gpus
from tracker.store.db import open_store
from tracker.store.models import RunModel, WorkloadResultModel
from tracker.store.run_queue import RequestStatus
from tracker.store.runs import fetch_run

FAST_WORKER = ("--heartbeat-s", "0.2", "--stale-after-s", "1.5", "--poll-s", "0.1")


@pytest.fixture
def pg_engine(postgres_url: str) -> Iterator[Engine]:
    engine = open_store(postgres_url)
    try:
        yield engine
    finally:
        engine.dispose()


def _finish(process: subprocess.Popen[str], timeout_s: float = 120) -> str:
    out, err = process.communicate(timeout=timeout_s)
    assert process.returncode == 0, err
    return out


def _wait_line(process: subprocess.Popen[str], needle: str) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        if needle in line:
            return
    raise AssertionError(f"no {needle!r} line: {process.stderr.read() if process.stderr else ''}")


@pytest.mark.postgres
def test_three_workers_drain_thirty_requests_each_exactly_once(
        pg_engine: Engine, postgres_url: str, files: dict[str, Path]) -> None:
    add_schedule(pg_engine, "burst", files["fast"], files["tiny"], repeats=30)
    workers = [spawn_tracker("worker", "--db", postgres_url, *FAST_WORKER) for _ in range(3)]
    try:
        for worker in workers:
            _wait_line(worker, "waiting for requests")
        assert len(enqueue_schedule(pg_engine, "burst", slot=False)) == 30
        wait_for(lambda: all(r.status is RequestStatus.DONE for r in requests_of(pg_engine)),
                 120, "30 requests done")
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
    outputs = [_finish(worker) for worker in workers]

    requests = requests_of(pg_engine)
    assert len(requests) == 30 and all(r.attempts == 1 for r in requests)
    run_ids = [r.run_id for r in requests]
    assert None not in run_ids and len(set(run_ids)) == 30
    with Session(pg_engine) as session:
        statuses = session.execute(select(RunModel.status, func.count())
                                   .group_by(RunModel.status)).all()
    assert dict(statuses) == {"completed": 30}
    claimed = [int(n) for out in outputs for n in re.findall(r"request (\d+): fast-sim", out)]
    assert sorted(claimed) == sorted(r.id for r in requests)  # every one claimed once, in total
    by_worker = {r.worker_id for r in requests}
    assert len(by_worker) >= 2, by_worker  # they really shared the queue


def _workloads_saved(engine: Engine, run_id: int | None) -> int:
    if run_id is None:
        return 0
    with Session(engine) as session:
        return session.scalar(select(func.count()).select_from(WorkloadResultModel)
                              .where(WorkloadResultModel.run_id == run_id)) or 0


def _running_with_a_saved_workload(engine: Engine) -> bool:
    (request,) = requests_of(engine)
    return request.status is RequestStatus.RUNNING and _workloads_saved(engine, request.run_id) >= 1


def test_a_killed_workers_request_is_requeued_and_completes_on_another(
        engine: Engine, db_url: str, files: dict[str, Path]) -> None:
    add_schedule(engine, "long", files["slow"], files["two_part"])
    enqueue_schedule(engine, "long", slot=False)
    doomed = spawn_tracker("worker", "--db", db_url, *FAST_WORKER)
    try:
        wait_for(lambda: _running_with_a_saved_workload(engine), 60, "the first workload")
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=30)
    (cut,) = requests_of(engine)
    assert cut.status is RequestStatus.RUNNING  # nobody could tell yet
    rescuer = spawn_tracker("worker", "--db", db_url, "--exit-when-empty", *FAST_WORKER)
    out = _finish(rescuer)

    (done,) = requests_of(engine)
    assert done.status is RequestStatus.DONE and done.attempts == 2
    assert done.worker_id == f"{done.worker_id.split(':')[0]}:{rescuer.pid}"
    assert done.run_id is not None and done.run_id != cut.run_id
    assert cut.run_id is not None
    with Session(engine) as session:
        partial = fetch_run(session, cut.run_id)
        complete = fetch_run(session, done.run_id)
    assert partial.status is RunStatus.PARTIAL
    # the rescuer's first read of the store saw the worker's PID gone on this host
    assert f"(pid {doomed.pid} on host" in (partial.status_reason or "")
    assert "stopped without finishing (killed?); its request requeued" in \
        (partial.status_reason or "")
    assert [w.name for w in partial.workloads][:1] == ["quick"]  # what it measured is kept
    assert partial.workloads[0].summary.completed == 2
    assert complete.status is RunStatus.COMPLETED
    assert [w.name for w in complete.workloads] == ["quick", "long"]
    assert f"request {done.id}: run {done.run_id} completed" in out


def test_sigterm_keeps_the_partial_run_and_requeues_the_request(
        sqlite_url: str, files: dict[str, Path]) -> None:
    store = open_store(sqlite_url)
    try:
        add_schedule(store, "long", files["slow"], files["two_part"])
        enqueue_schedule(store, "long", slot=False)
        worker = spawn_tracker("worker", "--db", sqlite_url, *FAST_WORKER)
        wait_for(lambda: _running_with_a_saved_workload(store), 60, "the first workload")
        worker.send_signal(signal.SIGTERM)
        out = _finish(worker, 30)
        (request,) = requests_of(store)
        assert request.status is RequestStatus.QUEUED and request.attempts == 1
        assert "was stopped during the run" in (request.error or "")
        assert request.run_id is not None
        with Session(store) as session:
            run = fetch_run(session, request.run_id)
        assert run.status is RunStatus.PARTIAL and run.workloads[0].name == "quick"
        assert f"request {request.id}: requeued" in out
    finally:
        store.dispose()


def test_gpus_go_to_the_launch_env_of_a_launched_vllm_only(files: dict[str, Path],
                                                           tmp_path: Path) -> None:
    vllm = tmp_path / "vllm.yaml"
    vllm.write_text("name: v\ntarget:\n  kind: vllm\n  model: m\n  launch:\n"
                    "    env: {VLLM_LOGGING_LEVEL: INFO}\n", encoding="utf-8")
    loaded = load_config(vllm)
    placed = with_gpus(loaded, "2,3")
    assert placed.config.target.launch is not None
    assert placed.config.target.launch.env == {"VLLM_LOGGING_LEVEL": "INFO",
                                               "CUDA_VISIBLE_DEVICES": "2,3"}
    assert placed.version == loaded.version  # placement is not config
    assert loaded.config.target.launch is not None
    assert "CUDA_VISIBLE_DEVICES" not in loaded.config.target.launch.env
    bare = build_loaded_config(loaded.config.model_copy(
        update={"target": loaded.config.target.model_copy(update={"launch": None})}), "v")
    bare_placed = with_gpus(bare, "0")
    assert bare_placed.config.target.launch is not None
    assert bare_placed.config.target.launch.env == {"CUDA_VISIBLE_DEVICES": "0"}
    sim = load_config(files["fast"])
    assert with_gpus(sim, "0") is sim
