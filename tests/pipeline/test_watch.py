"""The nightly regression watch on a real store: one record per change, attributed, never twice."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.inputs.configs import ServingConfig, build_loaded_config
from tracker.inputs.suites import Suite, build_loaded_suite
from tracker.pipeline.watch import WATCHED_METRICS, compute_alerts, record_regressions, watch_run
from tracker.results import (
    LatencyStats,
    RequestRecord,
    RunStatus,
    TokenSource,
    WorkloadResult,
    WorkloadSummary,
)
from tracker.store.regressions import RegressionStatus, SeriesKey, fetch_regressions
from tracker.store.runs import (
    begin_run,
    finish_run,
    save_config_version,
    save_suite,
    save_workload,
)

T0 = datetime(2026, 9, 1, 2, 0, tzinfo=UTC)
SERIES = SeriesKey("nightly", "smoke", "short", "ttft_median_s")


def _workload(ttft_median_s: float) -> WorkloadResult:
    stats = LatencyStats(2, ttft_median_s, ttft_median_s, 0.001, ttft_median_s, ttft_median_s)
    records = tuple(RequestRecord(i, 0.0, ttft_median_s, 0.5, (), 4, TokenSource.USAGE, 8,
                                  TokenSource.USAGE) for i in range(2))
    summary = WorkloadSummary(
        completed=2, failed=0, duration_s=0.5, total_input_tokens=16, total_output_tokens=8,
        request_throughput_per_s=4.0, output_throughput_tokens_per_s=16.0,
        total_token_throughput_tokens_per_s=48.0, ttft=stats, tpot=stats, itl=stats, e2el=stats,
        output_tokens_source=TokenSource.USAGE, input_tokens_source=TokenSource.USAGE)
    return WorkloadResult(name="short", concurrency=2, num_requests=2, warmup_requests=0,
                          params={}, started_at=T0, ended_at=T0, records=records,
                          summary=summary)


def _store_history(engine: Engine, nights: int, change_at: int) -> None:
    rng = random.Random(1)
    suite = build_loaded_suite(Suite.model_validate({
        "name": "smoke", "workloads": [{"name": "short", "prompts": {
            "source": "synthetic", "input_tokens": 8}, "max_tokens": 4, "concurrency": 2,
            "num_requests": 2}]}), "baselines/smoke.yaml")
    for night in range(nights):
        seqs = 256 if night < change_at else 128
        config = build_loaded_config(ServingConfig.model_validate({
            "name": "nightly", "target": {"kind": "sim", "model": "m"},
            "engine": {"max_num_seqs": seqs}}), "configs/nightly.yaml")
        ttft = (0.100 if night < change_at else 0.120) * (1.0 + rng.gauss(0.0, 0.01))
        started = T0 + timedelta(days=night)
        with Session(engine) as session, session.begin():
            run_id = begin_run(session, config_version_id=save_config_version(session, config),
                               suite_id=save_suite(session, suite), started_at=started,
                               host="gpu-1", tracker_version="0.1.0", simulated=True,
                               environment={"driver": "550.54"})
            save_workload(session, run_id, 0, _workload(ttft))
            finish_run(session, run_id, RunStatus.COMPLETED, started, None)


def test_a_step_is_recorded_once_with_the_engine_arg_that_changed(store: Engine) -> None:
    _store_history(store, 45, 30)
    with Session(store) as session, session.begin():
        [record] = record_regressions(session, SERIES)
    assert abs(record.location_index - 30) <= 1
    assert record.regressed is True  # TTFT went up: lower is better
    assert record.rel_change is not None and abs(record.rel_change - 0.2) < 0.03
    assert record.status is RegressionStatus.OPEN
    assert record.attribution is not None and "engine.max_num_seqs: 256 → 128" in record.attribution
    with Session(store) as session, session.begin():
        assert record_regressions(session, SERIES) == []  # the next night: nothing new
    with Session(store) as session:
        assert len(fetch_regressions(session, series=SERIES)) == 1


def test_a_quiet_history_records_nothing(store: Engine) -> None:
    _store_history(store, 30, 99)
    with Session(store) as session, session.begin():
        assert record_regressions(session, SERIES) == []


def test_replaying_gives_the_alerts_of_the_nightly_monitor() -> None:
    values = [100.0 + (i % 3) * 0.5 for i in range(30)] + [120.0 + (i % 3) * 0.5 for i in range(20)]
    assert [p.index for p in compute_alerts(values)] == [30]


def test_after_a_run_the_watch_covers_every_watched_series_of_its_workloads(store: Engine) -> None:
    _store_history(store, 45, 30)
    with Session(store) as session, session.begin():
        found = watch_run(session, "nightly", "smoke", ["short"])
    metrics = {record.series.metric for record in found}
    assert "ttft_median_s" in metrics  # the step the history carries
    assert metrics <= set(WATCHED_METRICS)
    assert all(record.series.workload == "short" for record in found)
    with Session(store) as session, session.begin():
        assert watch_run(session, "nightly", "smoke", ["short"]) == []  # never twice
