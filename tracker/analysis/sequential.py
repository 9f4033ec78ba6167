"""A sequential comparison over interleaved rounds: look after every round, stop when it is clear.

A *round* is one base run and one head run of the suite, back to back, so drift over time hits
both alike. After each round every row (a workload and metric) gets one paired observation: the
log ratio ``d = log(head statistic / base statistic)`` of that round's runs, signed so that a
positive ``d`` is worse. The run is the unit of replication: the rounds' own spread is the
noise, whatever its source (requests of one run are far from independent: they share batches,
and a whole run drifts), so nothing is assumed about it beyond a normal ``d``.

A group-sequential t-test per row, valid at every look up to ``max_rounds`` (not beyond): after
round ``n >= 2`` the two-sample t-test of the rounds' log statistics (pooled variance,
``2n - 2`` degrees of freedom, as ``compare_samples`` does over runs) gives a one-sided p-value.
Under "no change" the t statistics of the looks are pivotal (their joint law does not depend on
the noise), so the smallest p-value over all looks has a null law computed once by a seeded
simulation, and mapping the running minimum through it (``compute_sequential_p``) is an exact
p-value however many looks were taken (Pocock's repeated significance test, on the p scale):

- *regression*: Holm over the family's sequential p-values spends one ``alpha`` for the whole
  gate. A row is regressed once Holm rejects it and the estimate is at least its
  ``min_effect``. A look counts only once the next look shows the regression too (or alone, at
  the last round): on a busy host one burst of load can sit on both head runs of a round and on
  neither base run, and the next round's fresh runs are what tells a burst from a change
  (``RowEvidence.compute_p_worse``).
- *no regression*: the confidence sequence (each look's t interval at the per-look level that
  keeps the whole sequence at the row's level in the family, intersected over the looks) lies
  below ``min_effect``: a regression that matters is ruled out.

Both decisions are final. A row that has neither is *futile* while its conditional power (the
chance that the last look shows a regression if the trend so far holds) is under 20 %: a
futility stop only gives up looks, so it never adds a false alarm. Nothing is decided before
the second round (one round has no spread) unless a prior gives the noise, and no regression
before the look after the first that shows it. The gate is decided once a row regressed and no
row with a large observed effect (at least ``LARGE_EFFECT`` times its minimum effect, the worse
way) is still undecided, so the report explains the headline change and not only the first one
decided. It is also decided once every row that can be judged has ruled one out or is futile.
Otherwise it stops at ``max_rounds``, and the undecided rows are inconclusive. A row whose runs
are too small for its statistic (a p99 of 50 requests) is never judged and never holds the
gate.

The looks, the family's budget (Holm), the client's timing bound and the verdicts are the one
comparison policy's (``tracker.analysis.policy``): the same rules as every other comparison, a
look per round instead of one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from scipy import stats as scipy_stats  # type: ignore[import-untyped]

from tracker.analysis.compare import Verdict
from tracker.analysis.noise import (
    MIN_PRIOR_RUNS,
    MIN_VALUES,
    QUANTILES,
    STATISTICS,
    RunNoisePrior,
    compute_log_statistic,
    compute_run_noise_prior,
    describe_run_statistic,
)
from tracker.analysis.policy import (
    Look,
    RowEvidence,
    RowJudgement,
    RunSample,
    RunStatistic,
    compute_family_levels,
    compute_look,
    compute_observed,
    compute_pooled_statistic,
    compute_run_statistic,
    judge_rows,
)
from tracker.analysis.sequential_null import compute_look_level

__all__ = [
    "MIN_PRIOR_RUNS", "MIN_VALUES", "QUANTILES", "STATISTICS", "RoundSamples",
    "RowState", "RowStatus", "RunNoisePrior", "SequentialGate", "SequentialRow",
    "SequentialState", "compute_log_statistic", "compute_run_noise_prior",
]

FUTILITY_POWER = 0.2  # a row is futile while its conditional power is below this
LARGE_EFFECT = 2.0  # an undecided row this many minimum effects worse holds a regressed gate


class RowStatus(StrEnum):
    REGRESSED = "regressed"
    NO_REGRESSION = "no_regression"
    UNDECIDED = "undecided"
    FUTILE = "futile"  # undecided, but more rounds would likely not show a regression (for now)


@dataclass(frozen=True, slots=True)
class SequentialRow:
    """One row of the family: ``key`` is the caller's name for it ("chat/ttft_median_s")."""

    key: str
    statistic: str  # median | p90 | p99 | mean (of a run's values; a single value: itself)
    lower_is_better: bool
    min_effect: float  # relative, >= 0


@dataclass(frozen=True, slots=True)
class RowState:
    key: str
    status: RowStatus
    verdict: Verdict
    decided_round: int | None  # the round that decided it; None while undecided
    regressed: bool = False  # a regression for the family (the one budget)
    adjusted_p_value: float | None = None  # Holm-adjusted over the family
    within_timing_error: bool = False  # only the client's timing error stood in the way
    evidence: RowEvidence | None = None  # what the verdict rests on (to judge in a wider family)


@dataclass(frozen=True, slots=True)
class SequentialState:
    rounds: int  # rounds observed so far
    max_rounds: int
    decided: bool  # a row regressed, or every row that can be judged ruled one out
    regressed: tuple[str, ...]  # keys of the rows that regressed, in row order
    rows: tuple[RowState, ...]
    holding: tuple[str, ...] = ()  # undecided rows with a large change the worse way

    @property
    def stop_reason(self) -> str:
        if self.decided:
            return f"decided after {self.rounds} of {self.max_rounds} rounds"
        if self.rounds >= self.max_rounds:
            return f"max rounds reached ({self.max_rounds})"
        return f"undecided after {self.rounds} of {self.max_rounds} rounds"


# key -> (base run, head run): each run's values (or a ``RunSample``, its timing bound with it)
RoundSamples = Mapping[str, tuple[Sequence[float] | RunSample, Sequence[float] | RunSample]]


def _as_sample(run: Sequence[float] | RunSample) -> RunSample:
    return run if isinstance(run, RunSample) else RunSample(tuple(float(v) for v in run))


@dataclass(slots=True)
class _Track:
    """What one row has seen: each round's run statistics, and its looks so far."""

    row: SequentialRow
    prior: RunNoisePrior | None = None
    base_stats: list[RunStatistic] = field(default_factory=list)
    head_stats: list[RunStatistic] = field(default_factory=list)
    base_values: list[float] = field(default_factory=list)
    head_values: list[float] = field(default_factory=list)
    base_runs: int = 0
    head_runs: int = 0
    lag_s: float = 0.0
    looks: list[Look] = field(default_factory=list)
    shortfall: str | None = None  # why a round did not count
    conditional_power: float | None = None  # of showing a regression by the last round
    status: RowStatus = RowStatus.UNDECIDED
    decided_round: int | None = None

    @property
    def judged(self) -> bool:
        return bool(self.looks)

    @property
    def prior_df(self) -> int:
        return 0 if self.prior is None else self.prior.df

    @property
    def observed(self) -> float | None:
        return compute_observed(self.base_stats, self.head_stats, self.row.lower_is_better)

    def evidence(self, max_rounds: int) -> RowEvidence:
        row = self.row
        noise = ("" if self.prior is None else
                 f", run-to-run noise pooled with {self.prior.runs} earlier runs")
        first = 1 if self.prior is not None else 2
        size = describe_run_statistic(row.statistic,
                                      len(self.head_values) // max(1, self.head_runs))
        method = (f"group-sequential t-test over {len(self.head_stats)} round(s) of each run's "
                  f"log {row.statistic}{size}, looks {first}..{max_rounds}{noise}")
        return RowEvidence(
            key=row.key, statistic=row.statistic, lower_is_better=row.lower_is_better,
            min_effect=row.min_effect, looks=tuple(self.looks),
            base_value=compute_pooled_statistic(self.base_values, row.statistic),
            head_value=compute_pooled_statistic(self.head_values, row.statistic),
            base_count=len(self.base_values), head_count=len(self.head_values),
            base_runs=self.base_runs, head_runs=self.head_runs,
            method=method if self.looks else "none",
            shortfall=self.shortfall or (None if self.looks else
                                         "no round measured both sides" if not self.head_stats
                                         else "one round has no spread: needs a second"),
            max_rounds=max_rounds, prior_df=self.prior_df, lag_s=self.lag_s,
            observed=compute_observed(self.base_stats, self.head_stats, row.lower_is_better),
            decided_round=self.decided_round,
            conditional_power=(self.conditional_power if _status(self) is RowStatus.FUTILE
                               else None))


class SequentialGate:
    """Call ``observe(round)`` after every round to get the state of the whole family."""

    def __init__(self, rows: Sequence[SequentialRow], *, alpha: float = 0.05,
                 max_rounds: int = 8,
                 prior: Mapping[str, RunNoisePrior] | None = None) -> None:
        if not 0.0 < alpha < 0.5:
            raise ValueError(f"alpha must be between 0 and 0.5 (got {alpha})")
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1 (got {max_rounds})")
        keys = [row.key for row in rows]
        if len(set(keys)) != len(keys):
            raise ValueError("row keys must be unique")
        for row in rows:
            if row.statistic not in STATISTICS or row.min_effect < 0.0:
                raise ValueError(f"{row.key}: statistic must be one of {', '.join(STATISTICS)} "
                                 f"and min_effect >= 0 (got {row.statistic!r}, {row.min_effect})")
        priors = dict(prior or {})
        unknown = sorted(set(priors) - set(keys))
        if unknown:
            raise ValueError(f"prior for rows that are not in the family: {', '.join(unknown)}")
        self.alpha, self.max_rounds = alpha, max_rounds
        self._tracks = [_Track(row, priors.get(row.key)) for row in rows]
        self._rounds = 0

    def observe(self, samples: RoundSamples) -> SequentialState:
        """One more round: ``samples[key] = (base run, head run)``, each its values or a
        ``RunSample`` (a row left out, or with an empty side, was not measured this round)."""
        if self._rounds >= self.max_rounds:
            raise ValueError(f"all {self.max_rounds} rounds were observed already")
        self._rounds += 1
        for track in self._tracks:
            pair = samples.get(track.row.key)
            if pair is None:
                continue
            base, head = _as_sample(pair[0]), _as_sample(pair[1])
            if base.values and head.values:
                _add_round(track, base, head)
        self._decide()
        return self.state()

    def state(self) -> SequentialState:
        judgements = self._judge()
        rows = tuple(RowState(t.row.key, _status(t), j.verdict, t.decided_round,
                              j.regressed, j.adjusted_p_value, j.within_timing_error,
                              t.evidence(self.max_rounds))
                     for t, j in zip(self._tracks, judgements, strict=True))
        regressed = tuple(t.row.key for t in self._tracks if t.status is RowStatus.REGRESSED)
        judged = [t for t in self._tracks if t.judged]
        settled = (RowStatus.NO_REGRESSION, RowStatus.FUTILE)
        ruled_out = bool(judged) and all(_status(t) in settled for t in judged)
        holding = self._large_undecided()
        decided = (bool(regressed) and not holding) or ruled_out
        return SequentialState(self._rounds, self.max_rounds, decided, regressed, rows, holding)

    def _judge(self) -> list[RowJudgement]:
        return judge_rows([t.evidence(self.max_rounds) for t in self._tracks], self.alpha)

    def _large_undecided(self) -> tuple[str, ...]:
        """The rows whose observed change is large the worse way and still undecided: the gate
        plays on to decide them (or to find them futile) before it stops."""
        return tuple(t.row.key for t in self._tracks
                     if _status(t) is RowStatus.UNDECIDED and t.observed is not None
                     and t.observed >= LARGE_EFFECT * math.log1p(t.row.min_effect))

    def _decide(self) -> None:
        judged = [t for t in self._tracks if t.judged]
        if not judged:
            return
        evidence = [t.evidence(self.max_rounds) for t in judged]
        worse, better = compute_family_levels([e.compute_p_worse() for e in evidence],
                                              [e.compute_p_better() for e in evidence],
                                              self.alpha)
        for k, (track, found) in enumerate(zip(judged, evidence, strict=True)):
            if track.status is not RowStatus.UNDECIDED:
                continue
            look = track.looks[-1]
            level = min(worse.levels[k], better.levels[k])
            if worse.rejected[k] and look.diff - look.bias_worse >= found.threshold:
                track.status, track.decided_round = RowStatus.REGRESSED, self._rounds
            elif look.se == 0.0:
                continue  # runs that agree exactly (a capacity on a ladder): no noise seen yet
            elif found.compute_interval(level)[1] < found.threshold:
                track.status, track.decided_round = RowStatus.NO_REGRESSION, self._rounds
            else:
                track.conditional_power = _conditional_power(
                    track, found, self._rounds, self.max_rounds, self.alpha / len(judged))


def _status(track: _Track) -> RowStatus:
    power = track.conditional_power
    if track.status is RowStatus.UNDECIDED and power is not None and power < FUTILITY_POWER:
        return RowStatus.FUTILE
    return track.status


def _conditional_power(track: _Track, found: RowEvidence, rounds: int, max_rounds: int,
                       alpha: float) -> float | None:
    """The chance that the last round's look shows a regression if the rounds to come follow
    the trend so far (Lan and Wittes's B-value: ``B(f) = Z sqrt(f)`` at information fraction
    ``f``, drifting by ``Z / sqrt(f)`` per unit), tested at the per-look level of a row that
    gets ``alpha`` alone. A futility stop never adds a false alarm: it only gives up looks."""
    if not track.looks or rounds >= max_rounds:
        return None
    fraction = rounds / max_rounds
    last_p = track.looks[-1].compute_p_worse()
    z = float(scipy_stats.norm.isf(min(max(last_p, 1e-12), 1.0 - 1e-12)))
    critical = float(scipy_stats.norm.isf(compute_look_level(max_rounds, alpha,
                                                             found.prior_df)))
    return float(scipy_stats.norm.sf((critical - z / math.sqrt(fraction))
                                     / math.sqrt(1.0 - fraction)))


# --- one round of one row --------------------------------------------------------------------


def _add_round(track: _Track, base: RunSample, head: RunSample) -> None:
    b = compute_run_statistic(base, track.row.statistic)
    h = compute_run_statistic(head, track.row.statistic)
    track.base_values.extend(base.values)
    track.head_values.extend(head.values)
    track.base_runs += 1
    track.head_runs += 1
    if isinstance(b, str) or isinstance(h, str):
        track.shortfall = b if isinstance(b, str) else str(h)
        return
    track.base_stats.append(b)
    track.head_stats.append(h)
    track.lag_s = max(track.lag_s, base.lag_s, head.lag_s)
    look = compute_look(track.base_stats, track.head_stats, track.row.lower_is_better,
                        track.prior)
    if look is not None:
        track.looks.append(look)

