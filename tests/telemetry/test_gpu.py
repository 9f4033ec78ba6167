"""The NVML sampler with a fake NVML (the only fake), and the real pynvml without a driver."""

from __future__ import annotations

import subprocess
import sys
import time

import pynvml
import pytest

from tests.telemetry.fake_nvml import BASE_MEMORY, GIB, FakeNvml
from tracker.results import GpuSample
from tracker.runner.environment import collect_environment
from tracker.telemetry.gpu import (
    GpuSampler,
    collect_gpu_environment,
    compute_device_summary,
    decode_throttle_reasons,
)


def _sample_until(sampler: GpuSampler, count: int, limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while len(sampler.samples) < count and time.monotonic() < deadline:
        time.sleep(0.005)


def test_sampler_records_every_gpu_with_peaks_and_means() -> None:
    fake = FakeNvml(count=2)
    sampler = GpuSampler(200.0, nvml=fake)
    sampler.start()
    _sample_until(sampler, 8)
    telemetry = sampler.stop()
    assert telemetry.measured and telemetry.reason is None and telemetry.sample_hz == 200.0
    assert {s.gpu_index for s in telemetry.samples} == {0, 1}
    for device in telemetry.devices:
        own = [s for s in telemetry.samples if s.gpu_index == device.gpu_index]
        used = [s.memory_used_bytes for s in own]
        assert device.samples == len(own) >= 4
        assert device.name == "NVIDIA H200" and device.memory_total_bytes == 141 * GIB
        assert device.memory_used_peak_bytes == max(used) > min(used) >= BASE_MEMORY
        assert device.gpu_util_mean_pct == pytest.approx(90 + device.gpu_index)
        assert device.power_mean_w == pytest.approx(sum(s.power_w for s in own) / len(own))
        assert 200.0 <= device.power_mean_w <= 290.0
        assert device.sm_clock_mean_mhz == 1980.0
        assert device.temperature_peak_c == 60 + device.gpu_index
        assert device.throttle_reasons == ("sw_power_cap", "sw_thermal_slowdown")
    assert telemetry.memory_peak_bytes == max(d.memory_used_peak_bytes or 0 for d in telemetry.devices)
    assert fake.inits == 1 and fake.shutdowns == 1


def test_sample_times_grow_from_the_start_of_sampling() -> None:
    sampler = GpuSampler(500.0, nvml=FakeNvml(count=1))
    sampler.start()
    _sample_until(sampler, 3)
    times = [s.t_s for s in sampler.stop().samples]
    assert times[0] == pytest.approx(0.0, abs=0.05)
    assert times == sorted(times) and times[-1] > times[0]


def test_a_reading_the_device_does_not_support_is_none() -> None:
    sampler = GpuSampler(100.0, nvml=FakeNvml(count=1, unsupported=frozenset({"power", "throttle"})))
    sampler.start()
    _sample_until(sampler, 1)
    telemetry = sampler.stop()
    assert telemetry.measured
    assert all(s.power_w is None and s.throttle_reasons is None for s in telemetry.samples)
    assert all(s.memory_used_bytes is not None for s in telemetry.samples)
    device = telemetry.devices[0]
    assert device.power_mean_w is None and device.power_peak_w is None
    assert device.throttle_reasons == ()
    assert telemetry.power_mean_w is None


def test_no_driver_is_not_measured_with_the_reason() -> None:
    fake = FakeNvml(fail_init=True)
    sampler = GpuSampler(nvml=fake)
    sampler.start()
    telemetry = sampler.stop()
    assert not telemetry.measured and telemetry.samples == () and telemetry.devices == ()
    assert telemetry.reason is not None and "NVML Shared Library Not Found" in telemetry.reason


def test_a_skip_reason_measures_nothing_and_never_touches_nvml() -> None:
    fake = FakeNvml()
    sampler = GpuSampler(nvml=fake, skip_reason="not measured: the target runs on gpu-box")
    sampler.start()
    telemetry = sampler.stop()
    assert (telemetry.measured, telemetry.reason) == (False, "not measured: the target runs on gpu-box")
    assert fake.inits == 0 and fake.calls == 0


def test_selected_indices_limit_the_gpus_sampled() -> None:
    sampler = GpuSampler(200.0, nvml=FakeNvml(count=4), indices=[2, 9])  # 9 does not exist
    sampler.start()
    _sample_until(sampler, 2)
    telemetry = sampler.stop()
    assert {s.gpu_index for s in telemetry.samples} == {2}
    assert [d.gpu_index for d in telemetry.devices] == [2]


def test_throttle_reasons_decode_by_name_and_keep_unknown_bits() -> None:
    assert decode_throttle_reasons(0) == ()
    assert decode_throttle_reasons(0x1 | 0x40) == ("gpu_idle", "hw_thermal_slowdown")
    assert decode_throttle_reasons(0x8 | 0x10000) == ("hw_slowdown", "other_0x10000")


def test_device_summary_of_no_samples_is_all_not_measured() -> None:
    summary = compute_device_summary(0, "x", None, [GpuSample(1, 0.0, 5, 1.0, 1.0, 1.0, 1.0, 1.0, 0)])
    assert summary.samples == 0
    assert summary.memory_used_peak_bytes is None and summary.gpu_util_mean_pct is None


def test_fingerprint_reads_model_count_driver_and_cuda_from_nvml() -> None:
    facts = collect_gpu_environment(FakeNvml(count=8))
    assert facts == {"gpu_count": 8, "gpu_model": "NVIDIA H200", "gpu_driver_version": "570.86.15",
                     "cuda_driver_version": "12.8"}
    missing = collect_gpu_environment(FakeNvml(fail_init=True))
    assert missing["gpu_count"] == 0 and missing["gpu_model"] is None
    assert "NVML Shared Library Not Found" in missing["gpu_reason"]


def test_environment_carries_the_gpu_fingerprint() -> None:
    environment = collect_environment(target_kind="sim", engine="tracker-sim", nvml=FakeNvml(count=2))
    assert environment["gpu_model"] == "NVIDIA H200" and environment["gpu_count"] == 2


def _driver_present() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_driver_present(), reason="this host has an NVIDIA driver")
def test_the_real_pynvml_without_a_driver_is_not_measured() -> None:
    sampler = GpuSampler()
    sampler.start()
    telemetry = sampler.stop()
    assert not telemetry.measured
    assert telemetry.reason is not None and telemetry.reason.startswith("NVML unavailable: ")


def test_importing_pynvml_emits_no_warning() -> None:
    code = "import pynvml; import tracker.telemetry.gpu"
    done = subprocess.run([sys.executable, "-W", "error", "-c", code],
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
