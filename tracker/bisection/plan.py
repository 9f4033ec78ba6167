"""Which change did it: delta debugging over the fields of a config diff.

A head config that regresses against its base usually changes several fields. The bisection
builds intermediate configs (probes) that apply a subset of the base → head changes to the base,
runs each against interleaved base controls (``tracker.bisection.probes``) and asks the analysis
whether the probe regresses on the metric the gate failed on. The search here is Zeller's
delta debugging with interference (``narrow``): split the fields in two halves. A half that
regresses on its own holds a culprit and is narrowed alone. When neither half does, the two
interact, so each half is narrowed with the other one applied. One guilty field among k takes
about 2·log2(k) probes at most (5 fields: 6), and two fields that regress only together are
returned as one group (a pair).

A probe that cannot be judged (its config is refused, its target fails to start, a run does
not complete) is unresolved: the search records it and tries another split of the same fields
(each field apart from the others), and only gives a set up as "could not narrow" when no split
resolves. The whole search has a budget (probes, minutes). When it runs out, the result is the
smallest set of fields known to regress, marked as narrowed, not as the culprit.

Each culprit group gets its share of the regression on the failing metric: the log change of a
probe applying that group alone over the log change of the head, with the interval from the two
verdicts' intervals (the corners: conservative). A group whose share interval stays below 1
leaves part of the regression unexplained, so the remaining fields are probed and searched too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from tracker.analysis import Verdict


class ProbeOutcome(StrEnum):
    REGRESSED = "regressed"  # the analysis keeps the failing metric a regression
    CLEAN = "clean"  # no change, an improvement, or a change smaller than the minimum effect
    INCONCLUSIVE = "inconclusive"  # not shown to regress in the rounds it had
    INVALID = "invalid"  # the config with these fields is refused (no run)
    FAILED = "failed"  # the target failed to start, or a run did not complete

    @property
    def resolved(self) -> bool:
        return self not in (ProbeOutcome.INVALID, ProbeOutcome.FAILED)


class BisectOutcome(StrEnum):
    NO_REGRESSION = "no_regression"  # the gate passed: nothing to bisect, no probe run
    NOT_MEASURED = "not_measured"  # the gate could not measure the head against the base
    FOUND = "found"  # the smallest set(s) of fields that explain the regression
    NARROWED = "narrowed"  # the budget ran out, or probes could not be resolved: a superset
    INTERRUPTED = "interrupted"  # stopped (Ctrl-C, SIGTERM) while probing: the probes so far


@dataclass(frozen=True, slots=True)
class ProbeJudgement:
    """What one probe showed: its outcome on the failing metric and the verdict behind it."""

    outcome: ProbeOutcome
    reason: str
    verdict: Verdict | None = None
    control_run_ids: tuple[int, ...] = ()  # the base runs interleaved with it
    probe_run_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Probe:
    number: int  # 1, 2, ... in the order they ran
    fields: tuple[str, ...]  # the diff's paths applied with the head's values
    judgement: ProbeJudgement


@dataclass(frozen=True, slots=True)
class Culprit:
    """A field, or fields that regress only together, and the part of the regression it explains."""

    fields: tuple[str, ...]
    verdict: Verdict | None  # the probe applying these fields alone, against the base
    share: float | None  # of the head's regression on the failing metric; None: not measured
    share_interval: tuple[float, float] | None = None

    @property
    def interaction(self) -> bool:
        return len(self.fields) > 1


@dataclass(frozen=True, slots=True)
class SearchResult:
    outcome: BisectOutcome
    culprits: tuple[Culprit, ...]
    probes: tuple[Probe, ...]
    stop_reason: str


class BudgetSpent(Exception):
    """Raised by a judge when the next probe would exceed the bisection's budget."""


Judge = Callable[[tuple[str, ...], int], ProbeJudgement]  # (fields, probe number) -> judgement


@dataclass
class _Search:
    fields: tuple[str, ...]  # in the diff's order
    judge: Judge
    head: Verdict | None  # the gate's verdict of the head on the failing metric
    probes: list[Probe] = field(default_factory=list)
    seen: dict[frozenset[str], ProbeJudgement] = field(default_factory=dict)
    smallest: frozenset[str] = frozenset()  # the smallest set known to regress
    unsplit: bool = False  # some set could not be narrowed: its probes did not resolve

    def test(self, applied: frozenset[str]) -> ProbeOutcome:
        if not applied:
            return ProbeOutcome.CLEAN  # the base itself
        if applied == frozenset(self.fields):
            return ProbeOutcome.REGRESSED  # the head itself: the gate's controls said so
        if applied not in self.seen:
            ordered = tuple(f for f in self.fields if f in applied)
            judgement = self.judge(ordered, len(self.probes) + 1)
            self.seen[applied] = judgement
            self.probes.append(Probe(len(self.probes) + 1, ordered, judgement))
        outcome = self.seen[applied].outcome
        if outcome is ProbeOutcome.REGRESSED and len(applied) < len(self.smallest):
            self.smallest = applied
        return outcome

    def narrow(self, changes: tuple[str, ...], context: frozenset[str]) -> tuple[str, ...]:
        """The smallest part of ``changes`` that, with ``context`` applied, still regresses
        (where ``context`` alone does not and ``context`` with all of ``changes`` does)."""
        if len(changes) == 1:
            return changes
        for first, second in compute_splits(changes):
            a = self.test(context | set(first))
            if a is ProbeOutcome.REGRESSED:
                return self.narrow(first, context)
            b = self.test(context | set(second))
            if b is ProbeOutcome.REGRESSED:
                return self.narrow(second, context)
            if a.resolved and b.resolved:  # neither half alone: they interact
                left = self.narrow(first, context | set(second))
                right = self.narrow(second, context | set(left))
                return tuple(f for f in changes if f in {*left, *right})
        self.unsplit = True
        return changes

    def culprit(self, group: tuple[str, ...]) -> Culprit:
        if len(group) == len(self.fields):
            return Culprit(group, self.head, 1.0 if self.head is not None else None,
                           (1.0, 1.0) if self.head is not None else None)
        self.test(frozenset(group))  # a group found with other fields applied: probe it alone
        verdict = self.seen[frozenset(group)].verdict
        share = compute_share(verdict, self.head)
        return Culprit(group, verdict, *share)


def compute_splits(changes: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The splits to try: halves first, then, when a half's probe did not resolve, each field
    apart from the rest."""
    middle = len(changes) // 2
    yield changes[:middle], changes[middle:]
    for i, one in enumerate(changes):
        rest = changes[:i] + changes[i + 1:]
        if (one,) not in (changes[:middle], changes[middle:]):
            yield (one,), rest


def search_culprits(fields: Sequence[str], judge: Judge, head: Verdict | None) -> SearchResult:
    """Search the diff's ``fields`` (the head regresses, the base is the reference) with probes
    judged by ``judge``. The budget is the judge's to enforce (``BudgetSpent``)."""
    if not fields:
        return SearchResult(BisectOutcome.NARROWED, (), (), "the two configs do not differ, so "
                            "no field can explain it: look at the target, the machine or noise")
    search = _Search(tuple(fields), judge, head, smallest=frozenset(fields))
    culprits: list[Culprit] = []
    remaining = tuple(fields)
    try:
        while remaining:
            group = search.narrow(remaining, frozenset())
            culprit = search.culprit(group)
            culprits.append(culprit)
            remaining = tuple(f for f in remaining if f not in group)
            if not _explains_part(culprit) or not remaining:
                break
            if search.test(frozenset(remaining)) is not ProbeOutcome.REGRESSED:
                break  # the rest alone does not regress: nothing more to find
            search.smallest = frozenset(remaining)
    except BudgetSpent as spent:
        narrowed = tuple(f for f in fields if f in search.smallest)
        if not culprits or set(narrowed) - {f for c in culprits for f in c.fields}:
            culprits.append(Culprit(narrowed, None, None))
        return SearchResult(BisectOutcome.NARROWED, tuple(culprits), tuple(search.probes),
                            f"budget spent after {len(search.probes)} probes ({spent})")
    outcome = BisectOutcome.NARROWED if search.unsplit else BisectOutcome.FOUND
    reason = (f"{len(search.probes)} probes; some probes could not be judged, so a culprit may "
              "hold more fields than it needs" if search.unsplit
              else f"found after {len(search.probes)} probes")
    return SearchResult(outcome, tuple(culprits), tuple(search.probes), reason)


def _explains_part(culprit: Culprit) -> bool:
    """True when the culprit's share interval stays below the whole regression."""
    return culprit.share_interval is not None and culprit.share_interval[1] < 1.0


def compute_share(part: Verdict | None, whole: Verdict | None
                  ) -> tuple[float | None, tuple[float, float] | None]:
    """The share of ``whole``'s change that ``part``'s explains, on the log scale (changes are
    ratios), with an interval from the corners of their two intervals, or None where either was
    not estimated or the whole's interval reaches no change (a share of nothing)."""
    if part is None or whole is None or part.rel_change is None or whole.rel_change is None:
        return None, None
    if part.rel_change <= -1.0 or whole.rel_change <= -1.0 or whole.rel_change == 0.0:
        return None, None
    share = math.log1p(part.rel_change) / math.log1p(whole.rel_change)
    if part.ci is None or whole.ci is None:
        return share, None
    low_w, high_w = (math.log1p(max(v, -0.999999)) for v in whole.ci)
    if low_w <= 0.0 <= high_w:
        return share, None
    ends = [math.log1p(max(p, -0.999999)) / w for p in part.ci for w in (low_w, high_w)]
    return share, (min(ends), max(ends))
