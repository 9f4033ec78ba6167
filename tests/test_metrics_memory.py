"""GPU memory as a registry metric: the simulator's pool arithmetic, its gauge through the real
scraper's parser, and the one rule that picks a source (the simulator's own account, else NVML);
the per-run metrics (startup time, accuracy, drift)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tracker.inputs.configs import EngineArgs
from tracker.load.summary import compute_workload_summary
from tracker.metrics import (
    GIB,
    REGISTRY,
    compute_gpu_memory,
    compute_quality_metrics,
    compute_run_metrics,
    compute_workload_metrics,
)
from tracker.results import (
    GpuDeviceSummary,
    GpuTelemetry,
    QualityResult,
    ServerTelemetry,
    WorkloadResult,
)
from tracker.sim.engine import EngineSnapshot
from tracker.sim.kvcache import compute_kv_cache_spec
from tracker.sim.prometheus import render_metrics
from tracker.telemetry.server_metrics import compute_server_values, parse_prometheus_text

T0 = datetime(2026, 9, 1, tzinfo=UTC)


def _memory(**engine: object) -> int:
    return compute_kv_cache_spec(EngineArgs.model_validate(engine)).gpu_memory_used_bytes


def test_the_simulated_gpu_holds_weights_and_the_whole_pool_whatever_the_kv_dtype() -> None:
    assert _memory(gpu_memory_utilization=0.9) == int(0.9 * 80 * GIB)
    assert _memory(gpu_memory_utilization=0.95) == int(0.95 * 80 * GIB)  # a bigger pool
    assert _memory(gpu_memory_utilization=0.9, kv_cache_dtype="fp8") == int(0.9 * 80 * GIB)
    assert _memory(gpu_memory_utilization=0.9, tensor_parallel_size=2) == int(0.9 * 80 * GIB)


def test_the_simulators_gauge_reaches_the_server_values_through_the_parser() -> None:
    snapshot = EngineSnapshot(1, 0, 0.1, 0, 10, 5, 0, 0, (), gpu_memory_used_bytes=77 * GIB)
    scraped = parse_prometheus_text(render_metrics(snapshot, "sim/m"))
    values = compute_server_values(scraped, [scraped], scraped)
    assert values["gpu_memory_used_bytes_peak"] == values["gpu_memory_used_bytes_mean"] == 77 * GIB
    vllm_only = parse_prometheus_text("vllm:num_requests_running 1\n")
    assert "sim_gpu_memory_used_bytes" not in vllm_only


def _workload(gpu: GpuTelemetry | None, server: ServerTelemetry | None) -> WorkloadResult:
    return WorkloadResult("chat", 1, 0, 0, {}, T0, T0, (), compute_workload_summary((), 1.0),
                          gpu=gpu, server=server)


def _nvml(*peaks_means: tuple[int, float]) -> GpuTelemetry:
    devices = tuple(GpuDeviceSummary(i, "H100", 80 * GIB, 10, peak, mean, None, None, None,
                                     None, None, None) for i, (peak, mean) in enumerate(peaks_means))
    return GpuTelemetry(measured=True, devices=devices)


def test_nvml_gives_the_fullest_gpus_peak_and_the_highest_mean() -> None:
    found = compute_gpu_memory(_workload(_nvml((70 * GIB, 60.0 * GIB), (72 * GIB, 50.0 * GIB)),
                                         None))
    assert found == (72 * GIB, 60.0 * GIB, "nvml")
    metrics = compute_workload_metrics(_workload(_nvml((70 * GIB, 70.0 * GIB)), None))
    assert metrics["gpu_memory_peak_bytes"] == 70 * GIB
    assert REGISTRY["gpu_memory_peak_bytes"].lower_is_better


def test_the_simulators_own_account_wins_over_the_idle_real_gpu() -> None:
    server = ServerTelemetry(measured=True, scrapes=3, values={
        "gpu_memory_used_bytes_peak": 72.0 * GIB, "gpu_memory_used_bytes_mean": 72.0 * GIB})
    found = compute_gpu_memory(_workload(_nvml((1 * GIB, 1.0 * GIB)), server))
    assert found == (72.0 * GIB, 72.0 * GIB, "simulator")


def test_memory_not_measured_is_absent_never_zero() -> None:
    unmeasured = GpuTelemetry(measured=False, reason="no driver")
    assert compute_gpu_memory(_workload(unmeasured, ServerTelemetry(measured=True))) is None
    assert "gpu_memory_peak_bytes" not in compute_workload_metrics(_workload(None, None))


def test_run_metrics_take_the_launched_servers_startup_time_only() -> None:
    assert compute_run_metrics({"launch": {"startup_s": 41.5}}) == {"startup_s": 41.5}
    assert compute_run_metrics({"engine": "tracker-sim"}) == {}
    assert compute_run_metrics({"launch": {"startup_s": True}}) == {}


def test_quality_metrics_leave_out_what_was_not_measured() -> None:
    quality = QualityResult("arith", "v1", (), 10, 8, 0.8, 0.5, 0.9)
    assert compute_quality_metrics(quality) == {"accuracy": 0.8}
    assert compute_quality_metrics(None) == {}
    drifted = QualityResult("arith", "v1", (), 10, 8, 0.8, 0.5, 0.9, drift=0.1)
    assert compute_quality_metrics(drifted) == pytest.approx({"accuracy": 0.8,
                                                              "answer_drift": 0.1})
