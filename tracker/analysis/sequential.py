"""A sequential comparison over interleaved rounds: look after every round, stop when it is clear.

A *round* is one base run and one head run of the suite, back to back, so drift over time hits
both alike. After each round every row (a workload and metric) gets one paired observation: the
log ratio ``d = log(head statistic / base statistic)`` of that round's runs, signed so that a
positive ``d`` is worse, with its within-run sampling variance (from the order statistics around
the quantile, or the variance of the mean; none for a value measured once per run) plus the
run-to-run drift of a pair of runs: ``2 * max(run_drift, drift estimated from the rounds so
far)**2``. The rounds are weighed by the inverse of that variance: ``S = sum(d / v)``,
``I = sum(1 / v)``, the estimate ``S / I``.

Two anytime-valid tests per row (normal mixtures, Robbins's mixture SPRT; valid however often
one looks, as long as the variance model holds):

- *regression*: the one-sided mixture e-process against "no worse" (``mu <= 0``); its running
  maximum gives an anytime-valid p-value, and Holm over the family of rows spends one ``alpha``
  for the whole gate. A row is regressed once Holm rejects it and the estimate is at least its
  ``min_effect``.
- *no regression*: the mirrored e-process against "worse by at least ``min_effect``"; once it
  passes ``1 / alpha`` the confidence sequence excludes a regression that matters.

Both decisions are final. The gate is decided when every row that can be judged is decided; it
stops at ``max_rounds`` otherwise, the undecided rows inconclusive. A row whose runs are too
small for its statistic (a p99 of 50 requests) is never judged and never holds the gate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from scipy.special import log_ndtr  # type: ignore[import-untyped]

from tracker.analysis.compare import Outcome, Verdict

QUANTILES: dict[str, float] = {"median": 0.5, "p90": 0.9, "p99": 0.99}
STATISTICS = (*QUANTILES, "mean")
MIN_VALUES = 8  # per run, for a per-request statistic
TAIL_VALUES = 2.0  # a quantile q needs this many values beyond it per run: n * (1 - q) >= 2
DRIFT_ROUNDS = 3  # rounds before the drift is estimated from the data
MIXTURE_SCALE = 2.0  # the mixtures' spread, in units of the row's minimum effect (log)
MIN_SCALE = 0.01


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
    decided: bool  # every row that can be judged is decided
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
    """What one row has seen: each round's signed log ratio and within-run variance."""

    row: SequentialRow
    ratios: list[float] = field(default_factory=list)
    within: list[float] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)  # 1 / v of each round, as used then
    base_values: list[float] = field(default_factory=list)
    head_values: list[float] = field(default_factory=list)
    base_runs: int = 0
    head_runs: int = 0
    shortfall: str | None = None  # why no round counted yet
    max_log_e: float = 0.0  # running maximum of the regression e-process (log)
    low: float = -math.inf  # the confidence sequence (log, worse > 0), intersected over rounds
    high: float = math.inf
    status: RowStatus = RowStatus.UNDECIDED
    decided_round: int | None = None

    @property
    def judged(self) -> bool:
        return bool(self.ratios)

    @property
    def sums(self) -> tuple[float, float]:
        s = sum(d * w for d, w in zip(self.ratios, self.weights, strict=True))
        return s, sum(self.weights)


class SequentialGate:
    """``observe(round)`` after every round; it answers with the state of the whole family."""

    def __init__(self, rows: Sequence[SequentialRow], *, alpha: float = 0.05,
                 max_rounds: int = 8, run_drift: float = 0.01) -> None:
        if not 0.0 < alpha < 0.5:
            raise ValueError(f"alpha must be between 0 and 0.5 (got {alpha})")
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1 (got {max_rounds})")
        if run_drift < 0.0:
            raise ValueError(f"run_drift must be >= 0 (got {run_drift})")
        keys = [row.key for row in rows]
        if len(set(keys)) != len(keys):
            raise ValueError("row keys must be unique")
        for row in rows:
            if row.statistic not in STATISTICS or row.min_effect < 0.0:
                raise ValueError(f"{row.key}: statistic must be one of {', '.join(STATISTICS)} "
                                 f"and min_effect >= 0 (got {row.statistic!r}, {row.min_effect})")
        self.alpha, self.max_rounds, self.run_drift = alpha, max_rounds, run_drift
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
                _add_round(track, pair[0], pair[1], self.run_drift, self.alpha)
        self._decide()
        return self.state()

    def state(self) -> SequentialState:
        rows = tuple(RowState(t.row.key, t.status, _verdict(t, self.alpha, self._rounds),
                              t.decided_round) for t in self._tracks)
        judged = [t for t in self._tracks if t.judged]
        decided = bool(judged) and all(t.status is not RowStatus.UNDECIDED for t in judged)
        regressed = tuple(t.row.key for t in self._tracks if t.status is RowStatus.REGRESSED)
        return SequentialState(self._rounds, self.max_rounds, decided, regressed, rows)

    def _decide(self) -> None:
        judged = [t for t in self._tracks if t.judged]
        rejected = compute_holm([_p_value(t) for t in judged], self.alpha)
        for track, reject in zip(judged, rejected, strict=True):
            if track.status is not RowStatus.UNDECIDED:
                continue
            s, information = track.sums
            threshold = math.log1p(track.row.min_effect)
            if reject and s / information >= threshold:
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


def compute_log_statistic(values: Sequence[float], statistic: str) -> tuple[float, float] | str:
    """The log of a run's statistic and its sampling variance, or why it cannot be had."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if not np.all(np.isfinite(x)) or x[0] <= 0.0:
        return "values must be finite and > 0 for a ratio"
    if n == 1:
        return math.log(float(x[0])), 0.0  # a value measured once per run: drift is its noise
    if statistic == "mean":
        mean = float(x.mean())
        return math.log(mean), float(x.var(ddof=1)) / n / mean**2
    q = QUANTILES[statistic]
    needed = max(MIN_VALUES, math.ceil(TAIL_VALUES / (1.0 - q) - 1e-9))
    if n < needed:
        return f"{statistic} needs >= {needed} values per run (got {n})"
    point = float(np.quantile(x, q))
    sd = math.sqrt(n * q * (1.0 - q))  # of the rank of the sample quantile
    low, high = max(0, math.floor(n * q - sd) - 1), min(n - 1, math.ceil(n * q + sd) - 1)
    span = (high - low) / sd
    se = (math.log(float(x[high])) - math.log(float(x[low]))) / span if span > 0 else 0.0
    return math.log(point), se * se


def _add_round(track: _Track, base: Sequence[float], head: Sequence[float],
               run_drift: float, alpha: float) -> None:
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
    drift = max(run_drift, _estimated_drift(track))
    variance = b[1] + h[1] + 2.0 * drift * drift
    track.ratios.append(sign * (h[0] - b[0]))
    track.within.append(b[1] + h[1])
    track.weights.append(1.0 / max(variance, 1e-12))
    s, information = track.sums
    scale = _scale(track.row)
    track.max_log_e = max(track.max_log_e, compute_log_e_value(s, information, scale))
    half = compute_boundary(information, scale, alpha) / information
    track.low = max(track.low, s / information - half)
    track.high = min(track.high, s / information + half)


def _estimated_drift(track: _Track) -> float:
    """The run-to-run drift of one run that the rounds' spread shows beyond their sampling
    variance (method of moments; 0 before ``DRIFT_ROUNDS`` rounds)."""
    if len(track.ratios) < DRIFT_ROUNDS:
        return 0.0
    spread = float(np.var(track.ratios, ddof=1))
    return math.sqrt(max(0.0, (spread - float(np.mean(track.within))) / 2.0))


def _scale(row: SequentialRow) -> float:
    return MIXTURE_SCALE * max(math.log1p(row.min_effect), MIN_SCALE)


def compute_log_e_value(s: float, information: float, scale: float) -> float:
    """log of the one-sided normal-mixture e-process against ``mu <= 0``: the likelihood ratio
    ``exp(mu * S - mu**2 * I / 2)`` averaged over a half-normal ``mu`` of the given scale,
    ``2 Phi(S / sqrt(a)) exp(S**2 / 2a) / sqrt(1 + scale**2 I)`` with ``a = I + 1 / scale**2``."""
    a = information + 1.0 / (scale * scale)
    return float(math.log(2.0) + log_ndtr(s / math.sqrt(a)) + s * s / (2.0 * a)
                 - 0.5 * math.log1p(scale * scale * information))


def compute_boundary(information: float, scale: float, alpha: float) -> float:
    """The ``x`` at which ``compute_log_e_value(x, information, scale)`` reaches
    ``log(1 / alpha)``: each end of the confidence sequence is ``(S -+ x) / I``, where a one-sided
    test of that value would just reject. The e-value grows with ``x``; found by bisection."""
    target = math.log(1.0 / alpha)
    low, high = 0.0, 1.0
    while compute_log_e_value(high, information, scale) < target:
        high *= 2.0
    for _ in range(60):
        middle = (low + high) / 2.0
        if compute_log_e_value(middle, information, scale) < target:
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
        s, information = track.sums
        low, high = sorted((math.expm1(sign * track.low), math.expm1(sign * track.high)))
        rel, ci, p_value = math.expm1(sign * s / information), (low, high), _p_value(track)
        outcome, reason = _outcome(track, rel, ci, p_value, rounds)
        method = (f"sequential mixture test over {len(track.ratios)} paired round(s) of each "
                  f"run's {row.statistic} (log ratio)")
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


def _pooled(values: Sequence[float], row: SequentialRow) -> float | None:
    if not values:
        return None
    if row.statistic == "mean":
        return float(np.mean(values))
    return float(np.quantile(values, QUANTILES[row.statistic]))
