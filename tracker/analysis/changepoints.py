"""Change points in a metric's history: where the level of a nightly series shifted for good.

The detector is rank-based, so heavy tails, wild nights and a second (slower) host mode carry no
more weight than any other night, and it never splits off a segment shorter than
``min_segment``, so an outlier or a spike that reverts within a few nights is not a change point:

1. **Scan.** In a segment of ``n`` values, every split ``k`` (both sides >= ``min_segment``)
   gets the standardized Wilcoxon rank-sum statistic ``Z_k`` of the values after ``k`` against
   those before it (mid-ranks, tie-corrected variance).
2. **Significance.** Under "no change" the ranks are a random permutation, whatever the
   distribution of the values, and ``max_k |Z_k|`` behaves like the maximum of a standardized
   Brownian bridge. Its tail is Siegmund's approximation (conservative for discrete data). Up
   to 40 values that approximation is several times too large (a split near an end cannot
   reach a large |Z|), so short segments get the permutation law of the maximum instead
   (20,000 seeded orders of the ranks, once per length). A split is kept when that p-value is
   below ``alpha`` (0.001: a 160-night history then false-alarms less, and 18 nights followed
   by 6 fully separated ones still give p = 0.0005) and the medians on either side differ by
   at least ``min_rel_change``.
3. **Location and shape.** The split is placed where two flat levels fit best (least absolute
   deviation from each side's median, near the scan's maximum), and it must be a jump: the
   nights right around it differ by at least half the difference of the two sides' medians,
   significantly. When the values also trend *within* the two sides (a drift or a random walk),
   the step must stand out beyond that trend (ranks regressed on time and the step).
4. **Binary segmentation, then pruning.** Accepted splits are searched again on both sides. Then
   each change point is re-scanned between its neighbours (which refines its location) and the
   weakest is dropped until every one is significant on its own.

A **bit-constant** series (most nights repeat the night before exactly, like peak memory) has
no noise to rank against: every value that persists ``min_segment`` nights is a level, and a
level that differs from the one before is a change point (``changepoint_constant.py``). The
arithmetic is numpy, in ``changepoint_scan.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracker.analysis.changepoint_constant import detect_constant_steps, is_bit_constant
from tracker.analysis.changepoint_scan import (
    Array,
    Split,
    compute_prefix_deviations,
    compute_scan_p_value,
    compute_step_beyond_trend_z,
    compute_trend_z,
    locate_split,
    rank_sum_p_value,
    scan_segment,
)

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_MIN_REL_CHANGE",
    "DEFAULT_MIN_SEGMENT",
    "ChangePoint",
    "compute_prefix_deviations",
    "compute_scan_p_value",
    "detect_change_points",
    "locate_split",
    "scan_segment",
]

DEFAULT_MIN_SEGMENT = 5
DEFAULT_ALPHA = 0.001
DEFAULT_MIN_REL_CHANGE = 0.01
LOCAL_WIDTH = 15  # nights on each side of a split that must show the jump
LOCAL_ALPHA = 0.02  # ... significantly (rank-sum test of those nights alone)
TREND_Z = 2.5  # within-side trend this strong (standardized) means the series drifts ...
STEP_BEYOND_TREND_Z = 2.0  # ... and then the step must stand out of the trend this much
LOCATION_QUANTILE = 0.35  # of a lower-is-better side, for the location fit (0.65 if higher)


@dataclass(frozen=True, slots=True)
class ChangePoint:
    index: int  # the first point of the new level, as an index into the values given
    before: float  # median of the segment before the change
    after: float  # median of the segment from ``index`` on
    rel_change: float | None  # after / before - 1; None when ``before`` is 0
    p_value: float  # of the split between its neighbouring change points


def _relative(before: float, after: float) -> float | None:
    return None if before == 0.0 else after / before - 1.0


def _stands_out_of_trend(values: Array, index: int, direction: float) -> bool:
    """No drift within the sides, or a step beyond it in the same direction."""
    if abs(compute_trend_z(values, index)) < TREND_Z:
        return True
    return compute_step_beyond_trend_z(values, index) * direction >= STEP_BEYOND_TREND_Z


def _is_step(values: Array, index: int, min_rel_change: float) -> bool:
    """Large enough, and a jump: the nights right around the split differ by at least half as
    much as the two sides' medians do (a slow drift splits into two medians that differ, but
    its neighbouring nights do not), and the step is more than a trend within the sides."""
    before, after = float(np.median(values[:index])), float(np.median(values[index:]))
    change = _relative(before, after)
    if change is not None and abs(change) < min_rel_change:
        return False
    width = min(LOCAL_WIDTH, index, len(values) - index)
    nearby_before, nearby_after = values[index - width:index], values[index:index + width]
    local = float(np.median(nearby_after) - np.median(nearby_before))
    if local * (after - before) <= 0.0 or abs(local) < 0.5 * abs(after - before):
        return False
    if rank_sum_p_value(nearby_before, nearby_after) >= LOCAL_ALPHA:
        return False
    return _stands_out_of_trend(values, index, math.copysign(1.0, after - before))


@dataclass(frozen=True, slots=True)
class _Settings:
    min_segment: int
    alpha: float
    min_rel_change: float
    quantile: float  # of each side, for the location fit


def _accepted(values: Array, split: Split | None, settings: _Settings) -> tuple[int, float] | None:
    """Where the change is and the scan's p-value, when the split is significant and is a step,
    or None otherwise."""
    if split is None or split.p_value >= settings.alpha:
        return None
    index = locate_split(values, split.index, settings.min_segment, settings.quantile)
    return (index, split.p_value) if _is_step(values, index, settings.min_rel_change) else None


def _segment(values: Array, settings: _Settings) -> list[int]:
    """Binary segmentation: indices (into ``values``) of every accepted split."""
    found: list[int] = []
    pending = [(0, len(values))]
    while pending:
        start, end = pending.pop()
        part = values[start:end]
        accepted = _accepted(part, scan_segment(part, settings.min_segment), settings)
        if accepted is None:
            continue
        found.append(start + accepted[0])
        pending += [(start, start + accepted[0]), (start + accepted[0], end)]
    return sorted(found)


def _prune(values: Array, points: list[int], settings: _Settings) -> list[tuple[int, float]]:
    """Re-scan each point between its neighbours and drop the weakest until all hold."""
    while True:
        bounds = [0, *points, len(values)]
        checked: list[tuple[int, float]] = []
        for i, point in enumerate(points):
            part = values[bounds[i]:bounds[i + 2]]
            accepted = _accepted(part, scan_segment(part, settings.min_segment), settings)
            checked.append((point, 1.0) if accepted is None else
                           (bounds[i] + accepted[0], accepted[1]))
        weakest = max(range(len(checked)), key=lambda i: checked[i][1], default=None)
        if weakest is None or checked[weakest][1] < settings.alpha:
            return _deduplicate(checked)
        points = [p for i, p in enumerate(points) if i != weakest]


def _deduplicate(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    best: dict[int, float] = {}
    for index, p_value in points:
        best[index] = min(p_value, best.get(index, 1.0))
    return sorted(best.items())


def _constant_points(series: Array, min_segment: int,
                     min_rel_change: float) -> list[tuple[int, float]]:
    """The levels of a bit-constant series, each with the rank-sum p of its two sides."""
    found = detect_constant_steps(series, min_segment)
    bounds = [0, *found, len(series)]
    points: list[tuple[int, float]] = []
    for i, index in enumerate(found):
        before, after = series[bounds[i]:index], series[index:bounds[i + 2]]
        change = _relative(float(np.median(before)), float(np.median(after)))
        if change is None or abs(change) >= min_rel_change:
            points.append((index, rank_sum_p_value(before, after)))
    return points


def detect_change_points(
    values: Sequence[float | None],
    *,
    min_segment: int = DEFAULT_MIN_SEGMENT,
    alpha: float = DEFAULT_ALPHA,
    min_rel_change: float = DEFAULT_MIN_REL_CHANGE,
    lower_is_better: bool | None = None,
) -> list[ChangePoint]:
    """Change points of a whole history, oldest first. ``None`` (not measured) is skipped,
    and indices refer to positions in ``values``. ``lower_is_better`` (the metric's direction, when
    known) is accepted for callers that have it. The detector treats both directions alike."""
    if min_segment < 2:
        raise ValueError(f"min_segment must be >= 2 (got {min_segment})")
    positions = [i for i, v in enumerate(values) if v is not None]
    series = np.array([float(v) for v in values if v is not None], dtype=np.float64)
    if not np.all(np.isfinite(series)):
        raise ValueError("values must be finite numbers or None")
    if is_bit_constant(series):
        points = _constant_points(series, min_segment, min_rel_change)
    else:
        quantile = 0.5 if lower_is_better is None else \
            (LOCATION_QUANTILE if lower_is_better else 1.0 - LOCATION_QUANTILE)
        settings = _Settings(min_segment, alpha, min_rel_change, quantile)
        found = _segment(series, settings)
        points = _prune(series, found, settings) if found else []
    bounds = [0, *(index for index, _ in points), len(series)]
    result: list[ChangePoint] = []
    for i, (index, p_value) in enumerate(points):
        before = float(np.median(series[bounds[i]:index]))
        after = float(np.median(series[index:bounds[i + 2]]))
        result.append(ChangePoint(positions[index], before, after, _relative(before, after),
                                  p_value))
    return result
