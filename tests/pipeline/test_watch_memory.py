"""The nightly watch follows the GPU memory peak exactly: a bit-constant series whose level
changes on one night (and stays) is a change point at that night, however small the step as long
as a record can show it (0.1 %); a step that reads 0.0 % (a KV block's remainder) and a one-night
blip are not; and the accuracy of a quality set is watched as its own series."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.inputs.configs import ServingConfig, build_loaded_config
from tracker.inputs.suites import Suite, build_loaded_suite
from tracker.load.summary import compute_workload_summary
from tracker.metrics import GIB
from tracker.pipeline.watch import WATCHED_METRICS, watch_run
from tracker.results import (
    GpuDeviceSummary,
    GpuTelemetry,
    QualityItemResult,
    QualityResult,
    RequestRecord,
    RunStatus,
    TokenSource,
    WorkloadResult,
)
from tracker.store.quality import save_quality
from tracker.store.regressions import SeriesKey, fetch_metric_series
from tracker.store.runs import begin_run, finish_run, save_config_version, save_suite, save_workload

T0 = datetime(2026, 9, 1, 2, 0, tzinfo=UTC)
MIB = 1024**2
PEAK = "gpu_memory_peak_bytes"


def _workload(memory_bytes: int) -> WorkloadResult:
    """A night's workload on one GPU that held ``memory_bytes`` in every NVML sample."""
    records = tuple(RequestRecord(i, i * 0.1, 0.05, 0.4, (0.01,) * 3, 4, TokenSource.USAGE,
                                  16, TokenSource.USAGE) for i in range(4))
    device = GpuDeviceSummary(0, "H100", 80 * GIB, 40, memory_bytes, float(memory_bytes),
                              60.0, 90.0, 300.0, 400.0, 1800.0, 60.0)
    gpu = GpuTelemetry(measured=True, sample_hz=10.0, devices=(device,))
    return WorkloadResult("chat", 2, 4, 0, {}, T0, T0, records,
                          compute_workload_summary(records, 1.0), gpu=gpu)


def _quality(correct: int) -> QualityResult:
    items = tuple(QualityItemResult(f"q{i}", "exact", "x", 1.0 if i < correct else 0.0)
                  for i in range(200))
    return QualityResult("arith", "v1", items, 200, correct, correct / 200, None, None)


def _store_history(engine: Engine, memory: list[int], correct: list[int] | None = None) -> None:
    suite = build_loaded_suite(Suite.model_validate({
        "name": "chat", "workloads": [{"name": "chat", "prompts": {
            "source": "synthetic", "input_tokens": 8}, "max_tokens": 4, "concurrency": 2,
            "num_requests": 4}]}), "baselines/chat.yaml")
    for night, value in enumerate(memory):
        utilization = 0.9 if value == memory[0] else 0.95
        config = build_loaded_config(ServingConfig.model_validate({
            "name": "nightly", "target": {"kind": "sim", "model": "m"},
            "engine": {"gpu_memory_utilization": utilization}}), "configs/nightly.yaml")
        started = T0 + timedelta(days=night)
        with Session(engine) as session, session.begin():
            run_id = begin_run(session, config_version_id=save_config_version(session, config),
                               suite_id=save_suite(session, suite), started_at=started,
                               host="gpu-1", tracker_version="0.1.0", simulated=False,
                               environment={"driver": "550.54"})
            save_workload(session, run_id, 0, _workload(value))
            if correct is not None:
                save_quality(session, run_id, _quality(correct[night]))
            finish_run(session, run_id, RunStatus.COMPLETED, started, None)


def _memory_records(engine: Engine) -> list:  # type: ignore[type-arg]
    with Session(engine) as session, session.begin():
        found = watch_run(session, "nightly", "chat", ["chat"])
    return [r for r in found if r.series.metric == PEAK]


def test_a_bit_constant_memory_series_changing_on_one_night_is_a_change_point_there(
        store: Engine) -> None:
    assert PEAK in WATCHED_METRICS
    base = 72 * GIB
    memory = [base] * 20 + [base + 64 * MIB] * 8  # +0.087 %: far below any noise threshold
    _store_history(store, memory)
    with Session(store) as session:
        series = fetch_metric_series(session, SeriesKey("nightly", "chat", "chat", PEAK))
    assert [p.value for p in series] == [float(v) for v in memory]
    [record] = _memory_records(store)
    assert record.location_index == 20 and record.run_id == series[20].run_id
    assert record.before == base and record.after == base + 64 * MIB
    assert record.rel_change == pytest.approx(64 * MIB / base)
    assert f"{record.rel_change:+.1%}" == "+0.1%"
    assert record.regressed is True  # more memory, and lower is better
    assert record.attribution is not None and "gpu_memory_utilization: 0.9 → 0.95" in \
        record.attribution
    assert _memory_records(store) == []  # never twice


def test_a_memory_step_that_reads_zero_percent_is_no_change_point(store: Engine) -> None:
    """The demo's AWQ version: the KV pool is whole 2 MiB blocks, so smaller weights leave a
    block's remainder unallocated, 838,861 bytes of 72 GiB (-0.001 %): the allocator's grain,
    not a change (its record read "-0.0 %"). Neither is +2 MiB (+0.003 %)."""
    base = 72 * GIB
    _store_history(store, [base] * 12 + [base - 838_861] * 12)
    assert _memory_records(store) == []


def test_a_memory_step_of_2_mib_is_no_change_point(store: Engine) -> None:
    base = 72 * GIB
    _store_history(store, [base] * 20 + [base + 2 * MIB] * 8)
    assert _memory_records(store) == []


def test_a_one_night_memory_blip_is_no_change_point(store: Engine) -> None:
    memory = [72 * GIB] * 30
    memory[12] += 512 * MIB
    _store_history(store, memory)
    assert _memory_records(store) == []


def test_a_fall_of_a_quality_sets_accuracy_is_watched_as_its_own_series(store: Engine) -> None:
    correct = [180, 181, 179, 180, 182, 178, 180, 181, 179, 180, 181, 180,
               150, 151, 149, 150, 152, 148, 150, 151]  # 90 % -> 75 %
    _store_history(store, [72 * GIB] * len(correct), correct)
    with Session(store) as session, session.begin():
        found = watch_run(session, "nightly", "chat", ["chat"])
    [record] = [r for r in found if r.series.metric == "accuracy"]
    assert record.series.workload == "quality:arith"
    assert record.location_index == 12 and record.regressed is True


def test_a_step_from_zero_has_the_direction_of_its_levels() -> None:
    """Preemptions 0 -> 12: the relative change is undefined, the step is still worse."""
    from tracker.analysis import ChangePoint
    from tracker.pipeline.watch import _regressed

    up = ChangePoint(index=20, before=0.0, after=12.0, rel_change=None, p_value=0.001)
    down = ChangePoint(index=20, before=12.0, after=0.0, rel_change=-1.0, p_value=0.001)
    assert _regressed("num_preemptions", up) is True
    assert _regressed("num_preemptions", down) is False
    assert _regressed("request_throughput_per_s", up) is False  # higher is better
    assert _regressed("no_such_metric", up) is None
