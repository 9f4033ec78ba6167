"""The gate's GPU-memory row: judged on the peak, exactly where the memory is bit-constant.

vLLM holds its weights and its whole KV pool from the start, so a workload's memory is the same
bytes in every reading and every run of one config. When each side held one value throughout
(every run's peak equal to its mean, and equal across the side's runs) the sides are compared
exactly, tolerance 0 unless ``--min-effect gpu_memory_peak_bytes=F`` allows one
(``tracker.analysis.constant_measures``). Otherwise each run's peak is one value, judged
like a throughput (``compare_samples``, over runs). Every run counts, client-bound ones too: the
memory is held whatever set the pace. The source is named: NVML, or the simulator's own account
of its simulated GPU (``tracker.metrics.compute_gpu_memory``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracker.analysis import Verdict, compare_samples
from tracker.analysis.constant_measures import compare_exact
from tracker.metrics import REGISTRY, compute_gpu_memory
from tracker.results import RunResult, WorkloadResult

MEMORY_METRIC = REGISTRY["gpu_memory_peak_bytes"]
MEMORY_LABEL = "GPU memory peak"
SOURCE_NAMES = {"simulator": "the simulator's own account of its simulated GPU", "nvml": "NVML"}


@dataclass(frozen=True, slots=True)
class MemoryJudgement:
    verdict: Verdict | None  # None: one side did not measure it
    note: str  # where the values come from, or which side did not measure them


def compute_memory_readings(workloads: Sequence[WorkloadResult]
                            ) -> tuple[list[list[float]], set[str]]:
    """Per run that measured it, its memory peak and mean (equal when no reading moved), and
    the sources."""
    readings: list[list[float]] = []
    sources: set[str] = set()
    for workload in workloads:
        found = compute_gpu_memory(workload)
        if found is not None:
            readings.append([found[0], found[1]])
            sources.add(found[2])
    return readings, sources


def judge_memory(base: Sequence[WorkloadResult], head: Sequence[WorkloadResult], *,
                 confidence: float, min_effect: float, tolerance: float = 0.0,
                 seed: int = 0) -> MemoryJudgement | None:
    """The memory verdict of one workload's runs, or None when neither side measured it.

    ``tolerance`` is the exact comparison's allowance (``--min-effect gpu_memory_peak_bytes=F``,
    0 by default). ``min_effect`` is the statistical one's, when a side's memory moved."""
    base_readings, base_from = compute_memory_readings(base)
    head_readings, head_from = compute_memory_readings(head)
    if not base_readings and not head_readings:
        return None
    if not base_readings or not head_readings:
        side = "base" if not base_readings else "head"
        return MemoryJudgement(None, f"not measured in the {side} run(s)")
    sources = base_from | head_from
    note = "from " + " and ".join(SOURCE_NAMES[s] for s in sorted(sources))
    if len(sources) > 1:
        note += " (the sides differ in source)"
    verdict = compare_exact(base_readings, head_readings, MEMORY_METRIC, confidence=confidence,
                            tolerance=tolerance)
    if verdict is None:
        verdict = compare_samples([[run[0]] for run in base_readings],
                                  [[run[0]] for run in head_readings], MEMORY_METRIC,
                                  min_effect=min_effect, confidence=confidence)
    return MemoryJudgement(verdict, note)


def find_exact_memory_regression(base_runs: Sequence[RunResult], head_runs: Sequence[RunResult],
                                 tolerance: float = 0.0) -> str | None:
    """The first workload whose GPU memory peak regressed exactly (both sides bit-constant) in
    these runs, or None: a sequential gate need not play more rounds for it."""
    names = [w.name for run in base_runs for w in run.workloads]
    for name in dict.fromkeys(names):
        sides = [compute_memory_readings([w for run in runs for w in run.workloads
                                          if w.name == name])[0]
                 for runs in (base_runs, head_runs)]
        if not sides[0] or not sides[1]:
            continue
        verdict = compare_exact(sides[0], sides[1], MEMORY_METRIC, tolerance=tolerance)
        if verdict is not None and verdict.regressed:
            return name
    return None
