"""The run queue in the real databases: slots stored once, claims, heartbeats, stale workers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.scheduling.conftest import add_schedule, requests_of
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.results import RunStatus
from tracker.scheduling.queueing import enqueue_schedule, load_request_inputs, reap_stale
from tracker.store.run_queue import (
    RequestStatus,
    RunRequest,
    claim_request,
    finish_request,
    heartbeat_request,
    link_run,
    release_request,
)
from tracker.store.runs import begin_run, fetch_run, save_config_version, save_suite

T0 = datetime(2026, 1, 1, 2, 0, 0, 400_000, tzinfo=UTC)


def _claim(engine: Engine, worker: str, labels: dict[str, str] | None = None,
           now: datetime = T0) -> RunRequest | None:
    with Session(engine) as session, session.begin():
        return claim_request(session, worker, labels or {}, None, now)


def test_a_slot_fired_twice_is_queued_once(engine: Engine, files: dict[str, Path]) -> None:
    add_schedule(engine, "nightly", files["fast"], files["tiny"], cron="0 2 * * *", repeats=2)
    first = enqueue_schedule(engine, "nightly", slot=True, now=T0)
    again = enqueue_schedule(engine, "nightly", slot=True, now=T0 + timedelta(minutes=5))
    assert len(first) == 2 and again == []
    requests = requests_of(engine)
    assert [(r.slot_at, r.position) for r in requests] == \
        [(datetime(2026, 1, 1, 2, 0, tzinfo=UTC), 0), (datetime(2026, 1, 1, 2, 0, tzinfo=UTC), 1)]
    next_night = enqueue_schedule(engine, "nightly", slot=True, now=T0 + timedelta(days=1))
    run_now = enqueue_schedule(engine, "nightly", slot=False, now=T0)
    assert len(next_night) == 2 and len(run_now) == 2
    assert [r.slot_at for r in requests_of(engine)][-2:] == [None, None]


def test_a_request_carries_the_config_and_suite_it_was_queued_with(
        engine: Engine, files: dict[str, Path]) -> None:
    add_schedule(engine, "nightly", files["fast"], files["tiny"])
    queued_version = load_config(files["fast"]).version
    enqueue_schedule(engine, "nightly", slot=False, now=T0)
    files["fast"].write_text("broken: [", encoding="utf-8")  # edited after the slot fired
    (request,) = requests_of(engine)
    config, suite = load_request_inputs(request)
    assert (config.config.name, suite.suite.name) == ("fast-sim", "tiny")
    assert config.version == queued_version
    assert suite.version == load_suite(files["tiny"]).version


def test_claims_follow_labels_and_never_hand_out_a_request_twice(
        engine: Engine, files: dict[str, Path]) -> None:
    add_schedule(engine, "h100", files["fast"], files["tiny"], labels={"gpu": "h100"})
    add_schedule(engine, "any", files["fast"], files["tiny"])
    h100_id, = enqueue_schedule(engine, "h100", slot=False, now=T0)
    any_id, = enqueue_schedule(engine, "any", slot=False, now=T0)
    first = _claim(engine, "a100-box", {"gpu": "a100"})
    assert first is not None and first.id == any_id and first.attempts == 1
    assert _claim(engine, "a100-box-2", {"gpu": "a100"}) is None
    second = _claim(engine, "h100-box", {"gpu": "h100", "zone": "eu"})
    assert second is not None and second.id == h100_id
    assert second.status is RequestStatus.RUNNING and second.worker_id == "h100-box"
    assert _claim(engine, "h100-box-2", {"gpu": "h100"}) is None


def test_only_the_owner_heartbeats_and_finishes(engine: Engine, files: dict[str, Path]) -> None:
    add_schedule(engine, "any", files["fast"], files["tiny"])
    enqueue_schedule(engine, "any", slot=False, now=T0)
    request = _claim(engine, "w1")
    assert request is not None
    later = T0 + timedelta(seconds=5)
    with Session(engine) as session, session.begin():
        assert heartbeat_request(session, request.id, "w1", later)
        assert not heartbeat_request(session, request.id, "w2", later)
        assert not finish_request(session, request.id, "w2", RequestStatus.DONE, None, None, later)
        assert finish_request(session, request.id, "w1", RequestStatus.DONE, None, None, later)
    (done,) = requests_of(engine)
    assert done.status is RequestStatus.DONE and done.heartbeat_at == later


def _start_run(engine: Engine, files: dict[str, Path], request_id: int, worker: str) -> int:
    with Session(engine) as session, session.begin():
        config_id = save_config_version(session, load_config(files["fast"]))
        suite_id = save_suite(session, load_suite(files["tiny"]))
        run_id = begin_run(session, config_version_id=config_id, suite_id=suite_id,
                           started_at=T0, host="h", tracker_version="t", simulated=True,
                           environment={})
        assert link_run(session, request_id, worker, run_id)
    return run_id


def test_a_silent_worker_is_requeued_once_then_failed(engine: Engine,
                                                      files: dict[str, Path]) -> None:
    add_schedule(engine, "any", files["fast"], files["tiny"])
    enqueue_schedule(engine, "any", slot=False, now=T0)
    request = _claim(engine, "dead-1", now=T0)
    assert request is not None
    run_id = _start_run(engine, files, request.id, "dead-1")
    assert reap_stale(engine, 60, now=T0 + timedelta(seconds=59)) == []
    (reaped,) = reap_stale(engine, 60, now=T0 + timedelta(seconds=61))
    assert reaped.requeued and reaped.run_id == run_id
    assert reaped.run_status is RunStatus.FAILED  # nothing was measured before it died
    with Session(engine) as session:
        run = fetch_run(session, run_id)
    assert run.status is RunStatus.FAILED and "dead-1 stopped heartbeating" in (run.status_reason or "")
    (queued,) = requests_of(engine)
    assert queued.status is RequestStatus.QUEUED and queued.worker_id is None
    assert "requeued" in (queued.error or "")
    again = _claim(engine, "dead-2", now=T0 + timedelta(seconds=70))
    assert again is not None and again.attempts == 2 and again.run_id is None
    (final,) = reap_stale(engine, 60, now=T0 + timedelta(seconds=200))
    assert not final.requeued
    (failed,) = requests_of(engine)
    assert failed.status is RequestStatus.FAILED and "failed after 2 attempts" in (failed.error or "")


def test_a_stopping_worker_gives_its_request_back(engine: Engine, files: dict[str, Path]) -> None:
    add_schedule(engine, "any", files["fast"], files["tiny"])
    enqueue_schedule(engine, "any", slot=False, now=T0)
    request = _claim(engine, "w1")
    assert request is not None
    with Session(engine) as session, session.begin():
        assert release_request(session, request.id, "w2", "stopped", T0) is None
        assert release_request(session, request.id, "w1", "stopped", T0) is True
    assert requests_of(engine)[0].status is RequestStatus.QUEUED
