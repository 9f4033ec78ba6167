"""Verdicts for the Compare page and change points for Trends, from ``tracker.analysis``.

Only analysis decides "regression": this module gathers the samples it needs and turns its
answers into frames. Every request is judged (the analysis is numpy/SciPy: 100,000 requests a
side in well under a second, ``bench/compare_speed.py``). ``p_value`` is the one-sided p-value of
"head is worse" in the metric's bad direction (an improvement reads near 1).
"""

from __future__ import annotations

import pandas as pd

from tracker.analysis import Verdict, compare_samples, detect_change_points
from tracker.analysis.changepoints import DEFAULT_MIN_REL_CHANGE
from tracker.analysis.compare import DEFAULT_MIN_EFFECT
from tracker.dashboard.trend_series import display_unit
from tracker.gate.memory import MEMORY_METRIC, judge_memory
from tracker.metrics import COMPARED_METRICS, REGISTRY, Metric, compute_samples
from tracker.results import RunResult, WorkloadResult

VERDICT_COLUMNS = ["workload", "metric", "outcome", "rel_change", "ci_low", "ci_high",
                   "p_value", "samples", "reason"]


def _row(workload: str, metric: str, verdict: Verdict, samples: str) -> tuple[object, ...]:
    low, high = verdict.ci if verdict.ci is not None else (None, None)
    return (workload, metric, verdict.outcome.value, verdict.rel_change, low, high,
            verdict.p_value, samples, verdict.reason)


def compute_verdicts(base: RunResult, head: RunResult) -> pd.DataFrame:
    """The analysis' verdict on each compared metric (``tracker.metrics.COMPARED_METRICS``, the
    gate's) and on the GPU memory peak (``tracker.gate.memory``: exactly where bit-constant) of
    every workload the runs share (client-bound workloads are not compared)."""
    heads = {w.name: w for w in head.workloads}
    rows = []
    for workload in base.workloads:
        other = heads.get(workload.name)
        if other is None or workload.client_bound or other.client_bound:
            continue  # a client-bound workload measured the load generator, not the server
        for metric in COMPARED_METRICS:
            rows.extend(_verdict_row(workload, other, metric))
        memory = judge_memory([workload], [other], confidence=0.95,
                              min_effect=DEFAULT_MIN_EFFECT[MEMORY_METRIC.statistic])
        if memory is not None and memory.verdict is not None:  # as the gate judges it
            rows.append(_row(workload.name, MEMORY_METRIC.name, memory.verdict, "1 run vs 1 run"))
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def _verdict_row(base: WorkloadResult, head: WorkloadResult,
                 metric: Metric) -> list[tuple[object, ...]]:
    before, after = compute_samples(metric, base), compute_samples(metric, head)
    if metric.latency is None:  # one value per run
        if not before or not after:
            return []
        verdict = compare_samples([before], [after], metric)
        return [_row(base.name, metric.name, verdict, "1 run vs 1 run")]
    verdict = compare_samples(before, after, metric)
    return [_row(base.name, metric.name, verdict, f"{len(before)} vs {len(after)}")]


def compute_change_points(shaped: pd.DataFrame) -> pd.DataFrame:
    """Change points of every series in a shaped trend frame, as chart markers."""
    rows = []
    for _series, points in shaped.groupby("series", sort=False):
        ordered = points.sort_values(["started_at", "run_id"])
        values = [float(v) for v in ordered["shown"]]
        found = REGISTRY.get(str(ordered["metric"].iloc[0])) if "metric" in ordered else None
        direction = None if found is None else found.lower_is_better
        smallest = 0.0 if found is not None and found.bit_constant else DEFAULT_MIN_REL_CHANGE
        for point in detect_change_points(values, lower_is_better=direction,
                                          min_rel_change=smallest):
            at = ordered.iloc[point.index]
            unit = display_unit(str(at["metric"])) if "metric" in at else None
            label = unit.label if unit else ""
            change = "" if point.rel_change is None else f"{point.rel_change * 100:+.1f}% "
            rows.append((at["started_at"], at["shown"], int(at["run_id"]),
                         f"change point in {at['series']}: {change}({point.before:.4g} → "
                         f"{point.after:.4g} {label}) from run #{int(at['run_id'])}, "
                         f"p={point.p_value:.2g}"))
    return pd.DataFrame(rows, columns=["started_at", "shown", "run_id", "text"])
