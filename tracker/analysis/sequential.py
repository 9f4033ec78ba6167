"""A sequential comparison over interleaved rounds: look after every round, stop when it is clear.

A *round* is one base run and one head run of the suite, back to back, so drift over time hits
both alike. After each round every row (a workload and metric) gets one paired observation: the
log ratio ``d = log(head statistic / base statistic)`` of that round's runs, signed so that a
positive ``d`` is worse. The run is the unit of replication: the rounds' own spread is the
noise, whatever its source (requests of one run are far from independent: they share batches,
and a whole run drifts), so nothing is assumed about it beyond a normal ``d``.

Two anytime-valid tests per row, valid however often one looks (the scale-invariant sequential
t-test: the likelihood ratio of the t statistic, noncentral against central t, mixed over
effect sizes ``delta = mu / sigma``; Perez-Ortiz, Lardy, de Heide and Grunwald, "E-statistics,
group invariance and anytime valid testing", 2024):

- *regression*: the one-sided e-process against "no worse" (``mu <= 0``); its running maximum
  gives an anytime-valid p-value, and Holm over the family of rows spends one ``alpha`` for the
  whole gate. A row is regressed once Holm rejects it and the estimate is at least its
  ``min_effect``.
- *no regression*: the confidence sequence (the same test inverted, intersected over rounds)
  lies below ``min_effect``: a regression that matters is ruled out.

Both decisions are final. Nothing is decided before the second round (one round has no
spread). The gate is decided at its first regression (more rounds could not take it back) or
once every row that can be judged has ruled one out; it stops at ``max_rounds`` otherwise, the
undecided rows inconclusive. A row whose runs are too small for
its statistic (a p99 of 50 requests) is never judged and never holds the gate.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from scipy import stats as scipy_stats  # type: ignore[import-untyped]
from scipy.special import logsumexp  # type: ignore[import-untyped]

from tracker.analysis.compare import Outcome, Verdict

QUANTILES: dict[str, float] = {"median": 0.5, "p90": 0.9, "p99": 0.99}
STATISTICS = (*QUANTILES, "mean")
MIN_VALUES = 8  # per run, for a per-request statistic
TAIL_VALUES = 2.0  # a quantile q needs this many values beyond it per run: n * (1 - q) >= 2
# the effect sizes mu / sigma the e-process is mixed over, equal weights: from half the rounds'
# spread to 32 times it (a config that halves throughput on a quiet machine)
EFFECT_SIZES = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
MAX_T = 1e6  # rounds that agree exactly: a t statistic this large


class RowStatus(StrEnum):
    REGRESSED = "regressed"
    NO_REGRESSION = "no_regression"
    UNDECIDED = "undecided"


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


RoundSamples = Mapping[str, tuple[Sequence[float], Sequence[float]]]  # key -> (base, head) values


@dataclass(slots=True)
class _Track:
    """What one row has seen: each round's signed log ratio, and its two tests so far."""

    row: SequentialRow
    ratios: list[float] = field(default_factory=list)
    base_values: list[float] = field(default_factory=list)
    head_values: list[float] = field(default_factory=list)
    base_runs: int = 0
    head_runs: int = 0
    shortfall: str | None = None  # why a round did not count
    max_log_e: float = 0.0  # running maximum of the regression e-process (log)
    low: float = -math.inf  # the confidence sequence (log, worse > 0), intersected over rounds
    high: float = math.inf
    status: RowStatus = RowStatus.UNDECIDED
    decided_round: int | None = None

    @property
    def judged(self) -> bool:
        return bool(self.ratios)

    @property
    def estimate(self) -> float:
        return float(np.mean(self.ratios))


class SequentialGate:
    """``observe(round)`` after every round; it answers with the state of the whole family."""

    def __init__(self, rows: Sequence[SequentialRow], *, alpha: float = 0.05,
                 max_rounds: int = 8) -> None:
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
        self.alpha, self.max_rounds = alpha, max_rounds
        self._tracks = [_Track(row) for row in rows]
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
                _add_round(track, pair[0], pair[1], self.alpha)
        self._decide()
        return self.state()

    def state(self) -> SequentialState:
        rows = tuple(RowState(t.row.key, t.status, _verdict(t, self.alpha, self._rounds),
                              t.decided_round) for t in self._tracks)
        judged = [t for t in self._tracks if t.judged]
        regressed = tuple(t.row.key for t in self._tracks if t.status is RowStatus.REGRESSED)
        ruled_out = bool(judged) and all(t.status is RowStatus.NO_REGRESSION for t in judged)
        decided = bool(regressed) or ruled_out
        return SequentialState(self._rounds, self.max_rounds, decided, regressed, rows)

    def _decide(self) -> None:
        judged = [t for t in self._tracks if t.judged]
        rejected = compute_holm([_p_value(t) for t in judged], self.alpha)
        for track, reject in zip(judged, rejected, strict=True):
            if track.status is not RowStatus.UNDECIDED:
                continue
            threshold = math.log1p(track.row.min_effect)
            if reject and track.estimate >= threshold:
                track.status, track.decided_round = RowStatus.REGRESSED, self._rounds
            elif track.high < threshold:
                track.status, track.decided_round = RowStatus.NO_REGRESSION, self._rounds


def compute_holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected with family-wise error <= ``alpha``."""
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    rejected = [False] * len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] > alpha / (len(p_values) - rank):
            break
        rejected[index] = True
    return rejected


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
               alpha: float) -> None:
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
    track.ratios.append(sign * (h - b))
    n = len(track.ratios)
    if n < 2:
        return
    mean, sd = track.estimate, float(np.std(track.ratios, ddof=1))
    track.max_log_e = max(track.max_log_e, compute_log_e_value(_t(mean, sd, n), n))
    half = compute_boundary(n, alpha) * sd / math.sqrt(n)
    track.low, track.high = max(track.low, mean - half), min(track.high, mean + half)


def _t(mean: float, sd: float, n: int) -> float:
    if sd == 0.0:
        return 0.0 if mean == 0.0 else math.copysign(MAX_T, mean)
    return max(-MAX_T, min(MAX_T, math.sqrt(n) * mean / sd))


def compute_log_e_value(t: float, n: int) -> float:
    """log of the sequential t-test's e-value against ``mu <= 0`` after ``n >= 2`` rounds: the
    noncentral-t likelihood ratio of the t statistic, averaged over ``EFFECT_SIZES``."""
    sizes = np.asarray(EFFECT_SIZES)
    ratios = (scipy_stats.nct.logpdf(t, n - 1, sizes * math.sqrt(n))
              - scipy_stats.t.logpdf(t, n - 1))
    return float(logsumexp(ratios) - math.log(len(sizes)))


@functools.cache
def compute_boundary(n: int, alpha: float) -> float:
    """The t at which the e-value reaches ``1 / alpha`` after ``n`` rounds: each end of the
    confidence sequence is ``mean -+ t * sd / sqrt(n)``, where a one-sided test of that value
    would just reject. The e-value grows with t; found by bisection (infinite if never)."""
    target = math.log(1.0 / alpha)
    if compute_log_e_value(MAX_T, n) < target:
        return math.inf
    low, high = 0.0, 1.0
    while compute_log_e_value(high, n) < target:
        high *= 2.0
    for _ in range(60):
        middle = (low + high) / 2.0
        if compute_log_e_value(middle, n) < target:
            low = middle
        else:
            high = middle
    return high


def _p_value(track: _Track) -> float:
    return min(1.0, math.exp(-track.max_log_e))


# --- the verdict ------------------------------------------------------------------------------


def _verdict(track: _Track, alpha: float, rounds: int) -> Verdict:
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
        rel, p_value = math.expm1(sign * track.estimate), _p_value(track)
        outcome, reason = _outcome(track, rel, (low, high), p_value, rounds)
        ci = (low, high) if math.isfinite(low) and math.isfinite(high) and low > -1.0 else None
        method = (f"sequential t-test over {len(track.ratios)} paired round(s) of each run's "
                  f"{row.statistic} (log ratio)")
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
    interval = f"{rel:+.1%} [{ci[0]:+.1%}, {ci[1]:+.1%}], anytime p={p_value:.3g}"
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
    return Outcome.INCONCLUSIVE, (f"inconclusive after {rounds} round(s): {interval} neither "
                                  f"shows nor rules out a regression of {effect:.1%}")


def _relative(log_ratio: float) -> float:
    return math.expm1(log_ratio) if math.isfinite(log_ratio) else (
        math.inf if log_ratio > 0 else -1.0)


def _pooled(values: Sequence[float], row: SequentialRow) -> float | None:
    if not values:
        return None
    if row.statistic == "mean":
        return float(np.mean(values))
    return float(np.quantile(values, QUANTILES[row.statistic]))
