"""Distribution-free statistics on numpy/SciPy: mid-ranks, Mann-Whitney U,
Hodges-Lehmann, the efficient-score rank test, Harrell-Davis quantiles, Welch and Student's t.

Everything here is pure (no I/O) and deterministic (no resampling), and vectorised, so a
comparison judges every request: 100,000 per side take well under a second
(``bench/compare_speed.py``). Quantiles and the normal law are numpy's and SciPy's, never
written again. The mid-ranks here are the one rank function (an argsort: SciPy's ``rankdata``
costs ten times as much on the short series the change-point monitor ranks every night).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as scipy_stats  # type: ignore[import-untyped]
from scipy.stats import mstats  # type: ignore[import-untyped]

FloatArray = npt.NDArray[np.float64]


def compute_mid_ranks(values: FloatArray) -> tuple[FloatArray, float]:
    """Mid-ranks (1-based) of ``values`` and the tie term sum(t^3 - t) over groups of ties."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new_group = np.empty(len(values), dtype=bool)
    new_group[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new_group[1:])
    starts = np.flatnonzero(new_group)
    sizes = np.diff(np.append(starts, len(values)))
    mid = starts + (sizes + 1) / 2.0  # 1-based mid-rank of each group of equal values
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(mid, sizes)
    return ranks, float(np.sum(sizes.astype(np.float64) ** 3 - sizes))


# --- the Mann-Whitney U test ----------------------------------------------------------------


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


# --- Hodges-Lehmann shift and its Mann-Whitney confidence interval (numpy) ------------------


def _as_array(values: Sequence[float]) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def _count_differences_at_most(xs: FloatArray, ys: FloatArray, bound: float) -> int:
    """How many pairs have ``y[j] - x[i] <= bound``, with both arrays sorted ascending."""
    return int(np.searchsorted(ys, xs + bound, side="right").sum())


def _largest_difference_at_most(xs: FloatArray, ys: FloatArray, bound: float) -> float:
    positions = np.searchsorted(ys, xs + bound, side="right")
    has = positions > 0
    if not has.any():
        return -math.inf
    return float((ys[positions[has] - 1] - xs[has]).max())


def select_pairwise_difference(x: Sequence[float], y: Sequence[float], k: int) -> float:
    """The ``k``-th smallest (1-based) of all ``y[j] - x[i]``, without listing the n*m pairs:
    bisection on the value, each step one vectorised count, then the pair difference below."""
    xs, ys = np.sort(_as_array(x)), np.sort(_as_array(y))
    low, high = float(ys[0] - xs[-1]), float(ys[-1] - xs[0])
    if _count_differences_at_most(xs, ys, low) >= k:
        return low
    for _ in range(200):
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
    """Shift of ``y`` relative to ``x`` with the two-sided interval at ``confidence`` that
    inverts the Mann-Whitney test (normal approximation, tie-corrected)."""
    n, m = len(x), len(y)
    pairs = n * m
    total = n + m
    _, ties = compute_mid_ranks(np.concatenate([_as_array(x), _as_array(y)]))
    variance = n * m / 12.0 * ((total + 1) - ties / (total * (total - 1)))
    z = float(scipy_stats.norm.ppf(0.5 + confidence / 2.0))
    k = max(1, math.floor(pairs / 2.0 - z * math.sqrt(max(variance, 0.0))))
    middle_low = select_pairwise_difference(x, y, (pairs + 1) // 2)
    middle_high = select_pairwise_difference(x, y, pairs // 2 + 1)
    return ShiftEstimate(
        shift=(middle_low + middle_high) / 2.0,
        low=select_pairwise_difference(x, y, k),
        high=select_pairwise_difference(x, y, pairs - k + 1),
    )


# --- shift tests on every request (numpy/SciPy) ----------------------------------------------


@dataclass(frozen=True, slots=True)
class ShiftTest:
    """A shift of ``y`` against ``x`` (on the scale given: log values for positive latencies),
    its interval, each end a one-sided bound at the confidence asked, and the one-sided p-values
    of "y is not larger" (``p_up``) and "y is not smaller" (``p_down``)."""

    shift: float
    low: float
    high: float
    p_up: float
    p_down: float
    method: str


def _one_sided(z: float) -> tuple[float, float]:
    return float(scipy_stats.norm.sf(z)), float(scipy_stats.norm.cdf(z))


@dataclass(frozen=True, slots=True)
class KernelScores:
    """The location score ``-g'/g`` of a Gaussian kernel density estimate ``g`` on a grid,
    winsorised at the 99th percentile of its size at the data, and its slope. They are evaluated
    at any value by interpolation (constant beyond the grid)."""

    centers: FloatArray
    scores: FloatArray
    slopes: FloatArray

    def at(self, values: FloatArray) -> FloatArray:
        return np.interp(values, self.centers, self.scores)

    def slope_at(self, values: FloatArray) -> FloatArray:
        return np.interp(values, self.centers, self.slopes)


def fit_kernel_scores(values: FloatArray) -> KernelScores | None:
    """Scores of the values' density (binned: bins of an eighth of the bandwidth, Silverman's
    robust rule), or None when the values have no spread."""
    spread = float(values.std())
    q25, q75 = np.quantile(values, [0.25, 0.75])
    if q75 > q25:
        spread = min(spread, float(q75 - q25) / 1.349)
    if spread == 0.0:
        return None
    width = 0.9 * spread * len(values) ** -0.2
    step = width / 8.0
    start = float(values.min()) - 5.0 * width
    bins = math.ceil((float(values.max()) + 5.0 * width - start) / step)
    counts = np.bincount(((values - start) / step).astype(np.int64), minlength=bins)
    offsets = np.arange(-40, 41) * step
    kernel = np.exp(-0.5 * (offsets / width) ** 2)
    density = np.convolve(counts, kernel, mode="same")
    slope = np.convolve(counts, -offsets / width**2 * kernel, mode="same")
    centers = start + (np.arange(len(density)) + 0.5) * step
    scores = -slope / np.maximum(density, 1e-300)
    limit = float(np.quantile(np.abs(np.interp(values, centers, scores)), 0.99))
    clipped = np.clip(scores, -limit, limit)
    return KernelScores(centers, clipped, np.gradient(clipped, step))


SCORE_TEST_MIN_SAMPLES = 200  # below this per side, the kernel scores are too noisy: Mann-Whitney


def _score_difference(scores: KernelScores, xs: FloatArray,
                      ys: FloatArray) -> tuple[float, float, float]:
    """Mean score of ``ys`` minus that of ``xs``, its standard error when the labels are
    exchangeable, and the mean score slope."""
    n, m = len(xs), len(ys)
    pooled = np.concatenate([xs, ys])
    values = scores.at(pooled)
    spread = float(((values - values.mean()) ** 2).sum()) / (n + m - 1)
    return (float(values[n:].mean() - values[:n].mean()),
            math.sqrt(spread * (1.0 / n + 1.0 / m)), float(scores.slope_at(pooled).mean()))


LOCAL_SHIFT = 0.5  # of the spread: a larger shift is Mann-Whitney's (the scores are local)


def score_rank_test(x: Sequence[float], y: Sequence[float], confidence: float) -> ShiftTest:
    """A shift of ``y`` against ``x`` by the efficient-score permutation test (Hajek): each
    value is scored by ``-g'/g`` of a kernel estimate ``g`` of the *pooled* density, so the
    labels stay exchangeable under "no difference" and the test holds its level for any
    distribution, while its power approaches the best test for that density's shape (on
    bimodal latencies, cache hits beside misses, far above Mann-Whitney's). The shift is the
    one-step estimate from the difference of the medians (scores refitted with ``y`` moved
    back by it), its interval the test inverted at that estimate (an end excludes 0 exactly
    when the one-sided test at ``confidence`` does). The scores are local: a shift
    of more than ``LOCAL_SHIFT`` times the spread (never seen without a difference: several
    standard errors even at 200 values) and samples smaller than ``SCORE_TEST_MIN_SAMPLES``
    per side get Mann-Whitney and Hodges-Lehmann instead."""
    xs, ys = _as_array(x), _as_array(y)
    if min(len(xs), len(ys)) < SCORE_TEST_MIN_SAMPLES:
        return rank_shift_test(x, y, confidence)
    start = float(np.median(ys) - np.median(xs))
    pooled = np.concatenate([xs, ys])
    q25, q75 = np.quantile(pooled, [0.25, 0.75])
    scores = fit_kernel_scores(pooled)
    if scores is None or abs(start) > LOCAL_SHIFT * float(q75 - q25) / 1.349:
        return rank_shift_test(x, y, confidence)
    difference, se, _ = _score_difference(scores, xs, ys)
    aligned = fit_kernel_scores(np.concatenate([xs, ys - start]))  # the shape, for the estimate
    if aligned is None:
        return rank_shift_test(x, y, confidence)
    moved, moved_se, slope = _score_difference(aligned, xs, ys - start)
    if se == 0.0 or moved_se == 0.0 or slope <= 0.0:
        return rank_shift_test(x, y, confidence)
    shift, z = start + moved / slope, difference / se
    # the test-based error (Miettinen): the interval excludes 0 exactly when the test rejects;
    # the estimate's own error where shift and z are too near 0 to divide
    shift_se = shift / z if shift * z > 0.0 and abs(z) >= 0.5 else moved_se / slope
    half = float(scipy_stats.norm.ppf(confidence)) * shift_se
    return ShiftTest(shift, shift - half, shift + half, *_one_sided(z),
                     "efficient-score rank test")


def rank_shift_test(x: Sequence[float], y: Sequence[float], confidence: float) -> ShiftTest:
    """Mann-Whitney U's one-sided p-values with the Hodges-Lehmann shift and the interval that
    inverts the same test (each end a one-sided bound at ``confidence``)."""
    p_up, p_down = rank_test_one_sided(x, y)
    shift = hodges_lehmann(x, y, 2.0 * confidence - 1.0)
    return ShiftTest(shift.shift, shift.low, shift.high, p_up, p_down,
                     "mann-whitney u + hodges-lehmann")


def quantile_shift_test(x: Sequence[float], y: Sequence[float], q: float,
                        confidence: float) -> ShiftTest:
    """The difference of the ``q`` quantiles of ``y`` and ``x`` by Harrell-Davis estimates (a
    weighted mean of every order statistic, scipy's ``hdquantiles``) and their jackknife
    standard errors (``hdquantiles_sd``), studentised against Student's t with as many degrees
    of freedom as there are values beyond the quantile on both sides: a p99 of 1,000 requests
    rests on about 10 of them, and a normal reference would be too sure."""
    xs, ys = _as_array(x), _as_array(y)
    hx, hy = (float(mstats.hdquantiles(v, [q])[0]) for v in (xs, ys))
    sx, sy = (float(mstats.hdquantiles_sd(v, [q])[0]) for v in (xs, ys))
    difference, se = hy - hx, math.hypot(sx, sy)
    if se == 0.0 or not math.isfinite(se):
        p_up, p_down = (0.0 if difference > 0.0 else 1.0), (0.0 if difference < 0.0 else 1.0)
        return ShiftTest(difference, difference, difference, p_up, p_down, "harrell-davis")
    df = max(1.0, (1.0 - q) * (len(xs) + len(ys)) if q >= 0.5 else q * (len(xs) + len(ys)))
    half = student_t_quantile(confidence, df) * se
    return ShiftTest(difference, difference - half, difference + half,
                     *student_t_one_sided(difference / se, df),
                     "harrell-davis quantiles with jackknife standard errors")


def mean_ratio_test(x: Sequence[float], y: Sequence[float], confidence: float,
                    log: bool) -> ShiftTest:
    """The difference of the means (Welch), as the log of their ratio when ``log`` (delta
    method), else in the values' own units."""
    xs, ys = _as_array(x), _as_array(y)
    mx, my = float(xs.mean()), float(ys.mean())
    vx, vy = float(xs.var(ddof=1)) / len(xs), float(ys.var(ddof=1)) / len(ys)
    if log:
        difference, vx, vy = math.log(my / mx), vx / mx**2, vy / my**2
    else:
        difference = my - mx
    se = math.sqrt(vx + vy)
    if se == 0.0:
        p_up, p_down = (0.0 if difference > 0.0 else 1.0), (0.0 if difference < 0.0 else 1.0)
        return ShiftTest(difference, difference, difference, p_up, p_down, "welch t")
    df = (vx + vy) ** 2 / (vx**2 / (len(xs) - 1) + vy**2 / (len(ys) - 1))
    half = student_t_quantile(confidence, df) * se
    return ShiftTest(difference, difference - half, difference + half,
                     *student_t_one_sided(difference / se, df), "welch t on the means")


Runs = Sequence[Sequence[float]]


# --- Student's t (SciPy) -------------------------------------------------------------------


def student_t_one_sided(t: float, df: float) -> tuple[float, float]:
    """(P(T >= t), P(T <= t)) for Student's t with ``df`` degrees of freedom."""
    return float(scipy_stats.t.sf(t, df)), float(scipy_stats.t.cdf(t, df))


def student_t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t."""
    return float(scipy_stats.t.ppf(p, df))
