"""One false-alarm budget for a whole gate: Holm's step-down over the regression p-values.

A gate judges many metrics at once (6 latency statistics and 2 throughputs per workload, over
every workload of the suite). Each ``compare_samples`` verdict keeps its own false-positive rate
at ``1 - confidence``. With 24 of them on identical configs, one of them says "regression" far
more often than that. ``judge_family`` spends one budget ``alpha`` on the whole family: Holm's
step-down (Holm 1979) on each verdict's one-sided regression p-value (``Verdict.p_value``), which
controls the family-wise error rate at ``alpha`` under any dependence between the metrics (the
p99 and the median of one latency, TTFT and E2E latency of one request are far from
independent). A verdict stays a regression at the family level when it is one on its own
(significant *and* at least its minimum effect) and its Holm-adjusted p-value is at most
``alpha``.

Verdicts without a p-value (nothing could be estimated) take no part and spend no budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracker.analysis.compare import Verdict


@dataclass(frozen=True, slots=True)
class FamilyJudgement:
    """Which verdicts of one family (a gate) remain regressions under one budget ``alpha``."""

    regressions: tuple[int, ...]  # indices into the verdicts given, ascending
    adjusted_p_values: tuple[float | None, ...]  # Holm-adjusted, per verdict; None: no p-value
    alpha: float
    tested: int  # verdicts with a p-value: the size of the family

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)


def compute_holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values: reject hypothesis i at level alpha iff its adjusted
    p-value is <= alpha. The k-th smallest p (0-based) is multiplied by ``m - k`` and the result
    made non-decreasing in that order, capped at 1."""
    for p in p_values:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-values must lie in [0, 1] (got {p})")
    count = len(p_values)
    order = sorted(range(count), key=p_values.__getitem__)
    adjusted = [1.0] * count
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (count - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def judge_family(verdicts: Sequence[Verdict], alpha: float = 0.05) -> FamilyJudgement:
    """Holm over the regression p-values of ``verdicts`` (one gate: every workload x metric).
    The answer lists the verdicts that remain regressions with the whole family held to
    ``alpha``: the chance that any of them is a false alarm on identical configs."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (got {alpha})")
    tested = [i for i, verdict in enumerate(verdicts) if verdict.p_value is not None]
    adjusted_tested = compute_holm_adjusted([verdicts[i].p_value or 0.0 for i in tested])
    adjusted: list[float | None] = [None] * len(verdicts)
    for index, value in zip(tested, adjusted_tested, strict=True):
        adjusted[index] = value
    regressions = tuple(i for i in tested
                        if verdicts[i].regressed and (adjusted[i] or 0.0) <= alpha)
    return FamilyJudgement(regressions=regressions, adjusted_p_values=tuple(adjusted),
                           alpha=alpha, tested=len(tested))
