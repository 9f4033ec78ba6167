"""The nightly bisection on the simulator and a real store: nights on version A, then on B; once
the watch confirms the regression at the A → B boundary, one bisection is queued (when the
schedule enables it and B changes more than one field) and the worker runs it."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.local_http import WebhookReceiver
from tests.scheduling.conftest import requests_of, spawn_tracker
from tests.waiting import wait_for
from tracker.cli.main import main
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.pipeline.execute import register_inputs
from tracker.scheduling.alerts import WebhookSettings
from tracker.scheduling.nightly_bisect import find_boundary, load_stored_side
from tracker.scheduling.queueing import compute_suite_body, enqueue_schedule, utc_now
from tracker.scheduling.schedules import CLI_SOURCE, BisectSpec, ScheduleSpec, build_schedule_row
from tracker.scheduling.worker import Worker, WorkerSettings, with_gpus
from tracker.store.bisections import fetch_bisections
from tracker.store.db import alembic_config, open_store, upgrade_database
from tracker.store.regressions import RegressionStatus, SeriesPoint, fetch_regressions
from tracker.store.run_queue import (
    NewRequest,
    RequestKind,
    RequestStatus,
    RunRequest,
    enqueue_job,
)
from tracker.store.runs import fetch_runs
from tracker.store.schedule_rows import ScheduleBisect, fetch_schedule, save_schedule

# run_noise and noise 0: nights differ by their config and the machine's load alone. max_num_seqs
# 8 -> 2 under 8 streams queues requests (TTFT several times higher); the other fields are ones
# the simulator's speed does not depend on at this suite (the cache fits either way).
NIGHTLY_A = """\
name: nightly-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {seed: 1, prefill_s_per_token: 0.00002, decode_base_s: 0.002,
              decode_per_seq_s: 0.0001, decode_s_per_kv_gib: 0.0, run_noise: 0.0, noise: 0.0,
              gpu_memory_gib: 4, model_params_b: 1}
engine:
  max_num_seqs: 8
  max_model_len: 1024
"""
NIGHTLY_B = (NIGHTLY_A.replace("max_num_seqs: 8", "max_num_seqs: 2")
             .replace("max_model_len: 1024", "max_model_len: 2048") + "  swap_space: 8\n")
ONE_FIELD_B = NIGHTLY_A.replace("max_num_seqs: 8", "max_num_seqs: 2")

SUITE = """\
name: nightly-small
seed: 3
workloads:
  - name: busy
    prompts: {source: synthetic, input_tokens: 64}
    max_tokens: 12
    ignore_eos: true
    concurrency: 8
    num_requests: 16
    warmup_requests: 2
"""
FAST_WORKER = ("--heartbeat-s", "0.2", "--stale-after-s", "1.5", "--poll-s", "0.1")
A_NIGHTS = 8  # the monitor confirms a clear step after about 6 nights on 8 (analysis' tests)
MAX_B_NIGHTS = 10


def _schedule(engine: Engine, tmp_path: Path, *, enabled: bool) -> Path:
    config, suite = tmp_path / "nightly.yaml", tmp_path / "suite.yaml"
    config.write_text(NIGHTLY_A, encoding="utf-8")
    suite.write_text(SUITE, encoding="utf-8")
    spec = ScheduleSpec(name="nightly", cron="0 2 * * *", configs=[config.name],
                        suites=[suite.name],
                        bisect=BisectSpec(enabled=enabled, max_probes=6, max_minutes=10))
    with Session(engine) as session, session.begin():
        save_schedule(session, build_schedule_row(spec, tmp_path, CLI_SOURCE), utc_now())
    return config


def _night(engine: Engine, lines: list[str], webhook: WebhookSettings | None = None) -> None:
    """One slot's run, and whatever the worker finds queued after it (a bisection)."""
    enqueue_schedule(engine, "nightly", slot=False)
    Worker(engine, WorkerSettings(poll_s=0.05, exit_when_empty=True, webhook=webhook),
           emit=lines.append).run()


def _bisect_requests(engine: Engine) -> list[RunRequest]:
    return [r for r in requests_of(engine) if r.kind is RequestKind.BISECT]


def _regressed(engine: Engine) -> int:
    with Session(engine) as session:
        return sum(1 for r in fetch_regressions(session, status=RegressionStatus.OPEN)
                   if r.regressed is True)


def _nights_until_confirmed(engine: Engine, config: Path, head: str, lines: list[str],
                            webhook: WebhookSettings | None = None) -> int:
    """A's nights, then B's until the watch confirms a regression; the B nights it took."""
    for _ in range(A_NIGHTS):
        _night(engine, lines, webhook)
    assert _regressed(engine) == 0  # a quiet history on A
    config.write_text(head, encoding="utf-8")
    for night in range(1, MAX_B_NIGHTS + 1):
        _night(engine, lines, webhook)
        if _regressed(engine):
            return night
    raise AssertionError(f"no regression confirmed after {MAX_B_NIGHTS} nights on B")


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    engine = open_store(sqlite_url)
    try:
        yield engine
    finally:
        engine.dispose()


def test_a_confirmed_regression_at_a_several_field_change_bisects_once_to_max_num_seqs(
        sqlite_engine: Engine, tmp_path: Path) -> None:
    _check_one_bisection_names_max_num_seqs(sqlite_engine, tmp_path)


@pytest.mark.postgres
def test_the_nightly_bisection_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    engine = open_store(postgres_url)
    try:
        _check_one_bisection_names_max_num_seqs(engine, tmp_path)
    finally:
        engine.dispose()


def _check_one_bisection_names_max_num_seqs(engine: Engine, tmp_path: Path) -> None:
    lines: list[str] = []
    config = _schedule(engine, tmp_path, enabled=True)
    with Session(engine) as session:
        stored_schedule = fetch_schedule(session, "nightly")
    assert stored_schedule is not None and stored_schedule.bisect == ScheduleBisect(True, 6, 10.0)
    with WebhookReceiver() as receiver:
        _nights_until_confirmed(engine, config, NIGHTLY_B, lines,
                                WebhookSettings(receiver.url, timeout_s=5))
    [job] = _bisect_requests(engine)  # queued after the confirming night, and run by its worker
    assert job.status is RequestStatus.DONE, job.error
    assert job.job is not None and job.job["fields"] == [
        "engine.max_model_len", "engine.max_num_seqs", "engine.swap_space"]
    with Session(engine) as session:
        [stored] = fetch_bisections(session)
    assert stored.bisection_id == job.bisection_id
    assert (stored.config_name, stored.base_version, stored.head_version) == (
        "nightly-sim", job.job["base_version"], job.job["head_version"])
    assert stored.outcome == "found", stored.stop_reason
    assert [c["fields"] for c in stored.culprits] == [["engine.max_num_seqs"]]
    assert any(f"bisection {stored.bisection_id} culprit: engine.max_num_seqs" in line
               for line in lines), lines
    assert any(role == "probe" for _, role, _ in stored.runs)
    [alert] = [body["text"] for body in receiver.bodies if "Bisection" in body["text"]]
    assert "culprit: engine.max_num_seqs" in alert and f"bisection {stored.bisection_id}" in alert
    assert f"nightly-sim {stored.base_version[:12]} → {stored.head_version[:12]}" in alert
    # more nights on B: the watch looks again, and nothing is queued twice
    _night(engine, lines)
    assert len(_bisect_requests(engine)) == 1
    with Session(engine) as session:
        assert len(fetch_bisections(session)) == 1


def test_with_the_option_off_a_confirmed_regression_queues_nothing(
        sqlite_engine: Engine, tmp_path: Path) -> None:
    config = _schedule(sqlite_engine, tmp_path, enabled=False)
    _nights_until_confirmed(sqlite_engine, config, NIGHTLY_B, [])
    assert _bisect_requests(sqlite_engine) == []


def test_a_one_field_change_queues_nothing(sqlite_engine: Engine, tmp_path: Path) -> None:
    config = _schedule(sqlite_engine, tmp_path, enabled=True)
    _nights_until_confirmed(sqlite_engine, config, ONE_FIELD_B, [])
    assert _bisect_requests(sqlite_engine) == []


# --- failure modes -------------------------------------------------------------------------
# A head that the simulator refuses to start, as vLLM would: a max_model_len above the cache.
NO_START = NIGHTLY_A.replace("max_model_len: 1024", "max_model_len: 65536") + "  swap_space: 8\n"


def _queue_job(engine: Engine, tmp_path: Path, head_text: str) -> int:
    """A ``bisect`` job between A and a stored ``head_text`` version, as the watch would queue."""
    config = _schedule(engine, tmp_path, enabled=True)
    (tmp_path / "head.yaml").write_text(head_text, encoding="utf-8")
    base, head = load_config(config), load_config(tmp_path / "head.yaml")
    suite = load_suite(tmp_path / "suite.yaml")
    for loaded in (base, head):
        register_inputs(engine, loaded, suite)
    request = NewRequest(position=0, config_name=head.config.name, config_path=str(config),
                         config_body=dict(head.canonical), suite_name=suite.suite.name,
                         suite_path=suite.path, suite_body=compute_suite_body(suite))
    job = {"base_version": base.version, "head_version": head.version, "max_probes": 4,
           "max_minutes": None, "fields": [], "regression_ids": [], "after_run_id": None}
    with Session(engine) as session, session.begin():
        queued = enqueue_job(session, "nightly", request, RequestKind.BISECT, job,
                             f"bisect:test:{head.version}", utc_now())
    assert queued is not None
    return queued


def test_a_bisection_whose_target_does_not_start_is_recorded_and_the_worker_goes_on(
        sqlite_engine: Engine, sqlite_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    job_id = _queue_job(sqlite_engine, tmp_path, NO_START)
    enqueue_schedule(sqlite_engine, "nightly", slot=False)  # a night queued behind it
    lines: list[str] = []
    assert Worker(sqlite_engine, WorkerSettings(poll_s=0.05, exit_when_empty=True),
                  emit=lines.append).run() == 2
    job, night = sorted(requests_of(sqlite_engine), key=lambda r: r.id)
    assert job.id == job_id and job.status is RequestStatus.FAILED
    assert job.error is not None and "larger than the maximum" in job.error
    assert night.status is RequestStatus.DONE and night.run_id is not None  # the worker went on
    with Session(sqlite_engine) as session:
        [stored] = fetch_bisections(session)
    assert stored.bisection_id == job.bisection_id and stored.outcome == "failed"
    assert "larger than the maximum" in stored.stop_reason
    assert any(f"bisection {stored.bisection_id} could not run" in line for line in lines), lines
    assert main(["queue", "--db", sqlite_url]) == 0  # what an operator reads
    [row] = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith(f"{job_id} ")]
    assert " failed " in row and f"bisect {stored.bisection_id}" in row


def test_a_killed_workers_bisection_is_reaped_and_done_by_another_worker(
        sqlite_engine: Engine, sqlite_url: str, tmp_path: Path) -> None:
    job_id = _queue_job(sqlite_engine, tmp_path, NIGHTLY_B)
    doomed = spawn_tracker("worker", "--db", sqlite_url, *FAST_WORKER)
    try:
        wait_for(lambda: _probed_versions(sqlite_engine) > 2, timeout_s=90, what="a probe's run")
    finally:
        doomed.send_signal(signal.SIGKILL)
        doomed.communicate(timeout=30)
    [cut] = requests_of(sqlite_engine)
    assert cut.status is RequestStatus.RUNNING and cut.kind is RequestKind.BISECT
    rescuer = spawn_tracker("worker", "--db", sqlite_url, "--exit-when-empty", *FAST_WORKER)
    out, err = rescuer.communicate(timeout=120)
    assert rescuer.returncode == 0, err
    [done] = requests_of(sqlite_engine)
    assert done.id == job_id and done.status is RequestStatus.DONE and done.attempts == 2
    with Session(sqlite_engine) as session:
        [stored] = fetch_bisections(session)  # the killed worker's never got stored
    assert stored.bisection_id == done.bisection_id
    assert [c["fields"] for c in stored.culprits] == [["engine.max_num_seqs"]]
    assert f"bisection {stored.bisection_id} culprit: engine.max_num_seqs" in out + err


def test_sigterm_on_a_worker_bisecting_keeps_its_probes_and_gives_the_job_back(
        sqlite_engine: Engine, sqlite_url: str, tmp_path: Path) -> None:
    job_id = _queue_job(sqlite_engine, tmp_path, NIGHTLY_B)
    worker = spawn_tracker("worker", "--db", sqlite_url, "--exit-when-empty", *FAST_WORKER)
    try:
        wait_for(lambda: _probed_versions(sqlite_engine) > 2, timeout_s=90,
                 what="a probe's run (a third config version besides the gate's two)")
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, err
    [job] = requests_of(sqlite_engine)
    assert job.id == job_id and job.status is RequestStatus.QUEUED and job.attempts == 1
    assert job.error is not None and "was stopped during the run" in job.error
    with Session(sqlite_engine) as session:
        [stored] = fetch_bisections(session)
    assert stored.outcome == "interrupted", stored.stop_reason
    assert {role for _, role, _ in stored.runs} >= {"base", "head"}


def _probed_versions(engine: Engine) -> int:
    """Config versions run so far under ``NAME.probe``: the gate's base and head, then probes."""
    with Session(engine) as session:
        return len({run.config_version for run in fetch_runs(session, limit=1000)
                    if run.config_name.endswith(".probe")})


# --- the pieces --------------------------------------------------------------------------------


def _points(versions: str) -> list[SeriesPoint]:
    """One point per letter, the letter its config version."""
    return [SeriesPoint(i, utc_now(), 1.0, version, {}, "s", {}) for i, version in
            enumerate(versions)]


@pytest.mark.parametrize(("versions", "index", "boundary"), [
    ("AAAAABBBB", 5, 5),  # at the estimated location
    ("AAAAABBBB", 7, 5),  # two nights off: the span the attribution reads
    ("AAAAABBBB", 3, 5),
    ("AAAAABBBBB", 8, None),  # three nights off: not this change
    ("AAAAAAAAA", 5, None),  # no config change: the engine, the machine, noise
    ("AAAABCCCC", 5, None),  # two changes in reach: which one is not known
])
def test_the_boundary_is_the_one_version_change_near_the_change_point(
        versions: str, index: int, boundary: int | None) -> None:
    assert find_boundary(_points(versions), index) == boundary


def test_a_stored_side_is_renamed_out_of_the_series_and_placed_on_the_workers_gpus(
        sqlite_engine: Engine, tmp_path: Path) -> None:
    (tmp_path / "v.yaml").write_text("name: v\ntarget:\n  kind: vllm\n  model: m\n  launch:\n"
                                     "    env: {VLLM_LOGGING_LEVEL: INFO}\n", encoding="utf-8")
    (tmp_path / "suite.yaml").write_text(SUITE, encoding="utf-8")
    loaded = load_config(tmp_path / "v.yaml")
    register_inputs(sqlite_engine, loaded, load_suite(tmp_path / "suite.yaml"))
    with Session(sqlite_engine) as session:
        side = load_stored_side(session, "v", loaded.version, lambda c: with_gpus(c, "2,3"))
    assert side.label == f"v@{loaded.short_version}" and side.loaded.config.name == "v.probe"
    launch = side.loaded.config.target.launch
    assert launch is not None and launch.env == {"VLLM_LOGGING_LEVEL": "INFO",
                                                 "CUDA_VISIBLE_DEVICES": "2,3"}
    assert side.loaded.canonical["target"] == loaded.canonical["target"]  # only the name differs


def test_requests_and_schedules_from_before_revision_0011_are_runs_and_off(
        db_url: str, tmp_path: Path) -> None:
    engine = open_store(db_url)
    try:
        _schedule(engine, tmp_path, enabled=True)
        _queue_job(engine, tmp_path, NIGHTLY_B)
        enqueue_schedule(engine, "nightly", slot=False)
    finally:
        engine.dispose()
    command.downgrade(alembic_config(db_url), "0010")  # the older schema holds no bisect job
    before, after = upgrade_database(db_url)
    assert before == "0010" and after not in ("0010", None)  # up to the head again
    engine = open_store(db_url)
    try:
        [night] = requests_of(engine)
        assert night.kind is RequestKind.RUN and night.job is None
        with Session(engine) as session:
            schedule = fetch_schedule(session, "nightly")
        assert schedule is not None and schedule.bisect is None  # not set: off
    finally:
        engine.dispose()
