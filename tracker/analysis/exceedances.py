"""The tail itself, for a high quantile such as the p99: how many values exceed the pooled upper
quantiles, and by how much.

A p99 of 1,000 requests rests on about 10 of them, so a test of the p99's estimate alone (the
Harrell-Davis test in ``stats``) sees only a large move. The exceedance test looks at the top few
percent of both sides at once. At thresholds at the pooled ``1 - k (1 - q)`` quantiles (for the
p99: the pooled p95, p97 and p98), each value gets

- a **count** score: 1 above the threshold, 0 below (more of head's requests are slow);
- a **spread** score: the locally most powerful score against "head's excesses over the
  threshold are stretched", for a generalised Pareto fit of the pooled excesses (shape by
  probability-weighted moments, clipped to [0, 1], so a heavy tail gets bounded scores):
  ``-1 + (1 + xi) e / (beta + xi e)`` above the threshold, 0 below (head's slow requests are
  slower).

The test is the sum over head of the sum of these standardised scores. Every score is a function
of the *pooled* values only, so under "no difference" the labels are exchangeable: the
permutation mean and variance of the sum are exact for any distribution, and the statistic is
referred to Student's t with as many degrees of freedom as there are pooled values above the
lowest threshold (100 for two runs of 1,000: nearly the normal). Which thresholds carry which
score (``SPREAD_MULTIPLES``, ``COUNT_MULTIPLES``) was picked on exploratory seeds, on
stretches of the top 2, 3, 5 and 10 % and a shift of every request, never on the seeds
``bench/gate_calibration.py`` reports.

``tail_shift_test`` pairs the test with the Harrell-Davis estimate of the quantile's change: the
estimate is the one a reader expects (the p99 moved by so much), the p-values are the exceedance
test's, and the interval is the test inverted at the estimate, so an end excludes 0 exactly when
the test rejects.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tracker.analysis.stats import (
    FloatArray,
    ShiftTest,
    normal_ppf,
    quantile_shift_test,
    student_t_one_sided,
)

SPREAD_MULTIPLES = (5.0, 3.0, 2.0)  # spread scores above the pooled 1 - k (1 - q) quantiles
COUNT_MULTIPLES = (5.0, 2.0)  # count scores above the same kind of threshold
MIN_EXCEEDANCES = 10  # pooled values above the highest threshold, or no exceedance test
TAIL_TEST_MIN_Q = 0.95  # below this quantile the "tail" is half the sample: Harrell-Davis alone


def fit_tail_shape(excesses: FloatArray) -> tuple[float, float]:
    """Shape ``xi`` and scale ``beta`` of a generalised Pareto fit of positive ``excesses`` by
    probability-weighted moments (Hosking and Wallis 1987), the shape clipped to [0, 1]: at 0 the
    excesses are exponential and ``beta`` is their mean."""
    ordered = np.sort(excesses)
    count = len(ordered)
    plotting = (np.arange(1, count + 1) - 0.35) / count
    first, second = float(ordered.mean()), float(((1.0 - plotting) * ordered).mean())
    denominator = first - 2.0 * second
    if denominator <= 0.0:
        return 1.0, first
    xi = min(max(2.0 - first / denominator, 0.0), 1.0)
    if xi == 0.0:
        return 0.0, first
    return xi, 2.0 * first * second / denominator


def compute_spread_scores(pooled: FloatArray, threshold: float) -> FloatArray:
    """The spread score of every pooled value (0 at or below ``threshold``); all 0 when the
    excesses have no size."""
    excess = pooled - threshold
    above = excess > 0.0
    scores = np.zeros(len(pooled))
    if above.sum() < 2 or float(excess[above].mean()) == 0.0:
        return scores
    xi, beta = fit_tail_shape(excess[above])
    scaled = excess[above] / beta
    scores[above] = -1.0 + (1.0 + xi) * scaled / (1.0 + xi * scaled)
    return scores


def _standardised(scores: FloatArray, n: int) -> FloatArray | None:
    """Scores centred and divided by the permutation sd of their sum over ``n`` of the values;
    None when they do not vary."""
    total = len(scores)
    centred = scores - scores.mean()
    variance = n * (total - n) / (total * (total - 1)) * float((centred**2).sum())
    return None if variance <= 0.0 else centred / math.sqrt(variance)


def exceedance_z(x: FloatArray, y: FloatArray, q: float) -> tuple[float, float] | None:
    """The exceedance test's statistic of ``y`` against ``x`` for quantile ``q`` (positive:
    head's tail is heavier) and its degrees of freedom: the pooled values above the lowest
    threshold (with few of them the statistic's tails are a little heavier than the normal's);
    None when the top of the pooled values is too thin or has no spread."""
    pooled = np.concatenate([x, y])
    highest = 1.0 - min(*SPREAD_MULTIPLES, *COUNT_MULTIPLES) * (1.0 - q)
    if (pooled > np.quantile(pooled, highest)).sum() < MIN_EXCEEDANCES:
        return None
    parts = [compute_spread_scores(pooled, float(np.quantile(pooled, 1.0 - k * (1.0 - q))))
             for k in SPREAD_MULTIPLES]
    parts += [(pooled > np.quantile(pooled, 1.0 - k * (1.0 - q))).astype(np.float64)
              for k in COUNT_MULTIPLES]
    standardised = [s for s in (_standardised(p, len(x)) for p in parts) if s is not None]
    if not standardised:
        return None
    combined = _standardised(np.sum(standardised, axis=0), len(x))
    if combined is None:
        return None
    lowest = 1.0 - max(*SPREAD_MULTIPLES, *COUNT_MULTIPLES) * (1.0 - q)
    return float(combined[len(x):].sum()), float((pooled > np.quantile(pooled, lowest)).sum())


def tail_shift_test(x: Sequence[float], y: Sequence[float], q: float,
                    confidence: float) -> ShiftTest:
    """The change of the ``q`` quantile (Harrell-Davis) judged by the exceedance test; the
    Harrell-Davis test alone when ``q`` is below ``TAIL_TEST_MIN_Q`` or the tail is too thin."""
    estimate = quantile_shift_test(x, y, q, confidence)
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    test = exceedance_z(xs, ys, q) if q >= TAIL_TEST_MIN_Q else None
    if test is None:
        return estimate
    t, df = test
    p_up, p_down = student_t_one_sided(t, df)
    z = -normal_ppf(p_up) if 0.0 < p_up < 1.0 else t  # on the normal scale, for the interval
    shift = estimate.shift
    # the test-based error (Miettinen), or the estimate's own interval where the two disagree
    agree = shift * z > 0.0 and abs(z) >= 0.5
    half = normal_ppf(confidence) * shift / z if agree else estimate.high - shift
    top = max(*SPREAD_MULTIPLES, *COUNT_MULTIPLES) * (1.0 - q)
    return ShiftTest(shift, shift - half, shift + half, p_up, p_down,
                     f"exceedance test over the pooled top {top:.0%} + harrell-davis quantiles")
