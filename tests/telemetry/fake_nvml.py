"""A fake ``pynvml`` module object: the only fake in these tests (no GPU can exist here).

It answers the calls the sampler and the fingerprint make, with readings that change on every
call so peaks and means are testable: GPU i uses ``BASE_MEMORY + i GiB + calls GiB`` (capped),
draws ``200 + 10 * calls`` W, and reports the throttle reasons it was built with. Its energy
counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ) advances by ``energy_step_mj(i)`` on each
read of GPU i, so a workload read at its start and end drew exactly that; ``processes`` lists the
compute processes each GPU reports. ``FakeNvmlWithoutEnergy`` is a binding without the counter.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import SimpleNamespace

GIB = 1024**3
BASE_MEMORY = 10 * GIB
TOTAL_MEMORY = 141 * GIB


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


@dataclass
class FakeNvml:
    count: int = 2
    name: str = "NVIDIA H200"
    throttle_mask: int = 0x4 | 0x20  # sw_power_cap, sw_thermal_slowdown
    fail_init: bool = False
    unsupported: frozenset[str] = frozenset()  # readings that raise NotSupported
    calls: int = 0
    inits: int = 0
    shutdowns: int = 0
    processes: dict[int, list[int]] = field(default_factory=dict)  # GPU index -> pids
    energy_reads: dict[int, int] = field(default_factory=dict)  # GPU index -> counter reads
    _lock: threading.Lock = field(default_factory=threading.Lock)

    NVMLError = NVMLError
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < self.count:
            raise NVMLError("Invalid Argument")
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self.name

    def _tick(self, what: str) -> int:
        if what in self.unsupported:
            raise NVMLError_NotSupported("Not Supported")
        with self._lock:
            self.calls += 1
            return self.calls

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        calls = self._tick("memory")
        used = min(BASE_MEMORY + handle * GIB + calls * GIB, TOTAL_MEMORY)
        return SimpleNamespace(total=TOTAL_MEMORY, used=used, free=TOTAL_MEMORY - used)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        self._tick("utilization")
        return SimpleNamespace(gpu=90 + handle, memory=40)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return 200_000 + 10_000 * (self._tick("power") % 10)  # milliwatts

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        assert clock == self.NVML_CLOCK_SM
        self._tick("clock")
        return 1980

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        self._tick("temperature")
        return 60 + handle

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        self._tick("throttle")
        return self.throttle_mask

    @staticmethod
    def energy_step_mj(handle: int) -> int:
        return 150_000 + 1_000 * handle  # 150 J (+1 J per GPU index) between two reads

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        if "energy" in self.unsupported:
            raise NVMLError_NotSupported("Not Supported")
        with self._lock:
            reads = self.energy_reads.get(handle, 0)
            self.energy_reads[handle] = reads + 1
        return 9_000_000_000 + reads * self.energy_step_mj(handle)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=GIB) for pid in self.processes.get(handle, [])]

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.86.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12080


@dataclass
class FakeNvmlWithoutEnergy(FakeNvml):
    """A binding from before the energy counter: the function is not there at all."""

    def __getattribute__(self, name: str) -> object:
        if name == "nvmlDeviceGetTotalEnergyConsumption":
            raise AttributeError(name)
        return super().__getattribute__(name)
