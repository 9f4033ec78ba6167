"""The nightly watch's records say how big the change is, and improvements are not open.

A literal history shaped like `tracker demo`'s, stored night by night and watched after each run
as a worker does: two config versions at one level, a third far better (prefix caching), a fourth
far worse (max_num_seqs cut). The record of the last step compares the third version's runs alone
with the runs since (not a level that mixes the older versions in), by the ratio of geometric
means over runs with its interval; the third version's step is stored as an improvement, which
no alert and no "open" list shows.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.inputs.configs import ServingConfig, build_loaded_config
from tracker.inputs.suites import Suite, build_loaded_suite
from tracker.metrics import GIB
from tracker.pipeline.watch import watch_run
from tracker.results import (
    GpuDeviceSummary,
    GpuTelemetry,
    LatencyStats,
    RequestRecord,
    RunStatus,
    TokenSource,
    WorkloadResult,
    WorkloadSummary,
)
from tracker.store.regressions import RegressionRecord, RegressionStatus, fetch_regressions
from tracker.store.runs import begin_run, finish_run, save_config_version, save_suite, save_workload

T0 = datetime(2026, 9, 1, 2, 0, tzinfo=UTC)
ENGINES: dict[str, dict[str, Any]] = {
    "v1": {"max_num_seqs": 256},
    "v2": {"max_num_seqs": 256, "quantization": "awq"},
    "v3": {"max_num_seqs": 256, "quantization": "awq", "enable_prefix_caching": True},
    "v4": {"max_num_seqs": 4, "quantization": "awq", "enable_prefix_caching": True},
}
# The simulated GPU's memory: 72 GiB of weights and KV pool in whole 2 MiB blocks; AWQ's smaller
# weights leave a remainder of a block unallocated from version 2 on (0.8 MB, -0.001 %)
MEMORY_BYTES = {"v1": 77309411328, "v2": 77308572467, "v3": 77308572467, "v4": 77308572467}
# (version, TTFT p99 in s, output tokens/s) per night: the demo's levels
NIGHTS = (
    [("v1", t, r) for t, r in zip([0.334, 0.311, 0.318, 0.331, 0.321, 0.313],
                                  [2543, 2604, 2600, 2509, 2602, 2575], strict=True)]
    + [("v2", t, r) for t, r in zip([0.307, 0.305, 0.321, 0.318, 0.310, 0.314],
                                    [3020, 3029, 2964, 2863, 2955, 2968], strict=True)]
    + [("v3", t, r) for t, r in zip([0.107, 0.114, 0.118, 0.117, 0.122, 0.112],
                                    [4580, 4759, 4603, 4845, 4679, 4683], strict=True)]
    + [("v4", t, r) for t, r in zip([0.717, 0.704, 0.604, 0.605, 0.590, 0.578, 0.591, 0.611],
                                    [2066, 2068, 2029, 2079, 2094, 2068, 2008, 2036],
                                    strict=True)]
)


def _workload(ttft_p99_s: float, throughput: float, memory_bytes: int) -> WorkloadResult:
    ttft = LatencyStats(16, ttft_p99_s / 2, ttft_p99_s / 2, 0.01, ttft_p99_s * 0.9, ttft_p99_s)
    flat = LatencyStats(16, 0.01, 0.01, 0.001, 0.012, 0.013)
    records = tuple(RequestRecord(i, 0.0, ttft_p99_s / 2, 0.5, (), 4, TokenSource.USAGE, 8,
                                  TokenSource.USAGE) for i in range(2))
    summary = WorkloadSummary(
        completed=16, failed=0, duration_s=1.0, total_input_tokens=64, total_output_tokens=64,
        request_throughput_per_s=throughput / 100.0, output_throughput_tokens_per_s=throughput,
        total_token_throughput_tokens_per_s=throughput * 2, ttft=ttft, tpot=flat, itl=flat,
        e2el=flat, output_tokens_source=TokenSource.USAGE, input_tokens_source=TokenSource.USAGE)
    device = GpuDeviceSummary(0, "H100", 80 * GIB, 40, memory_bytes, float(memory_bytes),
                              60.0, 90.0, 300.0, 400.0, 1800.0, 60.0)
    return WorkloadResult(name="chat", concurrency=16, num_requests=16, warmup_requests=0,
                          params={}, started_at=T0, ended_at=T0, records=records,
                          summary=summary,
                          gpu=GpuTelemetry(measured=True, sample_hz=10.0, devices=(device,)))


def _watch_history(engine: Engine) -> tuple[list[RegressionRecord], list[int]]:
    """Store the nights one by one, watching after each; every record stored, and the runs."""
    suite = build_loaded_suite(Suite.model_validate({
        "name": "load", "workloads": [{"name": "chat", "prompts": {
            "source": "synthetic", "input_tokens": 8}, "max_tokens": 4, "concurrency": 16,
            "num_requests": 16}]}), "baselines/load.yaml")
    found: list[RegressionRecord] = []
    run_ids: list[int] = []
    for night, (version, ttft, throughput) in enumerate(NIGHTS):
        config = build_loaded_config(ServingConfig.model_validate({
            "name": "demo", "target": {"kind": "sim", "model": "m"},
            "engine": ENGINES[version]}), "configs/demo.yaml")
        started = T0 + timedelta(days=night)
        with Session(engine) as session, session.begin():
            run_id = begin_run(session, config_version_id=save_config_version(session, config),
                               suite_id=save_suite(session, suite), started_at=started,
                               host="gpu-1", tracker_version="0.1.0", simulated=True,
                               environment={"driver": "550.54"})
            save_workload(session, run_id, 0, _workload(ttft, throughput,
                                                        MEMORY_BYTES[version]))
            finish_run(session, run_id, RunStatus.COMPLETED, started, None)
        run_ids.append(run_id)
        with Session(engine) as session, session.begin():
            found += watch_run(session, "demo", "load", ["chat"])
    return found, run_ids


def _geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _levels(version: str, column: int) -> list[float]:
    return [float(night[column]) for night in NIGHTS if night[0] == version]


def test_the_record_compares_the_last_good_version_with_the_runs_since(store: Engine) -> None:
    found, run_ids = _watch_history(store)
    first_bad = run_ids[18]
    [ttft] = [r for r in found if r.series.metric == "ttft_p99_s" and r.run_id == first_bad]
    good, bad = _levels("v3", 1), _levels("v4", 1)
    assert ttft.before == pytest.approx(_geometric_mean(good))  # ~0.115 s, not a mix with 0.31
    assert min(bad) < ttft.after < max(bad)
    assert ttft.rel_change is not None and 3.9 < ttft.rel_change < 4.6  # about +420 %
    assert ttft.rel_change == pytest.approx(ttft.after / ttft.before - 1.0)
    assert ttft.interval is not None and ttft.interval[0] < ttft.rel_change < ttft.interval[1]
    assert ttft.regressed is True and ttft.status is RegressionStatus.OPEN
    assert "engine.max_num_seqs: 256 → 4" in (ttft.attribution or "")


def test_a_throughput_drop_reads_its_size_against_the_last_good_version(store: Engine) -> None:
    found, run_ids = _watch_history(store)
    [drop] = [r for r in found if r.series.metric == "output_throughput_tokens_per_s"
              and r.run_id == run_ids[18]]
    assert drop.before == pytest.approx(_geometric_mean(_levels("v3", 2)))
    assert drop.rel_change is not None and -0.59 < drop.rel_change < -0.53  # about -56 %
    assert drop.regressed is True and drop.status is RegressionStatus.OPEN


def test_an_improvement_is_stored_with_its_own_status_not_open(store: Engine) -> None:
    found, run_ids = _watch_history(store)
    [better] = [r for r in found if r.series.metric == "ttft_p99_s" and r.run_id == run_ids[12]]
    assert better.regressed is False and better.status is RegressionStatus.IMPROVEMENT
    assert better.rel_change is not None and -0.66 < better.rel_change < -0.60
    with Session(store) as session:
        still_open = fetch_regressions(session, status=RegressionStatus.OPEN, limit=1000)
    assert still_open and all(record.regressed is True for record in still_open)


def test_no_record_reads_a_change_of_zero(store: Engine) -> None:
    """The GPU memory's step of a block's remainder (-0.001 %) is no change; nor is any step
    whose size reads 0.0 %."""
    found, _ = _watch_history(store)
    assert found and not [r for r in found if r.series.metric == "gpu_memory_peak_bytes"]
    for record in found:
        assert record.before != record.after
        assert record.rel_change is not None and f"{record.rel_change:+.1%}" not in (
            "+0.0%", "-0.0%"), record
