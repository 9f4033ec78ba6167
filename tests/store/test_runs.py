"""Saving and fetching runs on real databases (SQLite file and PostgreSQL) with the migrations."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session

from tracker.inputs.configs import LoadedConfig, ServingConfig, build_loaded_config
from tracker.inputs.suites import LoadedSuite, Suite, build_loaded_suite
from tracker.results import (
    LatencyStats,
    RequestRecord,
    RunStatus,
    TokenSource,
    VersionRef,
    WorkloadResult,
    WorkloadSummary,
)
from tracker.store import (
    NotFoundError,
    begin_run,
    fetch_config_versions,
    fetch_run,
    fetch_runs,
    finish_run,
    open_store,
    save_config_version,
    save_suite,
    save_workload,
)
from tracker.store.models import RequestRecordModel, RunModel, WorkloadResultModel

T0 = datetime(2026, 11, 3, 9, 30, tzinfo=UTC)


def _config(name: str = "sim-small", max_num_seqs: int = 64) -> LoadedConfig:
    config = ServingConfig.model_validate({
        "name": name,
        "target": {"kind": "sim", "model": "sim-7b"},
        "engine": {"max_num_seqs": max_num_seqs, "block_size": 16},
    })
    return build_loaded_config(config, f"configs/{name}.yaml")


def _suite() -> LoadedSuite:
    suite = Suite.model_validate({
        "name": "smoke",
        "seed": 7,
        "workloads": [
            {"name": "short", "prompts": {"source": "synthetic", "input_tokens": 8},
             "max_tokens": 4, "concurrency": 2, "num_requests": 2},
            {"name": "failing", "prompts": {"source": "fixed", "text": "hi"},
             "max_tokens": 4, "concurrency": 1, "num_requests": 2},
        ],
    })
    return build_loaded_suite(suite, "baselines/smoke.yaml")


def _stats(count: int, base_s: float) -> LatencyStats:
    return LatencyStats(count, base_s, base_s * 0.9, base_s / 10, base_s * 1.5, base_s * 2.25)


def _ok_workload() -> WorkloadResult:
    records = (
        RequestRecord(0, 0.0, 0.1234567890123, 0.5, (0.1, 0.0, 0.2000000000000001), 4,
                      TokenSource.USAGE, 8, TokenSource.CLIENT),
        RequestRecord(1, 0.01, 0.15, 0.55, (0.125, 0.125, 0.15), 4,
                      TokenSource.CHUNKS, 8, TokenSource.USAGE),
    )
    summary = WorkloadSummary(
        completed=2, failed=0, duration_s=0.56, total_input_tokens=16, total_output_tokens=8,
        request_throughput_per_s=3.5714285714285716, output_throughput_tokens_per_s=14.28,
        total_token_throughput_tokens_per_s=42.86, ttft=_stats(2, 0.137), tpot=_stats(2, 0.12),
        itl=_stats(6, 0.11), e2el=_stats(2, 0.525), output_tokens_source=TokenSource.MIXED,
        input_tokens_source=TokenSource.CLIENT,
    )
    return WorkloadResult(
        name="short", concurrency=2, num_requests=2, warmup_requests=0,
        params={"max_tokens": 4, "prompts": {"input_tokens": 8, "source": "synthetic"}},
        started_at=T0, ended_at=T0 + timedelta(seconds=1), records=records, summary=summary,
    )


def _failed_workload() -> WorkloadResult:
    records = tuple(
        RequestRecord(i, i * 0.5, None, None, (), None, None, None, None,
                      error_class="http_503", error="Service Unavailable: engine overloaded")
        for i in range(2)
    )
    summary = WorkloadSummary(
        completed=0, failed=2, duration_s=1.0, total_input_tokens=0, total_output_tokens=0,
        request_throughput_per_s=None, output_throughput_tokens_per_s=None,
        total_token_throughput_tokens_per_s=None, ttft=None, tpot=None, itl=None, e2el=None,
        output_tokens_source=None, input_tokens_source=None, errors={"http_503": 2},
    )
    return WorkloadResult(
        name="failing", concurrency=1, num_requests=2, warmup_requests=1, params={},
        started_at=T0 + timedelta(seconds=2), ended_at=T0 + timedelta(seconds=3),
        records=records, summary=summary, complete=False,
    )


def _begin(session: Session, started_at: datetime = T0, config: LoadedConfig | None = None) -> int:
    return begin_run(
        session,
        config_version_id=save_config_version(session, config or _config()),
        suite_id=save_suite(session, _suite()),
        started_at=started_at,
        host="bench-01",
        tracker_version="0.1.0",
        simulated=True,
        environment={"python": "3.11.7", "gpu": None},
    )


def _save_run(engine: Engine, workloads: tuple[WorkloadResult, ...]) -> int:
    with Session(engine) as session, session.begin():
        run_id = _begin(session)
    for position, workload in enumerate(workloads):
        with Session(engine) as session, session.begin():
            save_workload(session, run_id, position, workload)
    with Session(engine) as session, session.begin():
        finish_run(session, run_id, RunStatus.PARTIAL, T0 + timedelta(seconds=4),
                   "workload 'failing': 2 of 2 requests failed")
    return run_id


def test_run_round_trips_with_workloads_summaries_and_records(store: Engine) -> None:
    workloads = (_ok_workload(), _failed_workload())
    run_id = _save_run(store, workloads)

    with Session(store) as session:
        run = fetch_run(session, run_id)

    config, suite = _config(), _suite()
    assert run.run_id == run_id
    assert run.status is RunStatus.PARTIAL
    assert run.status_reason == "workload 'failing': 2 of 2 requests failed"
    assert run.simulated is True
    assert run.config == VersionRef("sim-small", config.version)
    assert run.suite == VersionRef("smoke", suite.version)
    assert run.config_body == config.canonical
    assert (run.started_at, run.ended_at) == (T0, T0 + timedelta(seconds=4))
    assert (run.host, run.tracker_version) == ("bench-01", "0.1.0")
    assert run.environment == {"python": "3.11.7", "gpu": None}
    assert run.workloads == workloads  # every field, floats bit for bit


def test_fetched_enums_are_members_not_strings(store: Engine) -> None:
    run_id = _save_run(store, (_ok_workload(),))
    with Session(store) as session:
        workload = fetch_run(session, run_id).workloads[0]
    assert workload.summary.output_tokens_source is TokenSource.MIXED
    assert workload.records[1].output_tokens_source is TokenSource.CHUNKS


def test_run_without_workloads_is_running_until_finished(store: Engine) -> None:
    with Session(store) as session, session.begin():
        run_id = _begin(session)
    with Session(store) as session:
        run = fetch_run(session, run_id)
    assert (run.status, run.ended_at, run.workloads) == (RunStatus.RUNNING, None, ())


def test_fetch_run_of_an_unknown_id_says_how_to_list_runs(store: Engine) -> None:
    with Session(store) as session, pytest.raises(NotFoundError) as excinfo:
        fetch_run(session, 42)
    assert str(excinfo.value) == "run 42 not found; list runs with `tracker runs`"


def test_finish_run_of_an_unknown_id_raises_not_found(store: Engine) -> None:
    with Session(store) as session, pytest.raises(NotFoundError, match="run 7 not found"):
        finish_run(session, 7, RunStatus.FAILED, T0, "target died")


def test_config_versions_are_stored_once_and_listed_oldest_first(store: Engine) -> None:
    first, second = _config(max_num_seqs=64), _config(max_num_seqs=128)
    with Session(store) as session, session.begin():
        first_id = save_config_version(session, first)
        assert save_config_version(session, first) == first_id
    with Session(store) as session, session.begin():
        assert save_config_version(session, replace(first, path="elsewhere.yaml")) == first_id
        second_id = save_config_version(session, second)
        save_config_version(session, _config(name="other"))
    with Session(store) as session:
        history = fetch_config_versions(session, "sim-small")

    assert second_id != first_id
    assert [row.version for row in history] == [first.version, second.version]
    assert history[1].canonical == second.canonical
    assert history[0].first_seen_at <= history[1].first_seen_at
    assert history[0].first_seen_at.tzinfo is UTC


def test_suites_are_stored_once_per_version(store: Engine) -> None:
    with Session(store) as session, session.begin():
        assert save_suite(session, _suite()) == save_suite(session, _suite())


def test_fetch_runs_lists_newest_first_with_request_totals(store: Engine) -> None:
    with Session(store) as session, session.begin():
        older = _begin(session, started_at=T0)
        newer = _begin(session, started_at=T0 + timedelta(hours=1))
        save_workload(session, newer, 0, _ok_workload())
        save_workload(session, newer, 1, _failed_workload())

    with Session(store) as session:
        listing = fetch_runs(session)
        assert [row.run_id for row in fetch_runs(session, limit=1)] == [newer]

    assert [row.run_id for row in listing] == [newer, older]
    top = listing[0]
    assert (top.workloads, top.completed, top.failed) == (2, 2, 2)
    assert (listing[1].workloads, listing[1].completed, listing[1].failed) == (0, 0, 0)
    assert top.status is RunStatus.RUNNING and top.simulated
    assert (top.config_name, top.suite_name) == ("sim-small", "smoke")
    assert top.config_version == _config().version
    assert top.started_at == T0 + timedelta(hours=1) and top.ended_at is None


def test_deleting_a_run_deletes_its_workloads_and_records(store: Engine) -> None:
    run_id = _save_run(store, (_ok_workload(), _failed_workload()))
    with Session(store) as session, session.begin():
        session.delete(session.get_one(RunModel, run_id))
    with Session(store) as session:
        assert session.scalar(select(func.count()).select_from(WorkloadResultModel)) == 0
        assert session.scalar(select(func.count()).select_from(RequestRecordModel)) == 0


def test_foreign_keys_are_enforced(store: Engine) -> None:
    with Session(store) as session, session.begin(), pytest.raises(IntegrityError):
        save_workload(session, 999, 0, _ok_workload())


def test_naive_timestamps_are_refused(store: Engine) -> None:
    with Session(store) as session, session.begin(), pytest.raises(StatementError, match="naive"):
        _begin(session, started_at=datetime(2026, 11, 3, 9, 30))


def test_sqlite_returns_tz_aware_utc_datetimes(sqlite_url: str) -> None:
    engine = open_store(sqlite_url)
    try:
        started_at = datetime(2026, 11, 3, 11, 30, tzinfo=timezone(timedelta(hours=2)))
        with Session(engine) as session, session.begin():
            run_id = _begin(session, started_at=started_at)
        with Session(engine) as session:
            run = fetch_run(session, run_id)
    finally:
        engine.dispose()
    assert run.started_at == started_at
    assert run.started_at.tzinfo is UTC
    assert run.started_at.hour == 9


def test_session_turn_and_requested_input_round_trip(store: Engine) -> None:
    records = (
        RequestRecord(0, 0.0, 0.1, 0.5, (0.1,), 4, TokenSource.USAGE, 259, TokenSource.USAGE,
                      requested_input_tokens=256, session=0, turn=1),
        RequestRecord(1, 0.6, 0.05, 0.4, (0.1,), 4, TokenSource.USAGE, 301, TokenSource.USAGE,
                      session=0, turn=2),
    )
    base = _ok_workload()
    workload = replace(base, name="chat", records=records,
                       summary=replace(base.summary, input_token_count_mismatches=1))
    run_id = _save_run(store, (workload, _ok_workload()))
    with Session(store) as session:
        chat, short = fetch_run(session, run_id).workloads
    assert chat.records == records
    assert chat.summary.input_token_count_mismatches == 1
    assert short.summary.input_token_count_mismatches is None
    assert [(r.session, r.turn, r.requested_input_tokens) for r in short.records] == \
        [(None, None, None)] * 2
