"""The nightly watch follows the prefix-cache hit rate: a fall (higher is better) after a config
change is one open regression record, attributed to the change; a rise is recorded as no
regression; a workload whose server never said what it cached has no series to watch."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.inputs.configs import ServingConfig, build_loaded_config
from tracker.inputs.suites import Suite, build_loaded_suite
from tracker.load.summary import compute_workload_summary
from tracker.pipeline.watch import WATCHED_METRICS, watch_run
from tracker.results import RequestRecord, RunStatus, TokenSource, WorkloadResult
from tracker.store.regressions import RegressionStatus, SeriesKey, fetch_metric_series
from tracker.store.runs import (
    begin_run,
    finish_run,
    save_config_version,
    save_suite,
    save_workload,
)

T0 = datetime(2026, 9, 1, 2, 0, tzinfo=UTC)
PROMPT_TOKENS = 1000
HIT_RATE = "prefix_cache_hit_rate"


def _workload(name: str, cached: int | None) -> WorkloadResult:
    """Four turns-2+ requests of a night, each with ``cached`` of its prompt tokens cached
    (None: the server did not say)."""
    records = tuple(RequestRecord(i, i * 0.1, 0.05, 0.4, (0.01,) * 3, 4, TokenSource.USAGE,
                                  PROMPT_TOKENS, TokenSource.USAGE, session=i, turn=2,
                                  cached_input_tokens=cached) for i in range(4))
    return WorkloadResult(name, 2, 4, 0, {}, T0, T0, records,
                          compute_workload_summary(records, 1.0))


def _store_history(engine: Engine, rates: list[float]) -> None:
    """One completed run a night; block_size goes 16 -> 64 on the night the rate steps."""
    suite = build_loaded_suite(Suite.model_validate({
        "name": "chat", "workloads": [{"name": "chat", "prompts": {
            "source": "synthetic", "input_tokens": 8}, "max_tokens": 4, "concurrency": 2,
            "num_requests": 4}]}), "baselines/chat.yaml")
    for night, rate in enumerate(rates):
        block_size = 16 if rate >= rates[0] * 0.9 else 64
        config = build_loaded_config(ServingConfig.model_validate({
            "name": "nightly", "target": {"kind": "sim", "model": "m"},
            "engine": {"block_size": block_size, "enable_prefix_caching": True}}),
            "configs/nightly.yaml")
        started = T0 + timedelta(days=night)
        with Session(engine) as session, session.begin():
            run_id = begin_run(session, config_version_id=save_config_version(session, config),
                               suite_id=save_suite(session, suite), started_at=started,
                               host="gpu-1", tracker_version="0.1.0", simulated=True,
                               environment={"driver": "550.54"})
            save_workload(session, run_id, 0, _workload("chat/turns-2+",
                                                        round(rate * PROMPT_TOKENS)))
            save_workload(session, run_id, 1, _workload("chat/unsaid", None))
            finish_run(session, run_id, RunStatus.COMPLETED, started, None)


def _noisy(before: float, after: float, nights: int, change_at: int) -> list[float]:
    rng = random.Random(1)
    return [(before if night < change_at else after) * (1.0 + rng.gauss(0.0, 0.01))
            for night in range(nights)]


def test_a_fall_of_the_hit_rate_is_an_open_regression_attributed_to_the_change(
        store: Engine) -> None:
    assert HIT_RATE in WATCHED_METRICS
    _store_history(store, _noisy(0.80, 0.55, 45, 30))
    with Session(store) as session, session.begin():
        found = watch_run(session, "nightly", "chat", ["chat/turns-2+", "chat/unsaid"])
        unsaid = fetch_metric_series(session, SeriesKey("nightly", "chat", "chat/unsaid",
                                                        HIT_RATE))
    [record] = [r for r in found if r.series.metric == HIT_RATE]
    assert record.series.workload == "chat/turns-2+"
    assert abs(record.location_index - 30) <= 1
    assert record.regressed is True  # it went down, and higher is better
    assert record.rel_change is not None and abs(record.rel_change + 0.31) < 0.03
    assert record.status is RegressionStatus.OPEN
    assert record.attribution is not None and "engine.block_size: 16 → 64" in record.attribution
    assert unsaid == []  # never measured: no series, never a rate of 0
    with Session(store) as session, session.begin():
        assert watch_run(session, "nightly", "chat", ["chat/turns-2+"]) == []  # never twice


def test_a_rise_of_the_hit_rate_is_recorded_as_no_regression(store: Engine) -> None:
    _store_history(store, _noisy(0.50, 0.80, 45, 30))
    with Session(store) as session, session.begin():
        found = watch_run(session, "nightly", "chat", ["chat/turns-2+"])
    [record] = [r for r in found if r.series.metric == HIT_RATE]
    assert record.regressed is False and record.rel_change is not None and record.rel_change > 0
