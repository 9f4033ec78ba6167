"""GPU energy over a workload: NVML's energy counter, else the sampled power integrated.

``nvmlDeviceGetTotalEnergyConsumption`` (Volta and newer) is a per-GPU counter in millijoules
since the driver loaded. Its difference between the workload's start and end is the energy the
GPU drew. Where the device or the binding lacks it (``NVMLError_NotSupported``, or no such
function), the power samples are integrated over time (trapezoids between samples), and
``energy_source`` says which. The counter is refreshed about every 100 ms and the power
reading is itself an average over up to a second, so a workload shorter than
``MIN_RELIABLE_S`` gets a note. So does a GPU other compute processes were using (the energy is
the whole GPU's, not only the target's).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from typing import Any

from tracker.results import GpuSample

COUNTER = "counter"
SAMPLED_POWER = "sampled power"
MIN_RELIABLE_S = 1.0


def read_energy_mj(nvml: Any, handle: Any) -> int | None:
    """The GPU's energy counter in millijoules, or None where the device or binding has none."""
    getter = getattr(nvml, "nvmlDeviceGetTotalEnergyConsumption", None)
    if getter is None:
        return None
    try:
        return int(getter(handle))
    except nvml.NVMLError:
        return None


def compute_sampled_energy_j(index: int, samples: Sequence[GpuSample]) -> float | None:
    """The power samples of GPU ``index`` integrated over their times (trapezoids), or None with
    fewer than two power readings (no span to integrate over)."""
    points = [(s.t_s, s.power_w) for s in samples if s.gpu_index == index and s.power_w is not None]
    if len(points) < 2:
        return None
    return sum((t1 - t0) * (p0 + p1) / 2.0
               for (t0, p0), (t1, p1) in itertools.pairwise(points))


def compute_device_energy(index: int, start_mj: int | None, end_mj: int | None,
                          samples: Sequence[GpuSample]) -> tuple[float | None, str | None]:
    """One GPU's joules over the workload and where they come from."""
    if start_mj is not None and end_mj is not None and end_mj >= start_mj:
        return (end_mj - start_mj) / 1000.0, COUNTER
    sampled = compute_sampled_energy_j(index, samples)
    return (sampled, SAMPLED_POWER) if sampled is not None else (None, None)


def read_other_processes(nvml: Any, handles: Sequence[tuple[int, Any]]) -> dict[int, list[int]]:
    """GPU index -> the pids of its compute processes, for GPUs with more than one (the target
    is one process per GPU, so more means something else shared it). Empty where NVML cannot say."""
    getter = getattr(nvml, "nvmlDeviceGetComputeRunningProcesses", None)
    shared: dict[int, list[int]] = {}
    if getter is None:
        return shared
    for index, handle in handles:
        with contextlib.suppress(nvml.NVMLError):
            pids = sorted({int(p.pid) for p in getter(handle)})
            if len(pids) > 1:
                shared[index] = pids
    return shared


def compute_energy_note(duration_s: float | None, shared: dict[int, list[int]]) -> str | None:
    """Why the energy may not be the workload's alone, in words, or None when nothing says so."""
    notes = []
    if duration_s is not None and duration_s < MIN_RELIABLE_S:
        notes.append(f"the workload lasted {duration_s:.3g} s, under the {MIN_RELIABLE_S:g} s "
                     "the energy counter and power readings resolve; run more requests for a "
                     "reliable energy per token")
    for index, pids in sorted(shared.items()):
        listed = ", ".join(str(pid) for pid in pids)
        notes.append(f"GPU {index} ran {len(pids)} compute processes (pids {listed}): its "
                     "energy is the whole GPU's, not only the target's")
    return "; ".join(notes) or None
