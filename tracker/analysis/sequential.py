"""A sequential comparison over interleaved rounds: look after every round, stop when it is clear.

A *round* is one base run and one head run of the suite, back to back, so drift over time hits
both alike. After each round every row (a workload and metric) gets one paired observation: the
log ratio ``d = log(head statistic / base statistic)`` of that round's runs, signed so that a
positive ``d`` is worse. The run is the unit of replication: the rounds' own spread is the
noise, whatever its source (requests of one run are far from independent: they share batches,
and a whole run drifts), so nothing is assumed about it beyond a normal ``d``.

A group-sequential t-test per row, valid at every look up to ``max_rounds`` (not beyond): after
round ``n >= 2`` the two-sample t-test of the rounds' log statistics (pooled variance,
``2n - 2`` degrees of freedom, as ``compare_samples`` does over runs) gives a one-sided p-value;
under "no change" the t statistics of the looks are pivotal (their joint law does not depend on
the noise), so the smallest p-value over all looks has a null law computed once by a seeded
simulation, and mapping the running minimum through it (``compute_sequential_p``) is an exact
p-value however many looks were taken (Pocock's repeated significance test, on the p scale):

- *regression*: Holm over the family's sequential p-values spends one ``alpha`` for the whole
  gate. A row is regressed once Holm rejects it and the estimate is at least its
  ``min_effect``.
- *no regression*: the confidence sequence (each look's t interval at the per-look level that
  keeps the whole sequence at ``alpha``, intersected over the looks) lies below ``min_effect``:
  a regression that matters is ruled out.

Both decisions are final. A row that has neither is *futile* while its conditional power (the
chance that the last look shows a regression if the trend so far holds) is under 20 %: a
futility stop only gives up looks, so it never adds a false alarm. Nothing is decided before
the second round (one round has no spread). The gate is decided at its first regression (more
rounds could not take it back) or once every row that can be judged has ruled one out or is
futile; it stops at ``max_rounds`` otherwise, the undecided rows inconclusive. A row whose runs
are too small for its statistic (a p99 of 50 requests) is never judged and never holds the
gate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from scipy import stats as scipy_stats  # type: ignore[import-untyped]

from tracker.analysis.compare import Outcome, Verdict
from tracker.analysis.family import compute_holm_adjusted
from tracker.analysis.sequential_null import (
    GUARD_ROUNDS,
    compute_look_level,
    compute_sequential_p,
)

QUANTILES: dict[str, float] = {"median": 0.5, "p90": 0.9, "p99": 0.99}
STATISTICS = (*QUANTILES, "mean")
MIN_VALUES = 8  # per run, for a per-request statistic
TAIL_VALUES = 2.0  # a quantile q needs this many values beyond it per run: n * (1 - q) >= 2
FUTILITY_POWER = 0.2  # a row is futile while its conditional power is below this
MIN_PRIOR_RUNS = 3  # earlier runs behind a prior, at least


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


@dataclass(frozen=True, slots=True)
class SequentialState:
    rounds: int  # rounds observed so far
    max_rounds: int
    decided: bool  # a row regressed, or every row that can be judged ruled one out
    regressed: tuple[str, ...]  # keys of the rows that regressed, in row order
    rows: tuple[RowState, ...]

    @property
    def stop_reason(self) -> str:
        if self.decided:
            return f"decided after {self.rounds} of {self.max_rounds} rounds"
        if self.rounds >= self.max_rounds:
            return f"max rounds reached ({self.max_rounds})"
        return f"undecided after {self.rounds} of {self.max_rounds} rounds"


@dataclass(frozen=True, slots=True)
class RunNoisePrior:
    """What earlier runs say about a row's run-to-run noise: the sample variance of their log
    statistic (``compute_run_noise_prior``) and its degrees of freedom (``k`` runs: ``k - 1``)."""

    variance: float
    df: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.variance) and self.variance >= 0.0 and self.df >= 1):
            raise ValueError(f"a prior needs a finite variance >= 0 and df >= 1 "
                             f"(got {self.variance}, {self.df})")

    @property
    def runs(self) -> int:
        return self.df + 1


def compute_run_noise_prior(runs: Sequence[Sequence[float]],
                            statistic: str) -> RunNoisePrior | None:
    """The prior of earlier runs' values (one list per run): None under ``MIN_PRIOR_RUNS`` runs
    whose statistic can be had."""
    logs = [x for x in (compute_log_statistic(run, statistic) for run in runs)
            if not isinstance(x, str)]
    if len(logs) < MIN_PRIOR_RUNS:
        return None
    return RunNoisePrior(float(np.var(logs, ddof=1)), len(logs) - 1)


RoundSamples = Mapping[str, tuple[Sequence[float], Sequence[float]]]  # key -> (base, head) values


@dataclass(slots=True)
class _Track:
    """What one row has seen: each round's signed log ratio, and its two tests so far."""

    row: SequentialRow
    prior: RunNoisePrior | None = None
    base_logs: list[float] = field(default_factory=list)  # signed: worse is larger on head
    head_logs: list[float] = field(default_factory=list)
    base_values: list[float] = field(default_factory=list)
    head_values: list[float] = field(default_factory=list)
    base_runs: int = 0
    head_runs: int = 0
    shortfall: str | None = None  # why a round did not count
    min_p: float = 1.0  # the smallest one-sided p-value over the looks so far
    last_p: float = 1.0  # the latest look's
    conditional_power: float | None = None  # of showing a regression by the last round
    low: float = -math.inf  # the confidence sequence (log, worse > 0), intersected over rounds
    high: float = math.inf
    status: RowStatus = RowStatus.UNDECIDED
    decided_round: int | None = None

    @property
    def judged(self) -> bool:
        return bool(self.head_logs)

    @property
    def prior_df(self) -> int:
        return 0 if self.prior is None else self.prior.df

    @property
    def estimate(self) -> float:
        return float(np.mean(self.head_logs) - np.mean(self.base_logs))


class SequentialGate:
    """``observe(round)`` after every round; it answers with the state of the whole family."""

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
        """One more round: ``samples[key] = (base values, head values)`` of that round's runs
        (a row left out, or with an empty side, was not measured in this round)."""
        if self._rounds >= self.max_rounds:
            raise ValueError(f"all {self.max_rounds} rounds were observed already")
        self._rounds += 1
        for track in self._tracks:
            pair = samples.get(track.row.key)
            if pair is not None and len(pair[0]) and len(pair[1]):
                _add_round(track, pair[0], pair[1], self.alpha, self.max_rounds)
        self._decide()
        return self.state()

    def state(self) -> SequentialState:
        rows = tuple(RowState(t.row.key, _status(t), _verdict(t, self.alpha, self._rounds,
                                                              self.max_rounds),
                              t.decided_round) for t in self._tracks)
        judged = [t for t in self._tracks if t.judged]
        regressed = tuple(t.row.key for t in self._tracks if t.status is RowStatus.REGRESSED)
        settled = (RowStatus.NO_REGRESSION, RowStatus.FUTILE)
        ruled_out = bool(judged) and all(_status(t) in settled for t in judged)
        decided = bool(regressed) or ruled_out
        return SequentialState(self._rounds, self.max_rounds, decided, regressed, rows)

    def _decide(self) -> None:
        judged = [t for t in self._tracks if t.judged]
        adjusted = compute_holm_adjusted([_p_value(t, self.max_rounds) for t in judged])
        rejected = [p <= self.alpha for p in adjusted]
        for track, reject in zip(judged, rejected, strict=True):
            if track.status is not RowStatus.UNDECIDED:
                continue
            threshold = math.log1p(track.row.min_effect)
            if reject and track.estimate >= threshold:
                track.status, track.decided_round = RowStatus.REGRESSED, self._rounds
            elif track.high < threshold:
                track.status, track.decided_round = RowStatus.NO_REGRESSION, self._rounds
            else:
                track.conditional_power = _conditional_power(track, self._rounds,
                                                             self.max_rounds,
                                                             self.alpha / len(judged))


def _status(track: _Track) -> RowStatus:
    power = track.conditional_power
    if track.status is RowStatus.UNDECIDED and power is not None and power < FUTILITY_POWER:
        return RowStatus.FUTILE
    return track.status


def _conditional_power(track: _Track, rounds: int, max_rounds: int,
                       alpha: float) -> float | None:
    """The chance that the last round's look shows a regression if the rounds to come follow
    the trend so far (Lan and Wittes's B-value: ``B(f) = Z sqrt(f)`` at information fraction
    ``f``, drifting by ``Z / sqrt(f)`` per unit), tested at the per-look level of a row that
    gets ``alpha`` alone. A futility stop never adds a false alarm: it only gives up looks."""
    if not _looked(track) or rounds >= max_rounds:
        return None
    fraction = rounds / max_rounds
    z = float(scipy_stats.norm.isf(min(max(track.last_p, 1e-12), 1.0 - 1e-12)))
    critical = float(scipy_stats.norm.isf(compute_look_level(max_rounds, alpha,
                                                             track.prior_df)))
    return float(scipy_stats.norm.sf((critical - z / math.sqrt(fraction))
                                     / math.sqrt(1.0 - fraction)))


# --- one round of one row --------------------------------------------------------------------


def compute_log_statistic(values: Sequence[float], statistic: str) -> float | str:
    """The log of a run's statistic, or why it cannot be had."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0 or not np.all(np.isfinite(x)) or float(x.min()) <= 0.0:
        return "values must be finite and > 0 for a ratio"
    if n == 1:
        return math.log(float(x[0]))  # a value measured once per run
    if statistic == "mean":
        return math.log(float(x.mean()))
    q = QUANTILES[statistic]
    needed = max(MIN_VALUES, math.ceil(TAIL_VALUES / (1.0 - q) - 1e-9))
    if n < needed:
        return f"{statistic} needs >= {needed} values per run (got {n})"
    return math.log(float(np.quantile(x, q)))


def _add_round(track: _Track, base: Sequence[float], head: Sequence[float],
               alpha: float, max_rounds: int) -> None:
    b = compute_log_statistic(base, track.row.statistic)
    h = compute_log_statistic(head, track.row.statistic)
    track.base_values.extend(base)
    track.head_values.extend(head)
    track.base_runs += 1
    track.head_runs += 1
    if isinstance(b, str) or isinstance(h, str):
        track.shortfall = b if isinstance(b, str) else str(h)
        return
    sign = 1.0 if track.row.lower_is_better else -1.0
    track.base_logs.append(sign * b)
    track.head_logs.append(sign * h)
    if not _looked(track) or len(track.head_logs) > max_rounds:
        return
    diff, (se, df) = track.estimate, _standard_error(track)
    if se == 0.0:
        p_value, half = (0.0 if diff > 0.0 else 1.0), 0.0
    else:
        p_value = float(scipy_stats.t.sf(diff / se, df))
        level = compute_look_level(max_rounds, alpha, track.prior_df)
        half = float(scipy_stats.t.isf(level, df)) * se
    track.min_p, track.last_p = min(track.min_p, p_value), p_value
    track.low, track.high = max(track.low, diff - half), min(track.high, diff + half)


def _looked(track: _Track) -> bool:
    """Whether the row has a look yet: two rounds, or one with a prior."""
    return len(track.head_logs) >= (1 if track.prior is not None else 2)


def _standard_error(track: _Track) -> tuple[float, int]:
    """Of the difference of two means, and its degrees of freedom: the rounds' pooled
    variance (equal rounds on both sides), pooled again with the prior's where there is one."""
    base, head = np.asarray(track.base_logs), np.asarray(track.head_logs)
    squares = float(np.sum((base - base.mean()) ** 2) + np.sum((head - head.mean()) ** 2))
    variance, df = _pooled_variance(squares, len(head), track.prior)
    return math.sqrt(variance * (2.0 / len(head))), df


def _pooled_variance(squares: float, n: int, prior: RunNoisePrior | None) -> tuple[float, int]:
    own_df = 2 * n - 2
    if prior is None:
        return squares / own_df, own_df
    prior_variance = prior.variance
    if n >= GUARD_ROUNDS:
        prior_variance = max(prior_variance, squares / own_df)
    df = prior.df + own_df
    return (prior.df * prior_variance + squares) / df, df


def _p_value(track: _Track, max_rounds: int) -> float:
    return compute_sequential_p(track.min_p, max_rounds, track.prior_df)


# --- the verdict ------------------------------------------------------------------------------


def _verdict(track: _Track, alpha: float, rounds: int, max_rounds: int) -> Verdict:
    row = track.row
    rel: float | None = None
    ci: tuple[float, float] | None = None
    p_value: float | None = None
    method = "none"
    if not track.judged:
        outcome = Outcome.INCONCLUSIVE
        reason = f"inconclusive: {track.shortfall or 'no round measured both sides'}"
    else:
        sign = 1.0 if row.lower_is_better else -1.0
        low, high = sorted((_relative(sign * track.low), _relative(sign * track.high)))
        rel, p_value = math.expm1(sign * track.estimate), _p_value(track, max_rounds)
        outcome, reason = _outcome(track, rel, (low, high), p_value, rounds)
        ci = (low, high) if math.isfinite(low) and math.isfinite(high) and low > -1.0 else None
        first = 1 if track.prior is not None else 2
        noise = ("" if track.prior is None else
                 f", run-to-run noise pooled with {track.prior.runs} earlier runs")
        method = (f"group-sequential t-test over {len(track.head_logs)} round(s) of each run's "
                  f"log {row.statistic}, looks {first}..{max_rounds}{noise}")
    return Verdict(
        outcome=outcome, rel_change=rel, ci=ci, p_value=p_value, statistic=row.statistic,
        lower_is_better=row.lower_is_better, base_value=_pooled(track.base_values, row),
        head_value=_pooled(track.head_values, row), base_count=len(track.base_values),
        head_count=len(track.head_values), base_runs=track.base_runs,
        head_runs=track.head_runs, min_effect=row.min_effect, confidence=1.0 - alpha,
        method=method, reason=reason)


def _outcome(track: _Track, rel: float, ci: tuple[float, float], p_value: float,
             rounds: int) -> tuple[Outcome, str]:
    effect = track.row.min_effect
    interval = f"{rel:+.1%} [{ci[0]:+.1%}, {ci[1]:+.1%}], sequential p={p_value:.3g}"
    when = f" (round {track.decided_round})" if track.decided_round is not None else ""
    if track.status is RowStatus.REGRESSED:
        return Outcome.REGRESSION, (f"worse{when}: {interval}; significant for the gate's family "
                                    f"and at least the minimum effect {effect:.1%}")
    if track.status is RowStatus.NO_REGRESSION:
        better = (rel < 0.0) == track.row.lower_is_better and abs(rel) >= effect
        if better and (ci[1] < 0.0 if track.row.lower_is_better else ci[0] > 0.0):
            return Outcome.IMPROVEMENT, f"better{when}: {interval}; no regression"
        return Outcome.NO_CHANGE, (f"no regression{when}: {interval} rules out a regression "
                                   f"of {effect:.1%}")
    futile = ""
    if _status(track) is RowStatus.FUTILE and track.conditional_power is not None:
        futile = (f"; more rounds would likely not show one (conditional power "
                  f"{track.conditional_power:.0%})")
    return Outcome.INCONCLUSIVE, (f"inconclusive after {rounds} round(s): {interval} neither "
                                  f"shows nor rules out a regression of {effect:.1%}{futile}")


def _relative(log_ratio: float) -> float:
    return math.expm1(log_ratio) if math.isfinite(log_ratio) else (
        math.inf if log_ratio > 0 else -1.0)


def _pooled(values: Sequence[float], row: SequentialRow) -> float | None:
    if not values:
        return None
    if row.statistic == "mean":
        return float(np.mean(values))
    return float(np.quantile(values, QUANTILES[row.statistic]))
