"""Regression records and the series/config lookups, on SQLite and PostgreSQL with the migrations."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, delete
from sqlalchemy.orm import Session

from tracker.inputs.configs import LoadedConfig, ServingConfig, build_loaded_config
from tracker.inputs.suites import LoadedSuite, Suite, build_loaded_suite
from tracker.results import (
    ClientHealth,
    LatencyStats,
    RequestRecord,
    RunStatus,
    TokenSource,
    WorkloadResult,
    WorkloadSummary,
)
from tracker.store import NotFoundError
from tracker.store.models import RunModel
from tracker.store.regressions import (
    RegressionStatus,
    SeriesKey,
    fetch_config_version,
    fetch_metric_series,
    fetch_regressions,
    fetch_series_regressions,
    save_regression,
    update_regression_status,
)
from tracker.store.runs import (
    begin_run,
    finish_run,
    save_config_version,
    save_suite,
    save_workload,
)

T0 = datetime(2026, 11, 3, 2, 0, tzinfo=UTC)
SERIES = SeriesKey("sim-small", "smoke", "short", "ttft_median_s")


def _config(max_num_seqs: int = 64) -> LoadedConfig:
    config = ServingConfig.model_validate({
        "name": "sim-small", "target": {"kind": "sim", "model": "sim-7b"},
        "engine": {"max_num_seqs": max_num_seqs, "block_size": 16}})
    return build_loaded_config(config, "configs/sim-small.yaml")


def _suite() -> LoadedSuite:
    suite = Suite.model_validate({"name": "smoke", "seed": 7, "workloads": [
        {"name": "short", "prompts": {"source": "synthetic", "input_tokens": 8},
         "max_tokens": 4, "concurrency": 2, "num_requests": 2}]})
    return build_loaded_suite(suite, "baselines/smoke.yaml")


def _workload(ttft_median_s: float) -> WorkloadResult:
    stats = LatencyStats(2, 0.13, ttft_median_s, 0.01, 0.15, 0.16)
    records = tuple(RequestRecord(i, i * 0.01, 0.12, 0.5, (0.1,), 4, TokenSource.USAGE, 8,
                                  TokenSource.USAGE) for i in range(2))
    summary = WorkloadSummary(
        completed=2, failed=0, duration_s=0.5, total_input_tokens=16, total_output_tokens=8,
        request_throughput_per_s=4.0, output_throughput_tokens_per_s=16.0,
        total_token_throughput_tokens_per_s=48.0, ttft=stats, tpot=stats, itl=stats, e2el=stats,
        output_tokens_source=TokenSource.USAGE, input_tokens_source=TokenSource.USAGE)
    return WorkloadResult(name="short", concurrency=2, num_requests=2, warmup_requests=0,
                          params={}, started_at=T0, ended_at=T0 + timedelta(seconds=1),
                          records=records, summary=summary)


def _run(engine: Engine, night: int, max_num_seqs: int = 64, ttft_scale: float = 1.0,
         status: RunStatus = RunStatus.COMPLETED, client_bound: bool = False) -> int:
    workload = _workload(0.12 * ttft_scale)
    if client_bound:
        health = ClientHealth(0.99, 0.03, 0.05, None, None, None, client_bound=True,
                              reason="event-loop lag p99 30 ms")
        workload = replace(workload, summary=replace(workload.summary, client=health))
    with Session(engine) as session, session.begin():
        run_id = begin_run(
            session, config_version_id=save_config_version(session, _config(
                max_num_seqs=max_num_seqs)),
            suite_id=save_suite(session, _suite()), started_at=T0 + timedelta(days=night),
            host="gpu-1", tracker_version="0.1.0", simulated=True,
            environment={"driver": "550.54", "night": night})
        save_workload(session, run_id, 0, workload)
        finish_run(session, run_id, status, T0 + timedelta(days=night, hours=1), None)
    return run_id


def _save(session: Session, run_id: int | None, **extra: object) -> int:
    values: dict[str, object] = {"run_id": run_id, "location_index": 3, "before": 0.12,
                                 "after": 0.15, "rel_change": 0.25, "regressed": True}
    values.update(extra)
    return save_regression(session, SERIES, **values)  # type: ignore[arg-type]


def test_a_regression_is_saved_open_and_fetched_back(store: Engine) -> None:
    run_id = _run(store, 0)
    with Session(store) as session, session.begin():
        regression_id = _save(session, run_id, attribution="engine.max_num_seqs: 64 → 32",
                              detected_at=T0)
    with Session(store) as session:
        [record] = fetch_regressions(session)
    assert record.id == regression_id
    assert record.series == SERIES
    assert (record.run_id, record.location_index) == (run_id, 3)
    assert (record.before, record.after, record.rel_change) == (0.12, 0.15, 0.25)
    assert record.status is RegressionStatus.OPEN
    assert record.attribution == "engine.max_num_seqs: 64 → 32"
    assert record.detected_at == T0 and record.detected_at.tzinfo is not None


def test_status_and_note_are_updated_and_filtered_on(store: Engine) -> None:
    with Session(store) as session, session.begin():
        first, second = _save(session, None), _save(session, None, location_index=9)
    later = T0 + timedelta(days=1)
    with Session(store) as session, session.begin():
        record = update_regression_status(session, first, RegressionStatus.EXPECTED,
                                          "fp8 KV cache trades latency for memory", now=later,
                                          by="oncall@example.com")
    assert record.status is RegressionStatus.EXPECTED and record.updated_at == later
    assert record.updated_by == "oncall@example.com"
    with Session(store) as session:
        expected = fetch_regressions(session, status=RegressionStatus.EXPECTED)
        still_open = fetch_regressions(session, status=RegressionStatus.OPEN, series=SERIES)
        other = fetch_regressions(session, series=replace(SERIES, metric="tpot_median_s"))
    assert [r.note for r in expected] == ["fp8 KV cache trades latency for memory"]
    assert [(r.updated_by, r.id) for r in still_open] == [(None, second)]  # nobody triaged it
    assert [r.id for r in still_open] == [second]
    assert other == []


def test_updating_an_unknown_regression_raises_not_found(store: Engine) -> None:
    with Session(store) as session, pytest.raises(NotFoundError, match="regression 42"):
        update_regression_status(session, 42, RegressionStatus.FIXED)


def test_deleting_the_run_keeps_the_record_without_it(store: Engine) -> None:
    run_id = _run(store, 0)
    with Session(store) as session, session.begin():
        _save(session, run_id)
    with Session(store) as session, session.begin():
        session.execute(delete(RunModel).where(RunModel.id == run_id))
    with Session(store) as session:
        [record] = fetch_regressions(session)
    assert record.run_id is None


def test_the_metric_series_lists_completed_runs_oldest_first(store: Engine) -> None:
    ids = [_run(store, 2), _run(store, 0), _run(store, 1, max_num_seqs=32, ttft_scale=2.0),
           _run(store, 3, status=RunStatus.FAILED)]
    with Session(store) as session:
        points = fetch_metric_series(session, SERIES)
    assert [p.run_id for p in points] == [ids[1], ids[2], ids[0]]
    assert points[1].value == pytest.approx(points[0].value * 2.0)
    assert points[1].config_body["engine"]["max_num_seqs"] == 32
    assert points[2].environment["night"] == 2


def test_a_stored_config_version_is_found_by_prefix_or_name(store: Engine) -> None:
    _run(store, 0)
    version = _config().version
    with Session(store) as session:
        assert fetch_config_version(session, version[:8])[1].version == version
        name, row = fetch_config_version(session, f"sim-small@{version[:10]}")
        assert (name, row.canonical["engine"]["max_num_seqs"]) == ("sim-small", 64)
        with pytest.raises(NotFoundError, match="no stored config version"):
            fetch_config_version(session, "other@" + version[:8])


def test_client_bound_runs_stay_in_the_series(store: Engine) -> None:
    """A host that starves the client every night must not leave the watch without a series."""
    quiet = _run(store, 0)
    busy = _run(store, 1, ttft_scale=3.0, client_bound=True)
    with Session(store) as session:
        points = fetch_metric_series(session, SERIES)
    assert [p.run_id for p in points] == [quiet, busy]


def test_an_improvement_is_saved_with_its_own_status_and_its_interval(store: Engine) -> None:
    with Session(store) as session, session.begin():
        worse = _save(session, None, interval=(0.18, 0.32))
        better = _save(session, None, location_index=9, before=0.15, after=0.12,
                       rel_change=-0.2, regressed=False, interval=(-0.25, -0.15))
        unknown = _save(session, None, location_index=15, regressed=None)
    with Session(store) as session:
        still_open = fetch_regressions(session, status=RegressionStatus.OPEN)
        improvements = fetch_regressions(session, status=RegressionStatus.IMPROVEMENT)
    assert sorted(r.id for r in still_open) == [worse, unknown]  # a regression, or unknown
    [improvement] = improvements
    assert improvement.id == better and improvement.interval == (-0.25, -0.15)
    assert next(r for r in still_open if r.id == worse).interval == (0.18, 0.32)
    assert next(r for r in still_open if r.id == unknown).interval is None


def test_an_interval_whose_ends_are_swapped_is_refused(store: Engine) -> None:
    with Session(store) as session, pytest.raises(ValueError, match=r"low must not exceed high"):
        _save(session, None, interval=(0.3, 0.1))


def test_trends_reads_the_records_of_a_metric_on_its_configs_and_suites(store: Engine) -> None:
    with Session(store) as session, session.begin():
        first = _save(session, None, detected_at=T0)
        second = _save(session, None, location_index=9, regressed=False,
                       detected_at=T0 + timedelta(days=1))
        save_regression(session, replace(SERIES, metric="tpot_median_s"), run_id=None,
                        location_index=3, before=1.0, after=2.0, rel_change=1.0, regressed=True)
        save_regression(session, replace(SERIES, config_name="other"), run_id=None,
                        location_index=3, before=1.0, after=2.0, rel_change=1.0, regressed=True)
    with Session(store) as session:
        found = fetch_series_regressions(session, "ttft_median_s", configs=["sim-small"],
                                         suites=["smoke"])
        none = fetch_series_regressions(session, "ttft_median_s", configs=["sim-small"],
                                        suites=["smoke"], workloads=["long"])
    assert [r.id for r in found] == [first, second]  # every status, oldest first
    assert none == []
