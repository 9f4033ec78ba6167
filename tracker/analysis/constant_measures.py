"""Exact comparison of a bit-constant measure (GPU memory): any difference is a change.

vLLM allocates its whole KV pool at start, so the memory a GPU holds is the same bytes in every
sample of a run and in every run of one config: there is no noise to test against, and a
statistical test would only blur a change of a few MiB. When every reading on each side is one
value (``runs_repeat_exactly``: each run's readings, e.g. its peak and its mean, equal, and equal
across the side's runs), head is judged against base exactly, with a tolerance of 0 unless the
user allows one: higher is a regression (for a lower-is-better metric), lower an improvement,
equal no change. Otherwise
``compare_exact`` returns None and the caller judges the values statistically. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from tracker.analysis.compare import Outcome, Verdict
from tracker.metrics import Metric

EXACT_METHOD = "exact (bit-constant on both sides)"
Readings = Sequence[Sequence[float]]  # per run, every reading of the measure in that run


def runs_repeat_exactly(runs: Readings) -> bool:
    """Every reading of every run is the same value (and there is at least one)."""
    values = {float(value) for run in runs for value in run}
    return len(values) == 1


def compare_exact(base: Readings, head: Readings, metric: Metric, *,
                  confidence: float = 0.95, tolerance: float = 0.0) -> Verdict | None:
    """The exact verdict when both sides are bit-constant, else None. A change of at most
    ``tolerance`` (relative: a user's allowance, 0 by default) is no change. ``p_value`` is 0
    for a regression (certain: no noise) and None otherwise, so an unchanged measure spends
    none of a gate's false-alarm budget."""
    if tolerance < 0.0:
        raise ValueError(f"tolerance must be >= 0 (got {tolerance})")
    if not runs_repeat_exactly(base) or not runs_repeat_exactly(head):
        return None
    before, after = float(base[0][0]), float(head[0][0])
    rel = None if before == 0.0 else after / before - 1.0
    worse = metric.is_worse(before, after)
    allowed = after == before or (rel is not None and abs(rel) <= tolerance)
    how = f"bit-constant on both sides; tolerance {tolerance:g}"
    if allowed:
        outcome, reason = Outcome.NO_CHANGE, (
            f"head {after:g}, base {before:g} on every run ({how})")
    elif worse:
        outcome, reason = Outcome.REGRESSION, (
            f"head holds {after:g} on every run, base {before:g}: a bit-constant measure that "
            f"changed ({how}: no noise to test against)")
    else:
        outcome, reason = Outcome.IMPROVEMENT, (
            f"head holds {after:g} on every run, base {before:g} ({how})")
    return Verdict(
        outcome=outcome, rel_change=rel, ci=None if rel is None else (rel, rel),
        p_value=0.0 if outcome is Outcome.REGRESSION else None, statistic=metric.statistic,
        lower_is_better=metric.lower_is_better, base_value=before, head_value=after,
        base_count=sum(len(run) for run in base), head_count=sum(len(run) for run in head),
        base_runs=len(base), head_runs=len(head), min_effect=tolerance, confidence=confidence,
        method=EXACT_METHOD, reason=reason)
