"""Distribution-free statistics in pure Python: ranks, Mann-Whitney U, Hodges-Lehmann, bootstrap.

Everything here is pure (no I/O) and deterministic: the bootstrap takes a seeded
``random.Random``. Sizes are a few thousand values at most, so plain lists are fast enough.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy import stats as scipy_stats  # type: ignore[import-untyped]

_NORMAL = NormalDist()


def compute_quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of already sorted values, by linear interpolation (numpy's default)."""
    if not sorted_values:
        raise ValueError("quantile of an empty sample")
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def compute_median(values: Sequence[float]) -> float:
    return compute_quantile(sorted(values), 0.5)


def compute_mad(values: Sequence[float], center: float | None = None) -> float:
    """Median absolute deviation, scaled by 1.4826 so it estimates the std of normal data."""
    middle = compute_median(values) if center is None else center
    return 1.4826 * compute_median([abs(v - middle) for v in values])


def normal_cdf(z: float) -> float:
    return _NORMAL.cdf(z)


def normal_ppf(p: float) -> float:
    return _NORMAL.inv_cdf(p)


# --- ranks and the Mann-Whitney U test ------------------------------------------------------


def compute_ranks(values: Sequence[float]) -> tuple[list[float], float]:
    """Mid-ranks (1-based) of ``values`` and the tie term sum(t^3 - t) over groups of ties."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = 0.0
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        mid_rank = (start + end) / 2.0 + 1.0
        for position in range(start, end + 1):
            ranks[order[position]] = mid_rank
        size = end - start + 1
        ties += size**3 - size
        start = end + 1
    return ranks, ties


@dataclass(frozen=True, slots=True)
class RankTest:
    u: float  # U of the second sample: pairs (x, y) with y > x, ties counting one half
    z: float  # standardized, positive when the second sample tends to be larger
    p_value: float  # two-sided, normal approximation with tie correction
    variance: float  # of U under the null, tie-corrected


def mann_whitney(x: Sequence[float], y: Sequence[float]) -> RankTest:
    """Two-sided Mann-Whitney U test of ``y`` against ``x`` (normal approximation, tie-corrected,
    continuity-corrected). Meant for samples of about ten values or more per side."""
    n, m = len(x), len(y)
    if n == 0 or m == 0:
        raise ValueError("Mann-Whitney needs at least one value per sample")
    ranks, ties = compute_ranks([*x, *y])
    u = sum(ranks[n:]) - m * (m + 1) / 2.0
    total = n + m
    variance = n * m / 12.0 * ((total + 1) - ties / (total * (total - 1))) if total > 1 else 0.0
    if variance <= 0.0:  # every value is equal: no evidence of any difference
        return RankTest(u, 0.0, 1.0, 0.0)
    delta = u - n * m / 2.0
    corrected = max(abs(delta) - 0.5, 0.0)
    z = math.copysign(corrected / math.sqrt(variance), delta)
    return RankTest(u, z, min(1.0, 2.0 * (1.0 - normal_cdf(abs(z)))), variance)


def rank_test_one_sided(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """One-sided Mann-Whitney U p-values of ``y`` against ``x`` (scipy, normal approximation,
    tie- and continuity-corrected): (of "y is not larger", of "y is not smaller")."""
    if len(x) == 0 or len(y) == 0:
        raise ValueError("Mann-Whitney needs at least one value per sample")
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xs.min() == xs.max() == ys.min() == ys.max():
        return 1.0, 1.0  # every value is equal: no evidence either way
    up = scipy_stats.mannwhitneyu(ys, xs, alternative="greater", method="asymptotic")
    down = scipy_stats.mannwhitneyu(ys, xs, alternative="less", method="asymptotic")
    return float(up.pvalue), float(down.pvalue)


# --- Hodges-Lehmann shift and its Mann-Whitney confidence interval ---------------------------


def _count_differences_at_most(x: Sequence[float], y: Sequence[float], bound: float) -> int:
    """How many pairs have ``y[j] - x[i] <= bound``; both inputs sorted ascending."""
    count = 0
    j = 0
    for xi in x:  # as x grows, the admissible y grow too: one pass with two pointers
        limit = xi + bound
        while j < len(y) and y[j] <= limit:
            j += 1
        count += j
    return count


def _largest_difference_at_most(x: Sequence[float], y: Sequence[float], bound: float) -> float:
    best = -math.inf
    j = 0
    for xi in x:
        limit = xi + bound
        while j < len(y) and y[j] <= limit:
            j += 1
        if j:
            best = max(best, y[j - 1] - xi)
    return best


def select_pairwise_difference(x: Sequence[float], y: Sequence[float], k: int) -> float:
    """The ``k``-th smallest (1-based) of all ``y[j] - x[i]``, without listing the n*m pairs."""
    xs, ys = sorted(x), sorted(y)
    low, high = ys[0] - xs[-1], ys[-1] - xs[0]
    if _count_differences_at_most(xs, ys, low) >= k:
        return low
    for _ in range(200):  # bisect on the value, then snap to the pairwise difference below it
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        if _count_differences_at_most(xs, ys, middle) >= k:
            high = middle
        else:
            low = middle
    return _largest_difference_at_most(xs, ys, high)


@dataclass(frozen=True, slots=True)
class ShiftEstimate:
    shift: float  # Hodges-Lehmann: the median of all y - x
    low: float
    high: float


def hodges_lehmann(x: Sequence[float], y: Sequence[float], confidence: float) -> ShiftEstimate:
    """Shift of ``y`` relative to ``x`` with the interval that inverts the Mann-Whitney test."""
    n, m = len(x), len(y)
    pairs = n * m
    _, ties = compute_ranks([*x, *y])
    total = n + m
    variance = n * m / 12.0 * ((total + 1) - ties / (total * (total - 1)))
    z = normal_ppf(0.5 + confidence / 2.0)
    k = max(1, math.floor(pairs / 2.0 - z * math.sqrt(max(variance, 0.0))))
    middle_low = select_pairwise_difference(x, y, (pairs + 1) // 2)
    middle_high = select_pairwise_difference(x, y, pairs // 2 + 1)
    return ShiftEstimate(
        shift=(middle_low + middle_high) / 2.0,
        low=select_pairwise_difference(x, y, k),
        high=select_pairwise_difference(x, y, pairs - k + 1),
    )


# --- bootstrap -------------------------------------------------------------------------------

Runs = Sequence[Sequence[float]]


def resample_runs(runs: Runs, rng: random.Random) -> list[float]:
    """One hierarchical bootstrap sample: runs drawn with replacement, then values within each.

    With one run this is the ordinary bootstrap; with several, run-to-run variation enters the
    resamples, so a run, not a request, is the unit of replication.
    """
    chosen = runs if len(runs) == 1 else rng.choices(runs, k=len(runs))
    sample: list[float] = []
    for run in chosen:
        sample.extend(rng.choices(run, k=len(run)))
    return sample


def bootstrap_differences(
    base: Runs, head: Runs, statistic: Callable[[list[float]], float],
    rng: random.Random, resamples: int,
) -> list[float]:
    """``statistic(head*) - statistic(base*)`` over ``resamples`` paired bootstrap draws, sorted."""
    draws = [statistic(resample_runs(head, rng)) - statistic(resample_runs(base, rng))
             for _ in range(resamples)]
    draws.sort()
    return draws


def bootstrap_one_sided(sorted_draws: Sequence[float]) -> tuple[float, float]:
    """One-sided p-values from bootstrap draws of a difference: (of "not above 0", of "not
    below 0"), each the share of draws on the other side of 0 (plus one, so never 0)."""
    draws = np.asarray(sorted_draws, dtype=float)
    total = len(draws) + 1
    return (float((np.count_nonzero(draws <= 0.0) + 1) / total),
            float((np.count_nonzero(draws >= 0.0) + 1) / total))


def bootstrap_p_value(sorted_draws: Sequence[float]) -> float:
    """Two-sided p-value of "no difference" from bootstrap draws of a difference."""
    below = sum(1 for d in sorted_draws if d <= 0.0)
    above = sum(1 for d in sorted_draws if d >= 0.0)
    return min(1.0, 2.0 * (min(below, above) + 1) / (len(sorted_draws) + 1))


# --- Student's t (for run-level comparisons) --------------------------------------------------


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """Lentz's continued fraction for the regularized incomplete beta function."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-12:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def student_t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    return incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def student_t_one_sided(t: float, df: float) -> tuple[float, float]:
    """(P(T >= t), P(T <= t)) for Student's t with ``df`` degrees of freedom (scipy)."""
    return float(scipy_stats.t.sf(t, df)), float(scipy_stats.t.cdf(t, df))


def student_t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (scipy)."""
    return float(scipy_stats.t.ppf(p, df))


def student_t_ppf(p: float, df: float) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t, by bisection on the two-sided tail."""
    target = 2.0 * (1.0 - p)
    low, high = 0.0, 1e6
    for _ in range(200):
        middle = (low + high) / 2.0
        if student_t_two_sided_p(middle, df) > target:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


# --- a fast exact bootstrap of an upper quantile of one sample ---------------------------------


def draw_binomial(n: int, p: float, rng: random.Random) -> int:
    """Successes in ``n`` trials of probability ``p``, by geometric skips (O(n p) draws)."""
    if p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    log_miss = math.log1p(-p)
    count, position = 0, -1
    while True:
        position += int(math.log(1.0 - rng.random()) / log_miss) + 1
        if position >= n:
            return count
        count += 1


def bootstrap_upper_quantile(sorted_values: Sequence[float], q: float, rng: random.Random,
                             resamples: int) -> list[float]:
    """Bootstrap draws of the ``q`` quantile (q >= 0.5) of one sample, without building whole
    resamples: only the draws that land in the sample's top part decide an upper quantile, and
    their number is binomial. Exact: a draw falls back to a full resample when the top part
    drawn is too small to hold the order statistics needed."""
    n = len(sorted_values)
    low = math.floor(q * (n - 1))
    needed = n - low  # order statistics from position ``low`` up must come from the top part
    top = min(n, max(2 * needed + 10, math.ceil(1.5 * needed)))
    draws: list[float] = []
    for _ in range(resamples):
        count = draw_binomial(n, top / n, rng)
        if count < needed:
            draws.append(compute_quantile(sorted(rng.choices(sorted_values, k=n)), q))
            continue
        picked = sorted(sorted_values[n - top + int(rng.random() * top)] for _ in range(count))
        offset = n - count  # picked[i] is the resample's order statistic n - count + i
        fraction = q * (n - 1) - low
        below, above = picked[low - offset], picked[min(low + 1, n - 1) - offset]
        draws.append(below + (above - below) * fraction)
    return draws
