"""GPU telemetry from NVML (``nvidia-ml-py``, module ``pynvml``): a sampler thread per workload.

The sampler reads every selected GPU ``sample_hz`` times a second while a workload runs: memory
used, GPU and memory utilisation, power, SM clock, temperature and the clock-event (throttle)
reasons. At the workload's start and end it reads each GPU's energy counter
(``tracker.telemetry.energy``: joules per GPU, from the counter or the sampled power). A reading
a device does not support is None. No driver (``pynvml.NVMLError``, e.g.
"NVML Shared Library Not Found") makes the whole workload "not measured" with that reason and
never fails the run. ``nvml`` is the module to use: the real ``pynvml`` unless a test injects a
fake (the only fake in the tracker's tests).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pynvml

from tracker.results import GpuDeviceSummary, GpuSample, GpuTelemetry
from tracker.telemetry.energy import (
    compute_device_energy,
    compute_energy_note,
    read_energy_mj,
    read_other_processes,
)

Clock = Callable[[], float]
DEFAULT_SAMPLE_HZ = 10.0

# NVML's clock-event ("throttle") reason bits, by name (nvmlClocksEventReason*).
THROTTLE_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


def decode_throttle_reasons(mask: int) -> tuple[str, ...]:
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = sum(bit for bit, _ in THROTTLE_REASONS)
    if mask & ~known:
        names.append(f"other_0x{mask & ~known:x}")
    return tuple(names)


def text_of(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def describe_nvml_error(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"NVML unavailable: {text} (no NVIDIA driver on this host?)"


class _Reader:
    """One device handle's readings. Any NVML error on a field makes that field None."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml = nvml
        self.handle = handle

    def _read(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except self.nvml.NVMLError:
            return None

    def sample(self, index: int, t_s: float) -> GpuSample:
        nvml, handle = self.nvml, self.handle
        memory = self._read(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        util = self._read(lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
        power_mw = self._read(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        clock = self._read(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
        temperature = self._read(
            lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
        reasons = self._read(lambda: self._throttle_mask())
        return GpuSample(
            gpu_index=index, t_s=t_s,
            memory_used_bytes=None if memory is None else int(memory.used),
            gpu_util_pct=None if util is None else float(util.gpu),
            memory_util_pct=None if util is None else float(util.memory),
            power_w=None if power_mw is None else power_mw / 1000.0,
            sm_clock_mhz=None if clock is None else float(clock),
            temperature_c=None if temperature is None else float(temperature),
            throttle_reasons=None if reasons is None else int(reasons),
        )

    def _throttle_mask(self) -> int:
        getter = getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if getter is None:  # drivers and bindings before the rename
            getter = self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(getter(self.handle))

    def static_info(self) -> tuple[str | None, int | None]:
        name = self._read(lambda: text_of(self.nvml.nvmlDeviceGetName(self.handle)))
        memory = self._read(lambda: self.nvml.nvmlDeviceGetMemoryInfo(self.handle))
        return name, None if memory is None else int(memory.total)


class GpuSampler:
    """GPU samples over one workload: started before it and stopped after it.

    ``stop`` returns what was measured or why not.
    """

    def __init__(self, sample_hz: float = DEFAULT_SAMPLE_HZ, *, nvml: Any = None,
                 indices: Sequence[int] | None = None, clock: Clock = time.monotonic,
                 skip_reason: str | None = None) -> None:
        if sample_hz <= 0:
            raise ValueError(f"sample_hz must be > 0 (got {sample_hz})")
        self.sample_hz = sample_hz
        self.nvml: Any = pynvml if nvml is None else nvml
        self.indices = indices
        self.clock = clock
        self.reason = skip_reason  # set: nothing will be measured, and this says why
        self.samples: list[GpuSample] = []
        self._readers: list[tuple[int, _Reader]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._initialised = False
        self._started_s: float | None = None
        self._energy_start_mj: dict[int, int | None] = {}

    def start(self) -> None:
        if self.reason is not None:
            return
        try:
            self.nvml.nvmlInit()
            self._initialised = True
            count = int(self.nvml.nvmlDeviceGetCount())
            indices = range(count) if self.indices is None else self.indices
            self._readers = [(i, _Reader(self.nvml, self.nvml.nvmlDeviceGetHandleByIndex(i)))
                             for i in indices if 0 <= i < count]
        except self.nvml.NVMLError as exc:
            self.reason = describe_nvml_error(exc)
            self._shutdown()
            return
        if not self._readers:
            self.reason = "NVML reports no GPU on this host"
            self._shutdown()
            return
        self._started_s = self.clock()
        self._energy_start_mj = {i: read_energy_mj(self.nvml, reader.handle)
                                 for i, reader in self._readers}
        self._thread = threading.Thread(target=self._loop, name="tracker-gpu-sampler",
                                        daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        period_s = 1.0 / self.sample_hz
        origin = self.clock()
        next_s = origin
        while not self._stop.is_set():
            now = self.clock()
            for index, reader in self._readers:
                self.samples.append(reader.sample(index, now - origin))
            next_s += period_s
            self._stop.wait(max(0.0, next_s - self.clock()))

    def stop(self) -> GpuTelemetry:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.reason is not None:
            self._shutdown()
            return GpuTelemetry(measured=False, reason=self.reason)
        energy_end_mj = {i: read_energy_mj(self.nvml, reader.handle) for i, reader in self._readers}
        duration_s = None if self._started_s is None else self.clock() - self._started_s
        shared = read_other_processes(self.nvml, [(i, r.handle) for i, r in self._readers])
        devices = tuple(self._device_summary(i, reader, energy_end_mj.get(i))
                        for i, reader in self._readers)
        self._shutdown()
        return GpuTelemetry(measured=True, sample_hz=self.sample_hz, devices=devices,
                            samples=tuple(self.samples), duration_s=duration_s,
                            energy_note=compute_energy_note(duration_s, shared))

    def _device_summary(self, index: int, reader: _Reader,
                        energy_end_mj: int | None) -> GpuDeviceSummary:
        summary = compute_device_summary(index, *reader.static_info(), self.samples)
        energy_j, source = compute_device_energy(index, self._energy_start_mj.get(index),
                                                 energy_end_mj, self.samples)
        return replace(summary, energy_j=energy_j, energy_source=source)

    def _shutdown(self) -> None:
        if self._initialised:
            self._initialised = False
            with contextlib.suppress(self.nvml.NVMLError):
                self.nvml.nvmlShutdown()


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def compute_device_summary(index: int, name: str | None, memory_total_bytes: int | None,
                           samples: Sequence[GpuSample]) -> GpuDeviceSummary:
    """Peaks and means of one GPU's samples. A reading never reported stays None."""
    own = [s for s in samples if s.gpu_index == index]

    def values(attr: str) -> list[float]:
        return [v for v in (getattr(s, attr) for s in own) if v is not None]

    memory = [s.memory_used_bytes for s in own if s.memory_used_bytes is not None]
    util, power = values("gpu_util_pct"), values("power_w")
    temperature = values("temperature_c")
    mask = 0
    for sample in own:
        mask |= sample.throttle_reasons or 0
    return GpuDeviceSummary(
        gpu_index=index, name=name, memory_total_bytes=memory_total_bytes, samples=len(own),
        memory_used_peak_bytes=max(memory) if memory else None,
        memory_used_mean_bytes=_mean([float(m) for m in memory]),
        gpu_util_mean_pct=_mean(util), gpu_util_peak_pct=max(util) if util else None,
        power_mean_w=_mean(power), power_peak_w=max(power) if power else None,
        sm_clock_mean_mhz=_mean(values("sm_clock_mhz")),
        temperature_peak_c=max(temperature) if temperature else None,
        throttle_reasons=decode_throttle_reasons(mask),
    )


def collect_gpu_environment(nvml: Any = None) -> dict[str, Any]:
    """The GPU part of a run's fingerprint: model, count, driver and CUDA driver version."""
    module: Any = pynvml if nvml is None else nvml
    try:
        module.nvmlInit()
    except module.NVMLError as exc:
        return {"gpu_count": 0, "gpu_model": None, "gpu_reason": describe_nvml_error(exc)}
    try:
        count = int(module.nvmlDeviceGetCount())
        names = sorted({text_of(module.nvmlDeviceGetName(module.nvmlDeviceGetHandleByIndex(i)))
                        for i in range(count)})
        cuda = int(module.nvmlSystemGetCudaDriverVersion())
        return {
            "gpu_count": count,
            "gpu_model": ", ".join(names) or None,
            "gpu_driver_version": text_of(module.nvmlSystemGetDriverVersion()),
            "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}",
        }
    except module.NVMLError as exc:
        return {"gpu_count": 0, "gpu_model": None, "gpu_reason": describe_nvml_error(exc)}
    finally:
        with contextlib.suppress(module.NVMLError):
            module.nvmlShutdown()
