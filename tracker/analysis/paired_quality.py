"""Base and head answered the same quality items: judge the accuracy change item by item (pure).

Each item is a pair (right on base?, right on head?). Of the four cells only the discordant ones
say anything about a change: ``b`` right on base and wrong on head, ``c`` the reverse.

- The test is the exact McNemar test, a binomial test of ``b`` among the ``b + c`` discordant
  items at 1/2 (no normal approximation, so it holds for a handful of flips). The two-sided
  p-value is ``min(1, 2 P(X <= min(b, c)))``. The verdict spends the one-sided one in the bad
  direction, ``P(X >= b)``, like every other row of a gate (``tracker.analysis.holm``).
- The interval of the accuracy difference (head - base, absolute) is Newcombe's hybrid score
  interval for paired proportions (Newcombe 1998, method 10: each accuracy's Wilson interval,
  combined with the correlation phi of the pairs, phi's numerator corrected by n/2 towards 0
  when positive). Each end is a one-sided bound at ``confidence``, as ``Verdict.ci`` is.
- The drift is how many items' answer text changed (a model can keep its accuracy and still
  answer differently).
- The smallest detectable drop is the smallest accuracy drop that this test, at one-sided level
  ``1 - confidence``, catches with 80 % power for ``n`` pairs. The number of discordant items is
  Binomial(n, psi) with psi the observed discordance (at least the drop itself: a drop of d
  flips at least d·n items). Given D of them, ``b`` is Binomial(D, (psi + d) / 2 psi). The power
  is summed exactly over D, and the drop is found by bisection (``compute_detectable_drop``).
  ``bench/quality_power.py`` checks it against simulated pairs.

The decision matches ``compare_samples``': a regression when the drop is significant and at
least ``min_effect`` (absolute: 0.01 is one point of accuracy), no change when the interval lies
within ±``min_effect``, otherwise inconclusive, with the detectable drop in the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats  # type: ignore[import-untyped]

from tracker.analysis.compare import Outcome, Verdict

DEFAULT_MIN_DROP = 0.01  # one point of accuracy
POWER = 0.8


@dataclass(frozen=True, slots=True)
class PairedItem:
    item_id: str
    base_right: bool
    head_right: bool
    changed: bool  # the answer text differs between the sides


@dataclass(frozen=True, slots=True)
class PairedTable:
    """The 2x2 table of paired answers: a both right, b base only, c head only, d both wrong."""

    both_right: int
    base_only: int
    head_only: int
    both_wrong: int

    @property
    def pairs(self) -> int:
        return self.both_right + self.base_only + self.head_only + self.both_wrong

    @property
    def discordant(self) -> int:
        return self.base_only + self.head_only


@dataclass(frozen=True, slots=True)
class PairedQuality:
    table: PairedTable
    changed: int  # items whose answer text changed (drift)
    base_accuracy: float
    head_accuracy: float
    difference: float  # head - base, absolute (-0.05: five points worse)
    ci: tuple[float, float]  # of ``difference``; each end a one-sided bound at ``confidence``
    p_two_sided: float  # exact McNemar
    detectable_drop: float  # smallest drop caught with 80 % power (absolute)
    flipped_worse: tuple[str, ...]  # item ids right on base, wrong on head
    flipped_better: tuple[str, ...]
    verdict: Verdict


def compute_paired_table(pairs: Sequence[PairedItem]) -> PairedTable:
    cells = [0, 0, 0, 0]
    for pair in pairs:
        cells[(0 if pair.base_right else 2) + (0 if pair.head_right else 1)] += 1
    return PairedTable(cells[0], cells[1], cells[2], cells[3])


def compute_mcnemar_exact(base_only: int, head_only: int) -> float:
    """The exact two-sided McNemar p-value: ``min(1, 2 P(X <= min(b, c)))``, X ~ Bin(b + c, 1/2)."""
    n = base_only + head_only
    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * stats.binom.cdf(min(base_only, head_only), n, 0.5)))


def compute_mcnemar_one_sided(base_only: int, head_only: int) -> float:
    """P(X >= b), X ~ Bin(b + c, 1/2): small when head lost significantly more items."""
    n = base_only + head_only
    if n == 0:
        return 1.0
    return float(stats.binom.sf(base_only - 1, n, 0.5))


def _phi(table: PairedTable) -> float:
    a, b, c, d = table.both_right, table.base_only, table.head_only, table.both_wrong
    denominator = math.sqrt(float((a + b) * (c + d) * (a + c) * (b + d)))
    if denominator == 0.0:
        return 0.0
    numerator = float(a * d - b * c)
    if numerator > 0.0:
        numerator = max(numerator - table.pairs / 2.0, 0.0)
    return numerator / denominator


def compute_newcombe_interval(table: PairedTable, confidence: float) -> tuple[float, float]:
    """Newcombe's method 10 for head - base accuracy, each end a one-sided bound at
    ``confidence`` (on SciPy's Wilson intervals at ``2 confidence - 1``)."""
    n = table.pairs
    if n == 0:
        raise ValueError("no paired items")
    p_base = (table.both_right + table.base_only) / n
    p_head = (table.both_right + table.head_only) / n
    base, head = (stats.binomtest(table.both_right + cell, n).proportion_ci(
        2.0 * confidence - 1.0, method="wilson") for cell in (table.base_only, table.head_only))
    low_base, high_base, low_head, high_head = base.low, base.high, head.low, head.high
    phi = _phi(table)
    diff = p_head - p_base
    down_head, up_base = p_head - low_head, high_base - p_base
    up_head, down_base = high_head - p_head, p_base - low_base
    low = diff - math.sqrt(max(0.0, down_head ** 2 - 2 * phi * down_head * up_base + up_base ** 2))
    high = diff + math.sqrt(max(0.0, up_head ** 2 - 2 * phi * up_head * down_base
                                + down_base ** 2))
    return max(-1.0, low), min(1.0, high)


def compute_mcnemar_power(pairs: int, discordance: float, drop: float, alpha: float) -> float:
    """The chance that the one-sided exact McNemar test at ``alpha`` rejects, for ``pairs``
    items, a true accuracy drop ``drop`` and discordance ``discordance`` (>= drop)."""
    if drop <= 0.0:
        return 0.0
    psi = min(1.0, max(discordance, drop))
    share = min(1.0, (psi + drop) / (2.0 * psi))  # of the discordant items, the base-only share
    counts = np.arange(pairs + 1)
    critical = stats.binom.ppf(1.0 - alpha, counts, 0.5) + 1.0  # reject when b >= critical
    caught = stats.binom.sf(critical - 1.0, counts, share)
    return float(np.sum(stats.binom.pmf(counts, pairs, psi) * caught))


def compute_detectable_drop(pairs: int, discordance: float, alpha: float,
                            power: float = POWER) -> float:
    """The smallest accuracy drop (absolute) caught with ``power`` by the one-sided exact McNemar
    test at ``alpha``, for ``pairs`` items and the observed ``discordance`` (share of items that
    flipped either way: a drop flips at least its own share)."""
    if pairs <= 0:
        raise ValueError(f"need at least one paired item (got {pairs})")
    if compute_mcnemar_power(pairs, discordance, 1.0, alpha) < power:
        return 1.0  # not even losing every item would be caught
    low, high = 0.0, 1.0
    for _ in range(40):
        middle = (low + high) / 2.0
        if compute_mcnemar_power(pairs, max(discordance, middle), middle, alpha) >= power:
            high = middle
        else:
            low = middle
    return high


def compute_paired_quality(pairs: Sequence[PairedItem], *, min_effect: float = DEFAULT_MIN_DROP,
                           confidence: float = 0.95) -> PairedQuality:
    """Judge head against base on the items both answered (see the module's text)."""
    if not pairs:
        raise ValueError("no item was answered on both sides")
    if not 0.5 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0.5 and 1 (got {confidence})")
    table = compute_paired_table(pairs)
    n = table.pairs
    alpha = 1.0 - confidence
    base_accuracy = (table.both_right + table.base_only) / n
    head_accuracy = (table.both_right + table.head_only) / n
    ci = compute_newcombe_interval(table, confidence)
    detectable = compute_detectable_drop(n, table.discordant / n, alpha)
    verdict = _decide(table, (base_accuracy, head_accuracy), ci, detectable,
                      min_effect, confidence)
    return PairedQuality(
        table=table, changed=sum(1 for pair in pairs if pair.changed),
        base_accuracy=base_accuracy, head_accuracy=head_accuracy,
        difference=head_accuracy - base_accuracy, ci=ci,
        p_two_sided=compute_mcnemar_exact(table.base_only, table.head_only),
        detectable_drop=detectable,
        flipped_worse=tuple(p.item_id for p in pairs if p.base_right and not p.head_right),
        flipped_better=tuple(p.item_id for p in pairs if p.head_right and not p.base_right),
        verdict=verdict,
    )


def _decide(table: PairedTable, accuracy: tuple[float, float], ci: tuple[float, float],
            detectable: float, effect: float, confidence: float) -> Verdict:
    alpha = 1.0 - confidence
    diff = accuracy[1] - accuracy[0]
    p_worse = compute_mcnemar_one_sided(table.base_only, table.head_only)
    p_better = compute_mcnemar_one_sided(table.head_only, table.base_only)
    interval = (f"{diff * 100:+.1f} points [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}], "
                f"{table.base_only} lost / {table.head_only} gained of {table.pairs} items, "
                f"p(worse)={p_worse:.3g}")
    minimum = f"{effect * 100:.1f} points"
    if diff < 0.0 and p_worse < alpha and -diff >= effect:
        outcome = Outcome.REGRESSION
        reason = f"worse: {interval}; significant and at least the minimum drop of {minimum}"
    elif diff > 0.0 and p_better < alpha and diff >= effect:
        outcome, reason = Outcome.IMPROVEMENT, f"better: {interval}"
    elif -effect < ci[0] and ci[1] < effect:
        outcome, reason = Outcome.NO_CHANGE, f"no change: {interval} lies within ±{minimum}"
    elif min(p_worse, p_better) < alpha:
        outcome = Outcome.NO_CHANGE
        reason = f"no change that matters: {interval} is below the minimum of {minimum}"
    else:
        outcome = Outcome.INCONCLUSIVE
        reason = (f"inconclusive: {interval}; this set detects a drop of "
                  f"{detectable * 100:.1f} points at 80% power")
    rel = diff / accuracy[0] if accuracy[0] > 0.0 else None
    rel_ci = (ci[0] / accuracy[0], ci[1] / accuracy[0]) if accuracy[0] > 0.0 else None
    return Verdict(
        outcome=outcome, rel_change=rel, ci=rel_ci, p_value=p_worse, statistic="mean",
        lower_is_better=False, base_value=accuracy[0], head_value=accuracy[1],
        base_count=table.pairs, head_count=table.pairs, base_runs=1, head_runs=1,
        min_effect=effect, confidence=confidence,
        method="exact McNemar on paired items; Newcombe hybrid score interval (absolute "
               "difference; min_effect absolute)",
        reason=reason,
    )
