"""Run leases on the real databases: an abandoned run is reaped once, a live one never."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from tracker.inputs.configs import ServingConfig, build_loaded_config
from tracker.inputs.suites import Suite, build_loaded_suite
from tracker.results import RunStatus, WorkloadResult, WorkloadSummary
from tracker.store import fetch_run, open_store
from tracker.store.leases import (
    LEASE_GRACE_S,
    LEASE_S,
    RunLease,
    reap_abandoned_runs,
    renew_run_lease,
    take_run_lease,
)
from tracker.store.models import RunModel
from tracker.store.run_queue import (
    NewRequest,
    RequestStatus,
    claim_request,
    enqueue_requests,
    fetch_requests,
    finish_request,
    link_run,
    reap_stale_requests,
)
from tracker.store.runs import (
    begin_run,
    finish_run,
    save_config_version,
    save_suite,
    save_workload,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
HOST = socket.gethostname()
BY = "`tracker runs` (pid 1 on host test)"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _workload(name: str, completed: int) -> WorkloadResult:
    summary = WorkloadSummary(
        completed=completed, failed=0, duration_s=1.0, total_input_tokens=8 * completed,
        total_output_tokens=4 * completed, request_throughput_per_s=None,
        output_throughput_tokens_per_s=None, total_token_throughput_tokens_per_s=None,
        ttft=None, tpot=None, itl=None, e2el=None, output_tokens_source=None,
        input_tokens_source=None, errors={})
    return WorkloadResult(name=name, concurrency=1, num_requests=completed, warmup_requests=0,
                          params={}, started_at=NOW, ended_at=NOW, records=(), summary=summary)


def _running_run(engine: Engine, owner_pid: int, *, host: str = HOST,
                 lease_until: datetime = NOW + timedelta(seconds=LEASE_S),
                 measured: int = 1) -> int:
    config = build_loaded_config(ServingConfig.model_validate(
        {"name": "leased", "target": {"kind": "sim", "model": "sim-7b"}}), "leased.yaml")
    workloads = [{"name": f"w{i}", "prompts": {"source": "synthetic", "input_tokens": 8},
                  "max_tokens": 4, "concurrency": 1, "num_requests": 2} for i in range(3)]
    suite = build_loaded_suite(Suite.model_validate({"name": "three", "workloads": workloads}),
                               "three.yaml")
    with Session(engine) as session, session.begin():
        run_id = begin_run(session, config_version_id=save_config_version(session, config),
                           suite_id=save_suite(session, suite), started_at=NOW - timedelta(hours=1),
                           host=host, tracker_version="t", simulated=True, environment={})
        take_run_lease(session, run_id, owner_pid, lease_until - timedelta(seconds=LEASE_S))
        for position in range(measured):
            save_workload(session, run_id, position, _workload(f"w{position}", 2))
    return run_id


def _reap(engine: Engine, now: datetime = NOW) -> list[int]:
    with Session(engine) as session, session.begin():
        return [run.run_id for run in reap_abandoned_runs(session, now, BY)]


def _lease_columns(engine: Engine, run_id: int) -> tuple[int | None, datetime | None]:
    with Session(engine) as session:
        row = session.execute(select(RunModel.owner_pid, RunModel.lease_until)
                              .where(RunModel.id == run_id)).one()
    return row[0], row[1]


def test_a_run_whose_tracker_died_on_this_host_is_kept_as_partial_with_the_reason(
        store: Engine) -> None:
    pid = _dead_pid()
    run_id = _running_run(store, pid, measured=1)
    assert _reap(store) == [run_id]
    with Session(store) as session:
        run = fetch_run(session, run_id)
    assert run.status is RunStatus.PARTIAL
    assert run.status_reason is not None
    assert f"the tracker running it (pid {pid} on host {HOST}) stopped without finishing" \
        in run.status_reason
    assert f"marked partial by {BY}" in run.status_reason
    assert "1 measured workload result kept (the suite plans 3)" in run.status_reason
    assert [w.name for w in run.workloads] == ["w0"]  # what was measured is kept
    assert run.ended_at is not None and run.ended_at <= NOW
    assert _lease_columns(store, run_id) == (None, None)
    assert _reap(store) == []  # closed once


def test_a_run_that_measured_nothing_before_its_tracker_died_is_failed(store: Engine) -> None:
    run_id = _running_run(store, _dead_pid(), measured=0)
    assert _reap(store) == [run_id]
    with Session(store) as session:
        run = fetch_run(session, run_id)
    assert run.status is RunStatus.FAILED
    assert "0 measured workload results kept" in (run.status_reason or "")


def test_a_run_whose_tracker_is_alive_is_left_running(store: Engine) -> None:
    run_id = _running_run(store, os.getpid())
    assert _reap(store) == []
    with Session(store) as session:
        assert fetch_run(session, run_id).status is RunStatus.RUNNING


def test_a_run_on_another_host_is_reaped_only_once_its_lease_is_long_expired(
        store: Engine) -> None:
    run_id = _running_run(store, 12345, host="elsewhere", lease_until=NOW)
    assert _reap(store, NOW + timedelta(seconds=LEASE_GRACE_S - 1)) == []  # the PID is not ours
    assert _reap(store, NOW + timedelta(seconds=LEASE_GRACE_S + 1)) == [run_id]
    with Session(store) as session:
        run = fetch_run(session, run_id)
    assert run.status is RunStatus.PARTIAL
    assert "(pid 12345 on host elsewhere) has not renewed its lease since" in \
        (run.status_reason or "")


def test_a_renewed_lease_keeps_a_run_on_another_host(store: Engine) -> None:
    run_id = _running_run(store, 12345, host="elsewhere", lease_until=NOW)
    later = NOW + timedelta(seconds=LEASE_GRACE_S + 30)
    with Session(store) as session, session.begin():
        assert renew_run_lease(session, run_id, 12345, later)
        assert not renew_run_lease(session, run_id, 999, later)  # not the owner
    assert _reap(store, later + timedelta(seconds=1)) == []


def test_finishing_a_run_clears_its_owner_and_lease(store: Engine) -> None:
    run_id = _running_run(store, os.getpid())
    with Session(store) as session, session.begin():
        finish_run(session, run_id, RunStatus.COMPLETED, NOW, None)
        assert not renew_run_lease(session, run_id, os.getpid(), NOW)
    assert _lease_columns(store, run_id) == (None, None)


def test_the_lease_thread_renews_until_stopped(store: Engine) -> None:
    run_id = _running_run(store, os.getpid(), lease_until=NOW)
    lease = RunLease(store, run_id, os.getpid(), lease_s=0.2).start()
    try:
        deadline_s = time.monotonic() + 10
        while _lease_columns(store, run_id)[1] == NOW:
            assert time.monotonic() < deadline_s, "the lease was never renewed"
            time.sleep(0.02)
    finally:
        lease.stop()
    stopped_at = _lease_columns(store, run_id)[1]
    time.sleep(0.2)  # a renewal would be due by now
    assert _lease_columns(store, run_id)[1] == stopped_at


def _link_to_a_request(engine: Engine, run_id: int, worker_id: str) -> int:
    request = NewRequest(position=0, config_name="leased", config_path="leased.yaml",
                         config_body={}, suite_name="three", suite_path="three.yaml",
                         suite_body={}, labels={})
    with Session(engine) as session, session.begin():
        (request_id,) = enqueue_requests(session, None, None, [request], NOW)
        assert claim_request(session, worker_id, {}, None, NOW) is not None
        assert link_run(session, request_id, worker_id, run_id)
    return request_id


def test_a_run_whose_request_still_runs_is_left_to_the_queue_reaper(store: Engine) -> None:
    """A worker on another host that went silent: whether it is dead is the queue's reaper's to
    judge (by its heartbeat), not a reader's."""
    run_id = _running_run(store, _dead_pid(), host="another-host", measured=1)
    _link_to_a_request(store, run_id, "dead-worker")
    assert _reap(store) == []  # the request and its run end together, in the queue's reaper
    with Session(store) as session, session.begin():
        (reaped,) = reap_stale_requests(session, NOW + timedelta(seconds=1), NOW)
    assert reaped.requeued and reaped.run_status is RunStatus.PARTIAL
    assert _reap(store) == []  # closed once
    with Session(store) as session:
        reason = fetch_run(session, run_id).status_reason or ""
    assert "dead-worker stopped heartbeating" in reason and BY not in reason
    assert _lease_columns(store, run_id) == (None, None)


def test_a_lone_workers_run_is_closed_by_the_next_reader_once_its_pid_is_gone(
        store: Engine) -> None:
    """A worker SIGKILLed on this host, no other worker or scheduler running: the next command
    (or the dashboard) that opens the store closes its run and requeues its request."""
    run_id = _running_run(store, _dead_pid(), measured=1)
    request_id = _link_to_a_request(store, run_id, "killed-worker")
    assert _reap(store) == [run_id]
    with Session(store) as session:
        run = fetch_run(session, run_id)
        (request,) = [r for r in fetch_requests(session) if r.id == request_id]
    assert run.status is RunStatus.PARTIAL
    assert "stopped without finishing (killed?); its request requeued" in (run.status_reason or "")
    assert request.status is RequestStatus.QUEUED and "killed?" in (request.error or "")
    assert _reap(store) == []  # closed once
    with Session(store) as session, session.begin():
        assert reap_stale_requests(session, NOW + timedelta(seconds=1), NOW) == []


def test_a_run_whose_request_has_ended_is_reaped_here(store: Engine) -> None:
    run_id = _running_run(store, _dead_pid(), measured=1)
    request_id = _link_to_a_request(store, run_id, "worker-1")
    with Session(store) as session, session.begin():
        assert finish_request(session, request_id, "worker-1", RequestStatus.FAILED, run_id,
                              "internal error", NOW)
    assert _reap(store) == [run_id]


def test_opening_the_store_reaps_and_a_failing_reaper_does_not_stop_the_command(
        sqlite_url: str, caplog: pytest.LogCaptureFixture) -> None:
    engine = open_store(sqlite_url)
    try:
        dead = _running_run(engine, _dead_pid())
        blocked = _running_run(engine, _dead_pid())
    finally:
        engine.dispose()
    reopened = open_store(sqlite_url)
    try:
        with Session(reopened) as session:
            assert fetch_run(session, dead).status is RunStatus.PARTIAL
            assert fetch_run(session, blocked).status is RunStatus.PARTIAL
        with Session(reopened) as session, session.begin():
            session.execute(text("UPDATE runs SET status = 'running', owner_pid = :pid "
                                 "WHERE id = :id"), {"pid": _dead_pid(), "id": blocked})
            session.execute(text("CREATE TRIGGER no_run_updates BEFORE UPDATE ON runs "
                                 "BEGIN SELECT RAISE(ABORT, 'runs are read-only here'); END"))
    finally:
        reopened.dispose()
    with caplog.at_level(logging.WARNING, logger="tracker.store.leases"):
        engine = open_store(sqlite_url)  # the reaper fails; the command goes on
    try:
        with Session(engine) as session:
            assert fetch_run(session, blocked).status is RunStatus.RUNNING
    finally:
        engine.dispose()
    assert "could not check for runs left running by a stopped tracker" in caplog.text
    assert "runs are read-only here" in caplog.text
