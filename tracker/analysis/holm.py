"""Holm's step-down, once: one false-alarm budget over a family of one-sided p-values.

``compute_holm_levels`` is the step-down itself, used by the comparison policy
(``tracker.analysis.policy``) for every comparison the tracker makes. ``judge_family`` applies it
to a list of ``compare_samples`` verdicts.

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


@dataclass(frozen=True, slots=True)
class HolmLevels:
    """Holm's step-down at ``alpha`` over one-sided p-values: which are rejected, each one's
    adjusted p-value, and the level each is judged at (its Holm level when rejected, otherwise the
    level of the first one kept, ``alpha / (m - rejected)``)."""

    rejected: tuple[bool, ...]
    adjusted: tuple[float, ...]
    levels: tuple[float, ...]


def compute_holm_levels(p_values: Sequence[float], alpha: float) -> HolmLevels:
    """Holm's step-down over ``p_values`` at ``alpha``. A hypothesis is rejected at level
    ``alpha`` when its adjusted p-value is at most ``alpha``: the k-th smallest p (0-based) is
    multiplied by ``m - k``, and the results are made non-decreasing in that order, capped at 1."""
    count = len(p_values)
    order = sorted(range(count), key=p_values.__getitem__)
    rejected = [False] * count
    adjusted = [1.0] * count
    running = 0.0
    stopped = False
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (count - rank) * p_values[index]))
        adjusted[index] = running
        if not stopped and p_values[index] <= alpha / (count - rank):
            rejected[index] = True
        else:
            stopped = True
    kept_level = alpha / max(1, count - sum(rejected))
    levels = [kept_level] * count
    for rank, index in enumerate(order):
        if rejected[index]:
            levels[index] = alpha / (count - rank)
    return HolmLevels(tuple(rejected), tuple(adjusted), tuple(levels))


def judge_family(verdicts: Sequence[Verdict], alpha: float = 0.05) -> FamilyJudgement:
    """Holm over the regression p-values of ``verdicts`` (one gate: every workload x metric).
    The answer lists the verdicts that remain regressions with the whole family held to
    ``alpha``: the chance that any of them is a false alarm on identical configs."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (got {alpha})")
    tested = [i for i, verdict in enumerate(verdicts) if verdict.p_value is not None]
    for i in tested:
        if not 0.0 <= (verdicts[i].p_value or 0.0) <= 1.0:
            raise ValueError(f"p-values must lie in [0, 1] (got {verdicts[i].p_value})")
    adjusted_tested = compute_holm_levels([verdicts[i].p_value or 0.0 for i in tested],
                                          alpha).adjusted
    adjusted: list[float | None] = [None] * len(verdicts)
    for index, value in zip(tested, adjusted_tested, strict=True):
        adjusted[index] = value
    regressions = tuple(i for i in tested
                        if verdicts[i].regressed and (adjusted[i] or 0.0) <= alpha)
    return FamilyJudgement(regressions=regressions, adjusted_p_values=tuple(adjusted),
                           alpha=alpha, tested=len(tested))
