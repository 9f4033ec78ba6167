"""The numpy kernels of the change-point detector: the rank-sum scan and its p-value, the
L1 location fit, the local rank-sum check and the test of a step beyond a drift. Pure, no I/O.

Every function takes a 1-D float array (a segment of a nightly series) and returns plain
Python numbers, so ``changepoints.py`` reads as the algorithm and this module as its arithmetic.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy import special  # type: ignore[import-untyped]

from tracker.analysis.stats import compute_mid_ranks

Array = NDArray[np.float64]
Values = Array | Sequence[float]


@dataclass(frozen=True, slots=True)
class Split:
    index: int  # relative to the start of the scanned segment
    z: float  # standardized rank-sum statistic of the values after the split
    p_value: float  # of the maximum over every allowed split


def _overshoot(x: Array) -> Array:
    """Siegmund's correction for a maximum taken over discrete steps (nu(x), x > 0)."""
    half = x / 2.0
    cdf = special.ndtr(half)
    density = np.exp(-0.5 * half * half) / math.sqrt(2.0 * math.pi)
    return np.asarray((2.0 / x) * (cdf - 0.5) / (half * cdf + density), dtype=np.float64)


PERMUTATION_MAX = 40  # segments up to this long get the permutation law of the maximum
PERMUTATIONS = 20_000  # seeded, so the p-value of a given statistic is always the same
PERMUTATION_SEED = 15


@lru_cache(maxsize=64)
def _permutation_maxima(n: int, min_segment: int) -> Array:
    """Sorted ``max_k |Z_k|`` of ``PERMUTATIONS`` random orders of the ranks 1..n (no ties)."""
    rng = np.random.default_rng(PERMUTATION_SEED)
    ranks = np.argsort(rng.random((PERMUTATIONS, n)), axis=1).astype(np.float64) + 1.0
    k = np.arange(min_segment, n - min_segment + 1, dtype=np.float64)
    before = np.cumsum(ranks, axis=1)[:, min_segment - 1:n - min_segment]
    after = (n * (n + 1) / 2.0 - before) - (n - k) * (n + 1) / 2.0
    z = np.abs(after / np.sqrt(k * (n - k) * (n + 1) / 12.0))
    return np.sort(z.max(axis=1))


def _siegmund_p_value(z_max: float, n: int, min_segment: int) -> float:
    k = np.arange(min_segment, n - min_segment + 1, dtype=np.float64)
    weight = n / (k * (n - k))
    density = math.exp(-0.5 * z_max * z_max) / math.sqrt(2.0 * math.pi)
    total = float(np.sum(_overshoot(z_max * np.sqrt(weight)) * weight))
    tail = 2.0 * float(special.ndtr(-z_max))
    return min(1.0, max(tail, z_max * density * total))


def compute_scan_p_value(z_max: float, n: int, min_segment: int) -> float:
    """Approximate P(max_k |Z_k| >= z_max) over the splits of ``n`` exchangeable values.
    Up to ``PERMUTATION_MAX`` values, the share of seeded random orders of the ranks whose
    maximum reaches ``z_max`` (Siegmund's formula, below, is several times too large there:
    the few splits near either end cannot reach a large |Z|). Longer segments:
    ``z phi(z) sum_k nu(z sqrt(w_k)) w_k`` with ``w_k = n / (k (n - k))`` (Siegmund), floored
    at the single-split two-sided p."""
    if z_max <= 0.0 or n - 2 * min_segment < 0:
        return 1.0
    if n > PERMUTATION_MAX:
        return _siegmund_p_value(z_max, n, min_segment)
    maxima = _permutation_maxima(n, min_segment)
    reached = len(maxima) - int(np.searchsorted(maxima, z_max - 1e-9))
    return (reached + 1) / (len(maxima) + 1)


def scan_statistics(values: Array, min_segment: int) -> Array | None:
    """``Z_k`` for every split ``k`` in ``[min_segment, n - min_segment]`` (index 0 is
    ``k = min_segment``): the standardized rank sum of ``values[k:]``, tie-corrected.
    None when the segment is too short or every value is equal."""
    n = len(values)
    if n < 2 * min_segment:
        return None
    ranks, ties = compute_mid_ranks(values)
    spread = (n + 1) - ties / (n * (n - 1))
    if spread <= 1e-12:
        return None
    k = np.arange(min_segment, n - min_segment + 1, dtype=np.float64)
    before = np.cumsum(ranks)[min_segment - 1:n - min_segment]  # rank sum of values[:k]
    after = (n * (n + 1) / 2.0 - before) - (n - k) * (n + 1) / 2.0
    return np.asarray(after / np.sqrt(k * (n - k) * spread / 12.0), dtype=np.float64)


def scan_segment(values: Values, min_segment: int) -> Split | None:
    """The split with the largest |Z_k|, and the scan p-value of that maximum."""
    values = np.asarray(values, dtype=np.float64)
    z = scan_statistics(values, min_segment)
    if z is None:
        return None
    best = int(np.argmax(np.abs(z)))
    z_max = float(z[best])
    return Split(best + min_segment, z_max, compute_scan_p_value(abs(z_max), len(values),
                                                                 min_segment))


MATRIX_PREFIX_MAX = 600  # up to this many values, prefix medians come from one n x n sort


def compute_prefix_deviations(values: Values, quantile: float = 0.5) -> Array:
    """``out[k]`` is the least pinball loss of ``values[:k]`` around one level, for every k.

    At ``quantile`` 0.5 the loss is the sum of |v - median|. At another q it is q (v - m) above
    the q-quantile m and (1 - q) (m - v) below it. Short series sort the n x n matrix of
    prefixes once, and long series use two heaps in O(n log n), at the median."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n > MATRIX_PREFIX_MAX or n == 0:
        return _prefix_deviations_by_heaps(values)
    prefixes = np.where(np.tri(n, dtype=bool), values[None, :], np.inf)
    prefixes.sort(axis=1)
    sums = np.cumsum(np.where(np.isinf(prefixes), 0.0, prefixes), axis=1)
    sums = np.column_stack([np.zeros(n), sums])  # sums[r, j]: the j smallest of row r
    rows = np.arange(n)
    k = rows + 1
    if quantile == 0.5:
        deviations = (sums[rows, k] - sums[rows, (k + 1) // 2]) - sums[rows, k // 2]
        return np.concatenate([[0.0], deviations])
    at = np.clip(np.ceil(quantile * k).astype(np.int64) - 1, 0, n - 1)  # the q-quantile's rank
    level = prefixes[rows, at]
    below = level * at - sums[rows, at]
    above = (sums[rows, k] - sums[rows, at + 1]) - level * (k - at - 1)
    return np.concatenate([[0.0], quantile * above + (1.0 - quantile) * below])


def _prefix_deviations_by_heaps(values: Array) -> Array:
    lower: list[float] = []  # max-heap of the lower half, negated
    upper: list[float] = []
    lower_sum = upper_sum = 0.0
    out = np.zeros(len(values) + 1)
    for i, value in enumerate(values.tolist()):
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
        out[i + 1] = (middle * len(lower) - lower_sum) + (upper_sum - middle * len(upper))
    return out


def locate_split(values: Values, near: int, min_segment: int, quantile: float = 0.5) -> int:
    """The split where two flat levels fit best: least absolute deviation from each side's
    median (ties go to the split nearest ``near``). At another ``quantile`` the levels are
    that quantile of each side (pinball loss): a lower quantile for a metric whose nuisances
    (a slower host, a noisy neighbour) only ever push it up."""
    values = np.asarray(values, dtype=np.float64)
    before = compute_prefix_deviations(values, quantile)
    after = compute_prefix_deviations(values[::-1], quantile)[::-1]
    k = np.arange(min_segment, len(values) - min_segment + 1)
    cost = before[k] + after[k]
    best = np.flatnonzero(cost <= cost.min() + 1e-12 * max(1.0, abs(float(cost.min()))))
    return int(k[best[np.argmin(np.abs(best + min_segment - near))]])


def rank_sum_p_value(before: Array, after: Array) -> float:
    """Two-sided Mann-Whitney U p-value of ``after`` against ``before`` (normal approximation,
    tie- and continuity-corrected, as SciPy's ``mannwhitneyu``, whose 0.8 ms a call made the
    nightly monitor four times slower). It is 1 when every value is equal."""
    n, m = len(before), len(after)
    ranks, ties = compute_mid_ranks(np.concatenate([before, after]))
    total = n + m
    variance = n * m / 12.0 * ((total + 1) - ties / (total * (total - 1)))
    if variance <= 1e-12:
        return 1.0
    delta = float(np.sum(ranks[n:])) - m * (m + 1) / 2.0 - n * m / 2.0
    z = max(abs(delta) - 0.5, 0.0) / math.sqrt(variance)
    return min(1.0, 2.0 * float(special.ndtr(-z)))


def _normal_scores(values: Array) -> Array:
    ranks, _ = compute_mid_ranks(values)
    return (ranks - (len(values) + 1) / 2.0) / len(values)


def compute_trend_z(values: Array, index: int) -> float:
    """How strongly the values trend with time *within* the two sides of a split (the pooled
    within-side slope of their ranks, standardized): near 0 for flat levels, large for a drift
    whatever the step. A regression of ranks on time, one intercept per side."""
    scores = _normal_scores(values)
    time = np.arange(len(values), dtype=np.float64)
    side = time >= index
    centred_time = time - np.where(side, time[side].mean(), time[~side].mean())
    centred = scores - np.where(side, scores[side].mean(), scores[~side].mean())
    sxx = float(np.sum(centred_time**2))
    slope = float(np.sum(centred_time * centred)) / sxx
    residual = centred - slope * centred_time
    sigma = math.sqrt(float(np.sum(residual**2)) / max(1, len(values) - 3))
    return 0.0 if sigma <= 0.0 else slope * math.sqrt(sxx) / sigma


def compute_step_beyond_trend_z(values: Array, index: int) -> float:
    """The step at ``index`` once a common linear trend is allowed (ranks regressed on an
    intercept, time and the step), standardized: a drift alone gives about 0."""
    scores = _normal_scores(values)
    time = np.arange(len(values), dtype=np.float64) / len(values)
    design = np.column_stack([np.ones(len(values)), time, (time * len(values) >= index)])
    coef, _, rank, _ = np.linalg.lstsq(design, scores, rcond=None)
    if rank < 3:
        return 0.0
    residual = scores - design @ coef
    sigma2 = float(np.sum(residual**2)) / max(1, len(values) - 3)
    covariance = np.linalg.inv(design.T @ design) * sigma2
    return 0.0 if covariance[2, 2] <= 0.0 else float(coef[2]) / math.sqrt(covariance[2, 2])


