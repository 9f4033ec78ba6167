"""Change points in a metric's history: where the level of a nightly series shifted for good.

The detector is rank-based, so heavy tails and single wild nights carry no more weight than any
other night, and it never splits off a segment shorter than ``min_segment``, so an outlier or a
spike that reverts within a few nights is not a change point:

1. **Scan.** In a segment of ``n`` values, every split ``k`` (both sides >= ``min_segment``)
   gets the standardized Wilcoxon rank-sum statistic ``Z_k`` of the values after ``k`` against
   those before it (mid-ranks, tie-corrected variance).
2. **Significance.** Under "no change" the ranks are a random permutation, whatever the
   distribution of the values, and ``max_k |Z_k|`` behaves like the maximum of a standardized
   Brownian bridge; its tail is ``P(max |Z| > b) ~ T b phi(b)`` with ``T = 2 ln((n-L)/L)``
   (Siegmund's approximation, which errs on the conservative side for discrete data). A split is
   kept when that p-value is below ``alpha`` and the medians on either side differ by at least
   ``min_rel_change``.
3. **Location and shape.** The split is placed where two flat levels fit best (least absolute
   deviation from each side's median, near the scan's maximum), and it must be a jump: the
   nights right around it differ by at least half the difference of the two sides' medians, so
   a slow drift is not reported as a step.
4. **Binary segmentation, then pruning.** Accepted splits are searched again on both sides; then
   each change point is re-scanned between its neighbours (which refines its location) and the
   weakest is dropped until every one is significant on its own.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tracker.analysis.stats import compute_median, compute_ranks, mann_whitney

DEFAULT_MIN_SEGMENT = 5
DEFAULT_ALPHA = 0.005
DEFAULT_MIN_REL_CHANGE = 0.01
LOCAL_WIDTH = 10  # nights on each side of a split that must show the jump
LOCAL_ALPHA = 0.05  # ... significantly (rank-sum test of those nights alone)


@dataclass(frozen=True, slots=True)
class ChangePoint:
    index: int  # the first point of the new level, as an index into the values given
    before: float  # median of the segment before the change
    after: float  # median of the segment from ``index`` on
    rel_change: float | None  # after / before - 1; None when ``before`` is 0
    p_value: float  # of the split between its neighbouring change points


@dataclass(frozen=True, slots=True)
class _Split:
    index: int  # relative to the start of the scanned segment
    z: float
    p_value: float


def _overshoot(x: float) -> float:
    """Siegmund's correction for a maximum taken over discrete steps (nu(x), x > 0)."""
    half = x / 2.0
    cdf = 0.5 * math.erfc(-half / math.sqrt(2.0))
    density = math.exp(-0.5 * half * half) / math.sqrt(2.0 * math.pi)
    return (2.0 / x) * (cdf - 0.5) / (half * cdf + density)


def compute_scan_p_value(z_max: float, n: int, min_segment: int) -> float:
    """Approximate P(max_k |Z_k| >= z_max) over the splits of ``n`` exchangeable values."""
    if z_max <= 0.0:
        return 1.0
    density = math.exp(-0.5 * z_max * z_max) / math.sqrt(2.0 * math.pi)
    total = 0.0
    for k in range(min_segment, n - min_segment + 1):
        weight = n / (k * (n - k))
        total += _overshoot(z_max * math.sqrt(weight)) * weight
    tail = math.erfc(z_max / math.sqrt(2.0))  # the single-split two-sided p as a floor
    return min(1.0, max(tail, z_max * density * total))


def scan_segment(values: Sequence[float], min_segment: int) -> _Split | None:
    """The split with the largest standardized rank-sum statistic, and its scan p-value."""
    n = len(values)
    if n < 2 * min_segment:
        return None
    ranks, ties = compute_ranks(values)
    spread = (n + 1) - ties / (n * (n - 1))
    if spread <= 0.0:
        return None  # every value is equal
    best: _Split | None = None
    total = sum(ranks[:min_segment - 1])
    for k in range(min_segment, n - min_segment + 1):
        total += ranks[k - 1]  # rank sum of values[:k]
        after = (n * (n + 1) / 2.0 - total) - (n - k) * (n + 1) / 2.0
        z = after / math.sqrt(k * (n - k) * spread / 12.0)
        if best is None or abs(z) > abs(best.z):
            best = _Split(k, z, 0.0)
    if best is None:
        return None
    return _Split(best.index, best.z, compute_scan_p_value(abs(best.z), n, min_segment))


def _relative(before: float, after: float) -> float | None:
    return None if before == 0.0 else after / before - 1.0


def compute_prefix_deviations(values: Sequence[float]) -> list[float]:
    """``out[k]``: the sum of |v - median| over ``values[:k]``, for every k, in O(n log n)
    (two heaps hold the lower and upper halves)."""
    lower: list[float] = []  # max-heap of the lower half, negated
    upper: list[float] = []
    lower_sum = upper_sum = 0.0
    out = [0.0]
    for value in values:
        if not lower or value <= -lower[0]:
            heapq.heappush(lower, -value)
            lower_sum += value
        else:
            heapq.heappush(upper, value)
            upper_sum += value
        if len(lower) > len(upper) + 1:
            moved = -heapq.heappop(lower)
            lower_sum -= moved
            heapq.heappush(upper, moved)
            upper_sum += moved
        elif len(upper) > len(lower):
            moved = heapq.heappop(upper)
            upper_sum -= moved
            heapq.heappush(lower, -moved)
            lower_sum += moved
        middle = -lower[0]
        out.append((middle * len(lower) - lower_sum) + (upper_sum - middle * len(upper)))
    return out


def locate_split(values: Sequence[float], near: int, min_segment: int) -> int:
    """The split where two flat levels fit best: least absolute deviation from each side's
    median (ties go to the split nearest ``near``). The rank scan finds *that* there is a
    change; with a large step its maximum drifts toward the middle of the segment, so the
    location comes from this L1 fit."""
    before = compute_prefix_deviations(values)
    after = compute_prefix_deviations(values[::-1])[::-1]
    candidates = range(min_segment, len(values) - min_segment + 1)
    return min(candidates, key=lambda k: (before[k] + after[k], abs(k - near)))


def _is_step(values: Sequence[float], index: int, min_rel_change: float) -> bool:
    """Large enough, and a jump: the nights right around the split differ by at least half as
    much as the two sides' medians do (a slow drift splits into two medians that differ, but
    its neighbouring nights do not)."""
    before, after = compute_median(values[:index]), compute_median(values[index:])
    change = _relative(before, after)
    if change is not None and abs(change) < min_rel_change:
        return False
    width = min(LOCAL_WIDTH, index, len(values) - index)
    nearby_before, nearby_after = values[index - width:index], values[index:index + width]
    local = compute_median(nearby_after) - compute_median(nearby_before)
    if local * (after - before) <= 0.0 or abs(local) < 0.5 * abs(after - before):
        return False
    return mann_whitney(nearby_before, nearby_after).p_value < LOCAL_ALPHA


def _accepted_index(values: Sequence[float], split: _Split | None, alpha: float,
                    min_rel_change: float, min_segment: int) -> int | None:
    """Where the change is, when the split is significant and a step; otherwise None."""
    if split is None or split.p_value >= alpha:
        return None
    index = locate_split(values, split.index, min_segment)
    return index if _is_step(values, index, min_rel_change) else None


def _segment(values: Sequence[float], min_segment: int, alpha: float,
             min_rel_change: float) -> list[int]:
    """Binary segmentation: indices (into ``values``) of every accepted split."""
    found: list[int] = []
    pending = [(0, len(values))]
    while pending:
        start, end = pending.pop()
        part = values[start:end]
        index = _accepted_index(part, scan_segment(part, min_segment), alpha, min_rel_change,
                                min_segment)
        if index is None:
            continue
        found.append(start + index)
        pending += [(start, start + index), (start + index, end)]
    return sorted(found)


def _prune(values: Sequence[float], points: list[int], min_segment: int, alpha: float,
           min_rel_change: float) -> list[tuple[int, float]]:
    """Re-scan each point between its neighbours; drop the weakest until all hold."""
    while True:
        bounds = [0, *points, len(values)]
        checked: list[tuple[int, float]] = []
        for i, point in enumerate(points):
            part = values[bounds[i]:bounds[i + 2]]
            split = scan_segment(part, min_segment)
            index = _accepted_index(part, split, alpha, min_rel_change, min_segment)
            if split is None or index is None:
                checked.append((point, 1.0))
            else:
                checked.append((bounds[i] + index, split.p_value))
        weakest = max(range(len(checked)), key=lambda i: checked[i][1], default=None)
        if weakest is None or checked[weakest][1] < alpha:
            return _deduplicate(checked)
        points = [p for i, p in enumerate(points) if i != weakest]


def _deduplicate(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    best: dict[int, float] = {}
    for index, p_value in points:
        best[index] = min(p_value, best.get(index, 1.0))
    return sorted(best.items())


def detect_change_points(
    values: Sequence[float | None],
    *,
    min_segment: int = DEFAULT_MIN_SEGMENT,
    alpha: float = DEFAULT_ALPHA,
    min_rel_change: float = DEFAULT_MIN_REL_CHANGE,
) -> list[ChangePoint]:
    """Change points of a whole history, oldest first. ``None`` (not measured) is skipped;
    indices refer to positions in ``values``."""
    if min_segment < 2:
        raise ValueError(f"min_segment must be >= 2 (got {min_segment})")
    positions = [i for i, v in enumerate(values) if v is not None]
    series = [float(v) for v in values if v is not None]
    if any(not math.isfinite(v) for v in series):
        raise ValueError("values must be finite numbers or None")
    found = _segment(series, min_segment, alpha, min_rel_change)
    points = _prune(series, found, min_segment, alpha, min_rel_change) if found else []
    bounds = [0, *(index for index, _ in points), len(series)]
    result: list[ChangePoint] = []
    for i, (index, p_value) in enumerate(points):
        before = compute_median(series[bounds[i]:index])
        after = compute_median(series[index:bounds[i + 2]])
        result.append(ChangePoint(positions[index], before, after, _relative(before, after),
                                  p_value))
    return result
