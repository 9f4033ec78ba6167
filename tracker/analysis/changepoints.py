"""Change points in a metric's history: where the level of a nightly series shifted for good.

The detector is rank-based, so heavy tails, wild nights and a second (slower) host mode carry no
more weight than any other night, and it never splits off a segment shorter than
``min_segment``, so an outlier or a spike that reverts within a few nights is not a change point:

0. **Excursions set aside.** Nights far from the median of both the 7 nights before and the 7
   after them, on the same side (the bad side when the direction is known), are spikes or noisy
   neighbours, not levels: they are left out of everything below (``changepoint_excursions.py``).
1. **Scan.** In a segment of ``n`` values, every split ``k`` (both sides >= ``min_segment``)
   gets the standardized Wilcoxon rank-sum statistic ``Z_k`` of the values after ``k`` against
   those before it (mid-ranks, tie-corrected variance).
2. **Significance.** Under "no change" the ranks are a random permutation, whatever the
   distribution of the values, and ``max_k |Z_k|`` behaves like the maximum of a standardized
   Brownian bridge; its tail is Siegmund's approximation (conservative for discrete data).
3. **Candidates.** Binary segmentation on significance alone (``p < alpha``), each split
   placed where two flat levels fit best (least absolute deviation from each side's median),
   plus the peaks of a moving-window rank sum (``WINDOW_WIDTHS`` nights each side,
   ``|z| >= WINDOW_Z``), which see a step beside a larger one, or within a drift, where it is.
4. **Pruning between neighbours.** Each candidate is re-scanned between its neighbouring
   candidates (which refines its location) and must be a step there: significant, the medians
   on either side at least ``min_rel_change`` apart, the nights right around it differing by at
   least half as much, significantly (``LOCAL_ALPHA``), and, when the values trend within the
   ``TREND_WIDTH`` nights on either side (a drift or a random walk), standing out of a common
   linear trend (ranks regressed on time and the step). The weakest is dropped until every one
   holds. Judging each between its neighbours is what lets two steps the same way (a
   staircase) be two change points rather than one "drift".

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
from tracker.analysis.changepoint_excursions import find_excursions
from tracker.analysis.changepoint_scan import (
    Array,
    Split,
    compute_prefix_deviations,
    compute_scan_p_value,
    compute_step_beyond_trend_z,
    compute_trend_z,
    compute_window_z,
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
DEFAULT_ALPHA = 0.005
DEFAULT_MIN_REL_CHANGE = 0.01
LOCAL_WIDTH = 15  # nights on each side of a split that must show the jump
LOCAL_ALPHA = 0.005  # ... significantly (rank-sum test of those nights alone)
TREND_Z = 2.5  # within-side trend this strong (standardized) means the series drifts ...
STEP_BEYOND_TREND_Z = 2.0  # ... and then the step must stand out of the trend this much
TREND_WIDTH = 40  # nights on each side of a split that the drift check looks at
WINDOW_WIDTHS: tuple[int, ...] = (15,)  # nights a side of the moving-window candidates ...
WINDOW_Z = 3.0  # ... and the |z| of their peaks
LOCATION_QUANTILE = 0.5  # of a lower-is-better side, for the location fit (1 - it if higher);
# the median once excursions are set aside (35 % before); knobs picked on fleet seed 11


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
    start = max(0, index - TREND_WIDTH)
    values, index = values[start:index + TREND_WIDTH], index - start
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
    """Where the change is and the scan's p-value, when the split is significant and a step;
    otherwise None."""
    if split is None or split.p_value >= settings.alpha:
        return None
    index = locate_split(values, split.index, settings.min_segment, settings.quantile)
    return (index, split.p_value) if _is_step(values, index, settings.min_rel_change) else None


def _candidates(values: Array, settings: _Settings) -> list[int]:
    """Binary segmentation on significance alone: indices (into ``values``) of every split whose
    scan is significant, located by the level fit. Whether each one is a step is judged later,
    between its neighbours: two steps the same way look like a drift when judged together."""
    found: list[int] = []
    pending = [(0, len(values))]
    while pending:
        start, end = pending.pop()
        part = values[start:end]
        split = scan_segment(part, settings.min_segment)
        if split is None or split.p_value >= settings.alpha:
            continue
        at = start + locate_split(part, split.index, settings.min_segment, settings.quantile)
        found.append(at)
        pending += [(start, at), (at, end)]
    return sorted(found)


def _window_candidates(values: Array) -> list[int]:
    """Splits where a moving-window rank sum (``WINDOW_WIDTHS`` nights each side) peaks above
    ``WINDOW_Z``: a step next to a larger one, a step that reverts, or one within a drift, which
    a scan of the whole segment places elsewhere or misses."""
    found: list[int] = []
    for width in WINDOW_WIDTHS:
        z = np.abs(compute_window_z(values, width))
        for j in np.argsort(-z):
            if z[j] < WINDOW_Z:
                break
            if all(abs(width + int(j) - k) > width // 2 for k in found):
                found.append(width + int(j))
    return found


def _prune(values: Array, points: list[int], settings: _Settings) -> list[tuple[int, float]]:
    """Re-scan each point between its neighbours; drop the weakest until all hold. Dropping a
    point changes only its neighbours' segments, so every other verdict is kept."""
    verdicts: dict[tuple[int, int], tuple[int, float] | None] = {}
    while True:
        bounds = [0, *points, len(values)]
        checked: list[tuple[int, float]] = []
        for i, point in enumerate(points):
            key = (bounds[i], bounds[i + 2])
            if key not in verdicts:
                part = values[key[0]:key[1]]
                verdicts[key] = _accepted(part, scan_segment(part, settings.min_segment),
                                          settings)
            accepted = verdicts[key]
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
    """Change points of a whole history, oldest first. ``None`` (not measured) and excursions
    are skipped; indices refer to positions in ``values``. ``lower_is_better`` (the metric's
    direction, when known) says which way an excursion goes: only nights far off the bad way
    are set aside (both ways when it is None). Steps are found in either direction alike."""
    if min_segment < 2:
        raise ValueError(f"min_segment must be >= 2 (got {min_segment})")
    positions = [i for i, v in enumerate(values) if v is not None]
    series = np.array([float(v) for v in values if v is not None], dtype=np.float64)
    if not np.all(np.isfinite(series)):
        raise ValueError("values must be finite numbers or None")
    if is_bit_constant(series):
        points = _constant_points(series, min_segment, min_rel_change)
    else:
        kept = ~find_excursions(series, lower_is_better)
        positions = [p for p, keep in zip(positions, kept, strict=True) if keep]
        series = series[kept]
        quantile = 0.5 if lower_is_better is None else \
            (LOCATION_QUANTILE if lower_is_better else 1.0 - LOCATION_QUANTILE)
        settings = _Settings(min_segment, alpha, min_rel_change, quantile)
        found = sorted(set(_candidates(series, settings)) | set(_window_candidates(series)))
        points = _prune(series, found, settings) if found else []
    bounds = [0, *(index for index, _ in points), len(series)]
    result: list[ChangePoint] = []
    for i, (index, p_value) in enumerate(points):
        before = float(np.median(series[bounds[i]:index]))
        after = float(np.median(series[index:bounds[i + 2]]))
        result.append(ChangePoint(positions[index], before, after, _relative(before, after),
                                  p_value))
    return result
