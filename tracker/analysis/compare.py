"""Run-vs-run comparison: is head worse than base, better, the same, or can we not tell yet?

``compare_samples`` judges one metric of the registry (``tracker.metrics``). The metric's
direction says which way is worse, and its statistic says what is compared. It takes
per-request samples of one run per side, or repeated runs (a list of runs, each a list of
per-request values, with one value per run for run-level metrics such as throughput). Every
request is judged (numpy/SciPy, ``tracker.analysis.stats``). Positive values are compared on the
log scale, so a shift is a ratio. It picks a calibrated method for what it was given:

- One run per side, ``statistic="median"``: the efficient-score rank test (kernel scores of the
  pooled values: exact level for any distribution, near-optimal power for the data's own shape,
  bimodal cache hits included), with the one-step shift estimate and its interval. Below 200
  values per side it is Mann-Whitney U with Hodges-Lehmann.
- One run per side, ``p99``: the tail itself, by the exceedance test
  (``tracker.analysis.exceedances``, which counts how many values of each side exceed the pooled
  p95 to p98 and by how much, a permutation test with exact level for any distribution), with
  the Harrell-Davis estimate of the p99's change and the test inverted there for its interval.
- One run per side, ``p90`` (and a p99 whose top is too thin): Harrell-Davis quantiles (every
  order statistic weighted) with jackknife standard errors, studentised on as many degrees of
  freedom as there are values beyond the quantile. For ``mean`` it is Welch's t on the log of
  the means' ratio.
- Repeated runs (more than one on a side), and one value per run (throughput): Student's t on
  the log of each run's statistic, pooled variance, ``runs - 2`` degrees of freedom. The run is
  the unit of replication: run-to-run drift counts as noise instead of faking significance, and
  with few runs the interval is honestly wide.

Each direction is a one-sided test at ``alpha = 1 - confidence``. ``Verdict.p_value`` is the one
in the metric's bad direction (what ``tracker.analysis.holm.judge_family`` spends a gate's
budget on). There are four outcomes. The verdict is a ``regression`` or an ``improvement`` when
the change is significant in that direction *and* its estimate is at least ``min_effect``
(relative). It is ``no_change`` when the interval (each end a one-sided bound at
``confidence``: two one-sided tests) lies within ``±min_effect``, or when the change is
significant but smaller. Otherwise it is ``inconclusive``, with ``runs_needed``: about how many
runs per side would decide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from tracker.analysis.exceedances import tail_shift_test
from tracker.analysis.noise import QUANTILES, STATISTICS, compute_statistic
from tracker.analysis.stats import (
    Runs,
    ShiftTest,
    mean_ratio_test,
    score_rank_test,
    student_t_one_sided,
    student_t_quantile,
)
from tracker.metrics import Metric


class Outcome(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_CHANGE = "no_change"
    INCONCLUSIVE = "inconclusive"


DEFAULT_MIN_EFFECT: dict[str, float] = {"median": 0.02, "mean": 0.02, "p90": 0.03, "p99": 0.05}
MIN_SAMPLES_MEDIAN = 8
TAIL_SAMPLES = 5  # a quantile q needs about this many values beyond it: n >= 5 / (1 - q)
MAX_RUNS_HINT = 1000


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judgement on one metric. Changes are relative: ``head / base - 1``."""

    outcome: Outcome
    rel_change: float | None  # point estimate; None when nothing could be estimated
    ci: tuple[float, float] | None  # of rel_change: each end a one-sided bound at ``confidence``
    # one-sided: of "head is no worse than base", in the metric's bad direction (small: worse);
    # what a family of verdicts is judged on (``tracker.analysis.holm``). None: not estimated
    p_value: float | None
    statistic: str  # median | p90 | p99 | mean (of per-request values, or over runs)
    lower_is_better: bool
    base_value: float | None  # the statistic on all base values pooled
    head_value: float | None
    base_count: int  # values per side
    head_count: int
    base_runs: int
    head_runs: int
    min_effect: float
    confidence: float
    method: str
    reason: str  # one line: why this outcome
    runs_needed: int | None = None  # runs per side that would likely decide an inconclusive one

    @property
    def regressed(self) -> bool:
        return self.outcome is Outcome.REGRESSION

    @property
    def improved(self) -> bool:
        return self.outcome is Outcome.IMPROVEMENT


@dataclass(frozen=True, slots=True)
class _Estimate:
    rel_change: float
    low: float  # one-sided lower bound at ``confidence``
    high: float  # one-sided upper bound at ``confidence``
    p_up: float  # one-sided p-value of "head is not higher than base"
    p_down: float  # one-sided p-value of "head is not lower than base"
    method: str


@dataclass(frozen=True, slots=True)
class _Request:
    base: list[list[float]]
    head: list[list[float]]
    lower_is_better: bool
    statistic: str
    min_effect: float
    confidence: float

    @property
    def base_count(self) -> int:
        return sum(len(run) for run in self.base)

    @property
    def head_count(self) -> int:
        return sum(len(run) for run in self.head)

    @property
    def run_level(self) -> bool:
        return all(len(run) == 1 for run in (*self.base, *self.head))


Samples = Sequence[float] | Sequence[Sequence[float]]


def compare_samples(
    base: Samples,
    head: Samples,
    metric: Metric,
    *,
    statistic: str | None = None,
    min_effect: float | None = None,
    confidence: float = 0.95,
    resamples: int = 1000,
    seed: int = 0,
) -> Verdict:
    """Compare ``head`` with ``base`` on ``metric``. Each is a list of per-request values (one
    run) or a list of runs (each a list of values). The metric's direction says which way is a
    regression, and ``statistic`` (default: the metric's own) says what is compared.
    ``resamples`` and ``seed`` are accepted for callers of the bootstrap this replaced: every
    method is now deterministic and resamples nothing."""
    statistic = metric.statistic if statistic is None else statistic
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)} (got {statistic!r})")
    if not 0.5 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0.5 and 1 (got {confidence})")
    effect = DEFAULT_MIN_EFFECT[statistic] if min_effect is None else min_effect
    if effect < 0.0:
        raise ValueError(f"min_effect must be >= 0 (got {effect})")
    request = _Request(_as_runs(base, "base"), _as_runs(head, "head"), metric.lower_is_better,
                       statistic, effect, confidence)
    shortfall = _sample_shortfall(request)
    if shortfall is not None:
        return _verdict(request, None, Outcome.INCONCLUSIVE, shortfall[0], shortfall[1])
    estimate = _estimate(_rescaled(request))
    if estimate is None:
        return _verdict(request, None, Outcome.INCONCLUSIVE,
                        "the base statistic is 0, so a relative change is undefined", None)
    return _decide(request, estimate)


RESCALE_BEYOND = 1e150  # values this large (or this small) are brought to about 1 first


def _rescaled(request: _Request) -> _Request:
    """The request with both sides multiplied by one power of two (exact) so the largest value
    is about 1, where it is beyond ``RESCALE_BEYOND`` or below its inverse: every estimate is
    relative, and a variance of values near the float limit would overflow."""
    largest = max(max(max(run), -min(run)) for run in (*request.base, *request.head))
    if largest == 0.0 or 1.0 / RESCALE_BEYOND <= largest <= RESCALE_BEYOND:
        return request
    factor = math.ldexp(1.0, -math.frexp(largest)[1])
    return replace(request, base=[[v * factor for v in run] for run in request.base],
                   head=[[v * factor for v in run] for run in request.head])


def _as_runs(samples: Samples, side: str) -> list[list[float]]:
    if all(isinstance(item, int | float) for item in samples):
        runs = [[float(v) for v in samples]]  # type: ignore[arg-type]
    else:
        runs = [[float(v) for v in run] for run in samples]  # type: ignore[union-attr]
    for run in runs:
        if any(not math.isfinite(v) for v in run):
            raise ValueError(f"{side}: samples must be finite numbers (drop unmeasured values)")
    return [run for run in runs if run]


def _sample_shortfall(request: _Request) -> tuple[str, int | None] | None:
    """Why there are too few samples to judge, and the runs per side that would be enough."""
    if not request.base or not request.head:
        return "no values on one side", None
    if request.run_level:
        if len(request.base) + len(request.head) < 3:
            return "one value per run: needs 3 runs in all (2 on a side) to estimate noise", 2
        return None
    fewest = min(request.base_count, request.head_count)
    q = QUANTILES.get(request.statistic, 0.5)
    needed = max(MIN_SAMPLES_MEDIAN, math.ceil(TAIL_SAMPLES / (1.0 - q) - 1e-9))
    if fewest >= needed:
        return None
    per_run = max(1, fewest // max(1, min(len(request.base), len(request.head))))
    reason = f"{request.statistic} needs >= {needed} values per side (got {fewest})"
    return reason, min(MAX_RUNS_HINT, math.ceil(needed / per_run))


# --- estimation ------------------------------------------------------------------------------


def _positive(request: _Request) -> bool:
    return all(v > 0.0 for run in (*request.base, *request.head) for v in run)


def _estimate(request: _Request) -> _Estimate | None:
    if len(request.base) == 1 and len(request.head) == 1 and not request.run_level:
        return _single_runs(request)
    return _t_over_runs(request)


def _t_over_runs(request: _Request) -> _Estimate | None:
    """Student's t on the runs' statistics (pooled variance, df = runs - 2): the runs are the
    replicates, so run-to-run drift counts as noise and few runs mean a wide interval."""
    base = [compute_statistic(run, request.statistic) for run in request.base]
    head = [compute_statistic(run, request.statistic) for run in request.head]
    log = all(v > 0.0 for v in (*base, *head))
    base_mean = sum(base) / len(base)
    if not log and base_mean == 0.0:
        return None
    xs = [math.log(v) for v in base] if log else [v / abs(base_mean) for v in base]
    ys = [math.log(v) for v in head] if log else [v / abs(base_mean) for v in head]
    diff = _mean(ys) - _mean(xs)
    df = len(xs) + len(ys) - 2
    squares = sum((v - _mean(xs)) ** 2 for v in xs) + sum((v - _mean(ys)) ** 2 for v in ys)
    se = math.sqrt(squares / df * (1.0 / len(xs) + 1.0 / len(ys)))
    if se == 0.0:
        p_up, p_down, half = (0.0 if diff > 0.0 else 1.0), (0.0 if diff < 0.0 else 1.0), 0.0
    else:
        p_up, p_down = student_t_one_sided(diff / se, df)
        half = student_t_quantile(request.confidence, df) * se
    return _Estimate(_relative(diff, log), _relative(diff - half, log),
                     _relative(diff + half, log), p_up, p_down,
                     f"t-test over runs of each run's {request.statistic}"
                     + (" (log)" if log else ""))


def _single_runs(request: _Request) -> _Estimate | None:
    """One run per side: every request is a replicate. Positive values are compared on the log
    scale (a shift there is a ratio), and others are scaled by the base statistic."""
    base, head = request.base[0], request.head[0]
    log = _positive(request)
    if log:
        xs, ys = [math.log(v) for v in base], [math.log(v) for v in head]
    else:
        scale = abs(_pooled(request.base, request.statistic) or 0.0)
        if scale == 0.0:
            return None
        xs, ys = [v / scale for v in base], [v / scale for v in head]
    q = QUANTILES.get(request.statistic)
    if request.statistic == "median":
        test = score_rank_test(xs, ys, request.confidence)
    elif q is not None:
        test = tail_shift_test(xs, ys, q, request.confidence)
    else:
        test = mean_ratio_test(base, head, request.confidence, log)
        if not log:
            test = ShiftTest(test.shift / scale, test.low / scale, test.high / scale,
                             test.p_up, test.p_down, test.method)
    return _Estimate(_relative(test.shift, log), _relative(test.low, log),
                     _relative(test.high, log), test.p_up, test.p_down,
                     test.method + (" (log)" if log else ""))


def _relative(value: float, log: bool) -> float:
    """A difference of log values (or of values scaled by the base) as a relative change."""
    return math.expm1(value) if log else value


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


# --- the decision ----------------------------------------------------------------------------


def _decide(request: _Request, estimate: _Estimate) -> Verdict:
    """Each direction is a one-sided test at ``1 - confidence``. It is a regression when head is
    significantly worse and the estimate is at least ``min_effect``, and no change when the
    interval (each end a one-sided bound at ``confidence``: two one-sided tests) lies within
    ``±min_effect``."""
    alpha = 1.0 - request.confidence
    effect = request.min_effect
    rel, low, high = estimate.rel_change, estimate.low, estimate.high
    p_worse, p_better = _directed(request, estimate)
    worse = rel > 0.0 if request.lower_is_better else rel < 0.0
    interval = (f"{rel:+.1%} [{low:+.1%}, {high:+.1%}], p(worse)={p_worse:.3g}")
    significant = (p_worse if worse else p_better) < alpha
    if significant and abs(rel) >= effect:
        outcome = Outcome.REGRESSION if worse else Outcome.IMPROVEMENT
        word = "worse" if worse else "better"
        reason = f"{word}: {interval}; significant and at least the minimum effect {effect:.1%}"
        return _verdict(request, estimate, outcome, reason, None)
    if -effect < low and high < effect:
        reason = f"no change: {interval} lies within ±{effect:.1%}"
        return _verdict(request, estimate, Outcome.NO_CHANGE, reason, None)
    if significant:
        reason = f"no change that matters: {interval} is below the minimum effect {effect:.1%}"
        return _verdict(request, estimate, Outcome.NO_CHANGE, reason, None)
    runs = _runs_needed(request, estimate)
    reason = (f"inconclusive: {interval} is neither significant nor within ±{effect:.1%}; "
              f"about {runs} runs per side would decide")
    return _verdict(request, estimate, Outcome.INCONCLUSIVE, reason, runs)


def _directed(request: _Request, estimate: _Estimate) -> tuple[float, float]:
    """The one-sided p-values of "head is worse" and "head is better" in the metric's terms."""
    if request.lower_is_better:
        return estimate.p_up, estimate.p_down
    return estimate.p_down, estimate.p_up


def _runs_needed(request: _Request, estimate: _Estimate) -> int:
    """Runs per side for the interval to shrink enough to decide (it narrows as 1/sqrt(n))."""
    half = (estimate.high - estimate.low) / 2.0
    distance = abs(estimate.rel_change)
    target = request.min_effect - distance if distance < request.min_effect else distance
    target = max(target, request.min_effect / 4.0, 1e-9)
    runs = max(len(request.base), len(request.head))
    needed = math.ceil(runs * (half / target) ** 2)
    return min(MAX_RUNS_HINT, max(runs + 1, needed))


def _verdict(request: _Request, estimate: _Estimate | None, outcome: Outcome, reason: str,
             runs_needed: int | None) -> Verdict:
    return Verdict(
        outcome=outcome,
        rel_change=None if estimate is None else estimate.rel_change,
        ci=None if estimate is None else (estimate.low, estimate.high),
        p_value=None if estimate is None else _directed(request, estimate)[0],
        statistic=request.statistic,
        lower_is_better=request.lower_is_better,
        base_value=_pooled(request.base, request.statistic),
        head_value=_pooled(request.head, request.statistic),
        base_count=request.base_count,
        head_count=request.head_count,
        base_runs=len(request.base),
        head_runs=len(request.head),
        min_effect=request.min_effect,
        confidence=request.confidence,
        method="none" if estimate is None else estimate.method,
        reason=reason,
        runs_needed=runs_needed,
    )


def _pooled(runs: Runs, statistic: str) -> float | None:
    values = [v for run in runs for v in run]
    return compute_statistic(values, statistic) if values else None
