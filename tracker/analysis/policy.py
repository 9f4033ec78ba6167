"""The one comparison policy: how a head is judged against a base, wherever the tracker compares.

The gate (its sequential rounds, a fixed design, stored runs), the dashboard's Compare (two runs,
or two config versions with all their runs), the watch's records and the bisection's probes all
judge here, by the same rules:

1. **The run is the unit of replication.** Each run gives one value per row: the log of its
   statistic (``tracker.analysis.noise``). Request-level sampling alone never makes a verdict:
   two runs of one config differ by more than their requests say (GuideLLM measured run-to-run
   spread 1.8 to 3.2 times what one run's spread implies).
2. **The noise** is the runs' own spread, pooled with the history's prior (earlier runs of the
   base config version) where there is one. For a quantile a run cannot resolve (the p99 of
   16 requests), it is never below the spread of the runs' top values
   (``compute_sampling_variance``: two runs a side whose largest values agree by chance are not
   precision). With one run a side and no history, the request-level test's interval is widened
   by ``RUN_NOISE_FACTOR``, the upper end of that measurement, so only a change far beyond one
   run's sampling decides. A one-value-per-run metric (throughput) then has no noise estimate
   at all and stays inconclusive.
3. **The client's timing error** (``tracker.analysis.timing``): a client-bound run carries a
   bound, and every claim must hold for any value within it. A regression that survives it is
   decided. One that only the bound stands in the way of is *within the timing error*: not a
   pass, but "could not measure".
4. **One false-alarm budget per comparison**: Holm's step-down over every row's two one-sided
   p-values ("worse" and "better") spends ``alpha`` on all claims of a change together. Each
   row's interval is given at the level its outcome was decided at (its Holm level when
   rejected, otherwise ``alpha / (hypotheses - rejected)``), so an outcome never contradicts
   its interval: a regression's interval lies above no change, an undecided row's interval holds
   it. Each row has one effect size, the unadjusted estimate. The bound only widens the interval.

The evidence of a row is a sequence of *looks* (``Look``): one for a fixed comparison, one per
round for the sequential gate (``tracker.analysis.sequential``), whose p-value and levels come
from the null law of repeated looks (``tracker.analysis.sequential_null``). Pure: no I/O.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as scipy_stats  # type: ignore[import-untyped]

from tracker.analysis.compare import Outcome, Verdict, compare_samples
from tracker.analysis.holm import HolmLevels, compute_holm_levels
from tracker.analysis.noise import (
    RunNoisePrior,
    compute_log_statistic,
    compute_pooled_variance,
    compute_sampling_variance,
    compute_statistic,
    describe_run_statistic,
)
from tracker.analysis.sequential_null import compute_look_level, compute_sequential_p
from tracker.analysis.timing import NO_TIMING_ERROR, TimingBound
from tracker.metrics import Metric

RUN_NOISE_FACTOR = 3.2  # one run a side, no history: the request-level spread times this
FALLBACK_CONFIDENCE = 0.95  # the request-level interval the fallback reads its spread from
MAX_RUNS_HINT = 1000


@dataclass(frozen=True, slots=True)
class RunSample:
    """One run's values of one metric (per request, or the run's one value) and the bound the
    client's timing error puts on them."""

    values: tuple[float, ...]
    timing: TimingBound = NO_TIMING_ERROR
    lag_s: float = 0.0  # the client's loop lag when it was client-bound (for the report)


@dataclass(frozen=True, slots=True)
class RunStatistic:
    """A run's log statistic and how far the client's timing error may put it off: the true
    log value lies in ``[log - down, log + up]``."""

    log: float
    down: float = 0.0
    up: float = 0.0
    sampling: float = 0.0  # the variance of ``log`` from the run's own top values (a p99 of 16)


def compute_run_statistic(sample: RunSample, statistic: str) -> RunStatistic | str:
    """The run's statistic with its timing range, or why it cannot be had."""
    found = compute_log_statistic(sample.values, statistic)
    if isinstance(found, str):
        return found
    down, up = sample.timing.compute_log_range(math.exp(found))
    return RunStatistic(found, down, up, compute_sampling_variance(sample.values, statistic))


@dataclass(frozen=True, slots=True)
class Look:
    """One look at a row: the change over the runs so far, on the log scale and signed so that
    worse is positive, with its standard error and how much of it the client's timing error may
    explain. By ``bias_worse`` a worse change could be this much smaller, and by ``bias_better``
    the truth could be this much worse than seen."""

    diff: float
    se: float
    df: float  # of the t; math.inf: the normal
    bias_worse: float = 0.0
    bias_better: float = 0.0

    def compute_p_worse(self, *, with_bias: bool = True) -> float:
        """One-sided p-value of "head is no worse" (small: worse)."""
        return _upper_tail(self.diff - (self.bias_worse if with_bias else 0.0), self)

    def compute_p_better(self, *, with_bias: bool = True) -> float:
        """One-sided p-value of "head is no better" (small: better)."""
        return _upper_tail(-self.diff - (self.bias_better if with_bias else 0.0), self)

    def compute_bounds(self, level: float) -> tuple[float, float]:
        """Each end a one-sided bound at ``1 - level``, the timing bound included."""
        half = 0.0 if self.se == 0.0 else self._quantile(level) * self.se
        return self.diff - self.bias_worse - half, self.diff + self.bias_better + half

    def _quantile(self, level: float) -> float:
        if math.isinf(self.df):
            return float(scipy_stats.norm.isf(level))
        return float(scipy_stats.t.isf(level, self.df))


def _upper_tail(shift: float, look: Look) -> float:
    if math.isnan(shift) or shift == -math.inf:
        return 1.0
    if look.se == 0.0:
        return 0.0 if shift > 0.0 else 1.0
    z = shift / look.se
    return float(scipy_stats.norm.sf(z) if math.isinf(look.df) else scipy_stats.t.sf(z, look.df))


def compute_look(base: Sequence[RunStatistic], head: Sequence[RunStatistic],
                 lower_is_better: bool, prior: RunNoisePrior | None) -> Look | None:
    """The two-sample t of the runs' log statistics (pooled variance, with the prior where there
    is one, at least the runs' mean sampling variance where a run cannot resolve its quantile),
    signed so that worse is positive, or None without any noise estimate."""
    if not base or not head:
        return None
    sign = 1.0 if lower_is_better else -1.0
    xs = np.array([s.log for s in base])
    ys = np.array([s.log for s in head])
    own_df = len(xs) + len(ys) - 2
    squares = float(np.sum((xs - xs.mean()) ** 2) + np.sum((ys - ys.mean()) ** 2))
    variance, df = compute_pooled_variance(squares, own_df, min(len(xs), len(ys)), prior)
    if df < 1:
        return None
    variance = max(variance, _mean([s.sampling for s in (*base, *head)]))
    se = math.sqrt(variance * (1.0 / len(xs) + 1.0 / len(ys)))
    worse, better = _biases(base, head, lower_is_better)
    return Look(sign * float(ys.mean() - xs.mean()), se, float(df), worse, better)


def _biases(base: Sequence[RunStatistic], head: Sequence[RunStatistic],
            lower_is_better: bool) -> tuple[float, float]:
    """How much of a worse change, and of a better one, the sides' timing ranges may explain."""
    head_down, head_up = _mean([s.down for s in head]), _mean([s.up for s in head])
    base_down, base_up = _mean([s.down for s in base]), _mean([s.up for s in base])
    if lower_is_better:
        return head_down + base_up, head_up + base_down
    return head_up + base_down, head_down + base_up


def _mean(values: Sequence[float]) -> float:
    if any(math.isinf(v) for v in values):
        return math.inf
    return sum(values) / len(values) if values else 0.0


# --- a row's evidence ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowEvidence:
    """Everything a row's verdict rests on. With ``max_rounds`` None it is one fixed look.
    Otherwise it is the sequential gate's looks, calibrated for up to ``max_rounds`` rounds
    (``prior_df`` is its prior's degrees of freedom)."""

    key: str
    statistic: str
    lower_is_better: bool
    min_effect: float
    looks: tuple[Look, ...]
    base_value: float | None = None  # the statistic on all values of a side pooled
    head_value: float | None = None
    base_count: int = 0
    head_count: int = 0
    base_runs: int = 0
    head_runs: int = 0
    method: str = "none"
    shortfall: str | None = None  # why nothing could be judged
    max_rounds: int | None = None
    prior_df: int = 0
    lag_s: float = 0.0  # the largest client lag behind a timing bound, 0: none
    observed: float | None = None  # the signed log change seen without a look (no noise yet)
    decided_round: int | None = None  # sequential: the round that decided it
    conditional_power: float | None = None  # sequential, futile: of showing one by the end

    @property
    def judged(self) -> bool:
        return bool(self.looks)

    @property
    def threshold(self) -> float:
        return math.log1p(self.min_effect)

    def compute_p_worse(self, *, with_bias: bool = True) -> float:
        """Sequential: a look shows a regression only once the next look shows it too (the
        larger p of two looks in a row), or alone at the last round, so one unlucky round on a
        busy host never fails the gate by itself. Each such p is at least its look's own, so
        the calibration of the smallest look stays valid (it only grows more careful)."""
        ps = [look.compute_p_worse(with_bias=with_bias) for look in self.looks]
        if self.max_rounds is None:
            return min(ps)
        confirmed = [max(pair) for pair in itertools.pairwise(ps)]
        if len(ps) >= self.max_rounds - (0 if self.prior_df else 1):
            confirmed.append(ps[-1])
        return self._calibrated(min(confirmed, default=1.0))

    def compute_p_better(self, *, with_bias: bool = True) -> float:
        smallest = min(look.compute_p_better(with_bias=with_bias) for look in self.looks)
        return self._calibrated(smallest)

    def compute_interval(self, level: float) -> tuple[float, float]:
        """The confidence sequence at ``1 - level``: every look's bounds at the per-look level
        that keeps all looks at ``level``, intersected."""
        per_look = level if self.max_rounds is None else compute_look_level(
            self.max_rounds, level, self.prior_df)
        low, high = -math.inf, math.inf
        spread = [look for look in self.looks if look.se > 0.0]
        for look in spread or self.looks:  # a look of runs that agree exactly bounds nothing
            end_low, end_high = look.compute_bounds(per_look)
            low, high = max(low, end_low), min(high, end_high)
        return low, high

    @property
    def estimate(self) -> float:
        return self.looks[-1].diff

    def _calibrated(self, smallest: float) -> float:
        if self.max_rounds is None:
            return smallest
        return compute_sequential_p(smallest, self.max_rounds, self.prior_df)


def compare_runs(base: Sequence[RunSample], head: Sequence[RunSample], metric: Metric, *,
                 key: str = "", statistic: str | None = None, min_effect: float,
                 prior: RunNoisePrior | None = None) -> RowEvidence:
    """The evidence of one row over stored or fixed runs (each side a list of runs): a t-test
    over the runs' log statistics with the prior, or, one run a side and no prior, the
    request-level test widened by ``RUN_NOISE_FACTOR``."""
    statistic = metric.statistic if statistic is None else statistic
    kept_base, kept_head = _statistics(base, statistic), _statistics(head, statistic)
    shortfall: str | None = None
    look = compute_look(kept_base[0], kept_head[0], metric.lower_is_better, prior)
    per_run = sum(len(r.values) for r in head) // max(1, len(head))
    method = (f"t-test over runs of each run's log {statistic}"
              + describe_run_statistic(statistic, per_run)
              + ("" if prior is None else f", run-to-run noise pooled with {prior.runs} "
                 "earlier runs"))
    if look is None and len(kept_base[0]) == 1 and len(kept_head[0]) == 1:
        look = _widened_request_look(base, head, metric, statistic, min_effect,
                                     (kept_base[0][0], kept_head[0][0]))
        method = (f"one run a side and no earlier runs: the request-level test of the "
                  f"{statistic} with its spread x{RUN_NOISE_FACTOR:g} for run-to-run noise")
    if look is None:
        shortfall = kept_base[1] or kept_head[1] or _no_noise(statistic, base, head)
    values_base = [v for run in base for v in run.values]
    values_head = [v for run in head for v in run.values]
    observed = compute_observed(kept_base[0], kept_head[0], metric.lower_is_better)
    return RowEvidence(
        key=key, statistic=statistic, lower_is_better=metric.lower_is_better,
        min_effect=min_effect, looks=() if look is None else (look,),
        base_value=compute_pooled_statistic(values_base, statistic),
        head_value=compute_pooled_statistic(values_head, statistic),
        base_count=len(values_base), head_count=len(values_head), base_runs=len(base),
        head_runs=len(head), method=method if look is not None else "none",
        shortfall=shortfall, lag_s=max((r.lag_s for r in (*base, *head)), default=0.0),
        observed=observed)


def compute_observed(base: Sequence[RunStatistic], head: Sequence[RunStatistic],
                     lower_is_better: bool) -> float | None:
    """The signed log change of the sides' mean log statistics (worse > 0), noise or not."""
    if not base or not head:
        return None
    diff = _mean([s.log for s in head]) - _mean([s.log for s in base])
    return diff if lower_is_better else -diff


def _statistics(runs: Sequence[RunSample],
                statistic: str) -> tuple[list[RunStatistic], str | None]:
    found = [compute_run_statistic(run, statistic) for run in runs]
    kept = [s for s in found if not isinstance(s, str)]
    why = next((s for s in found if isinstance(s, str)), None)
    return kept, (why if not kept else None)


def _no_noise(statistic: str, base: Sequence[RunSample], head: Sequence[RunSample]) -> str:
    if not base or not head:
        return "no values on one side"
    return (f"one value per run and one run a side: the run-to-run noise of the {statistic} "
            "is unknown; needs 2 runs on a side, or 3 earlier runs of the base in the store")


def _widened_request_look(base: Sequence[RunSample], head: Sequence[RunSample], metric: Metric,
                          statistic: str, min_effect: float,
                          stats: tuple[RunStatistic, RunStatistic]) -> Look | None:
    """One run a side, no history: the request-level test's spread, widened, around the change
    of the runs' statistics (the one estimate every comparison reports)."""
    if len(base[0].values) < 2 or len(head[0].values) < 2:
        return None
    verdict = compare_samples(list(base[0].values), list(head[0].values), metric,
                              statistic=statistic, min_effect=min_effect,
                              confidence=FALLBACK_CONFIDENCE)
    if verdict.rel_change is None or verdict.ci is None or min(verdict.ci) <= -1.0:
        return None
    sign = 1.0 if metric.lower_is_better else -1.0
    low, high = (math.log1p(v) for v in verdict.ci)
    z = float(scipy_stats.norm.isf(1.0 - FALLBACK_CONFIDENCE))
    se = RUN_NOISE_FACTOR * (high - low) / (2.0 * z)
    worse, better = _biases([stats[0]], [stats[1]], metric.lower_is_better)
    return Look(sign * (stats[1].log - stats[0].log), se, math.inf, worse, better)


def compute_pooled_statistic(values: Sequence[float], statistic: str) -> float | None:
    """The statistic of all values pooled (what the report shows beside the change)."""
    return compute_statistic(values, statistic) if values else None


# --- the family: one budget, consistent intervals -------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowJudgement:
    """A row's verdict for its family: ``regressed`` is the family's (the one budget), and
    ``within_timing_error`` says the client's timing error alone stood in the way of one."""

    verdict: Verdict
    regressed: bool
    adjusted_p_value: float | None
    within_timing_error: bool = False


def compute_family_levels(p_worse: Sequence[float], p_better: Sequence[float],
                          alpha: float) -> tuple[HolmLevels, HolmLevels]:
    """One budget for every claim of a change: Holm over the regressions' and the
    improvements' one-sided p-values together, split back into the two directions."""
    joint = compute_holm_levels([*p_worse, *p_better], alpha)
    cut = len(p_worse)
    return (HolmLevels(joint.rejected[:cut], joint.adjusted[:cut], joint.levels[:cut]),
            HolmLevels(joint.rejected[cut:], joint.adjusted[cut:], joint.levels[cut:]))


def judge_rows(rows: Sequence[RowEvidence | Verdict], alpha: float) -> list[RowJudgement]:
    """Every row's verdict under one false-alarm budget ``alpha`` (module docstring, rule 4).
    A row given as a ``Verdict`` (an exact or a paired comparison, judged its own way) takes
    part in the regressions' Holm with its p-value, and keeps its verdict. It stays a regression
    only if Holm keeps it one."""
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be between 0 and 0.5 (got {alpha})")
    tested = [i for i, row in enumerate(rows) if _p_worse(row) is not None]
    evidence = [i for i in tested if isinstance(rows[i], RowEvidence)]
    p_better = [_as_evidence(rows[i]).compute_p_better() for i in evidence]
    worse, better = compute_family_levels([_p_worse(rows[i]) or 0.0 for i in tested], p_better,
                                          alpha)
    raw, _ = compute_family_levels([_p_worse(rows[i], with_bias=False) or 0.0 for i in tested],
                                   p_better, alpha)
    at = {index: k for k, index in enumerate(tested)}
    found: dict[int, RowJudgement] = {}
    for k, index in enumerate(evidence):
        w = at[index]
        found[index] = _judge_row(_as_evidence(rows[index]), _RowFamily(
            worse.rejected[w], better.rejected[k], raw.rejected[w], worse.levels[w],
            better.levels[k], worse.adjusted[w], alpha))
    for index in tested:
        row = rows[index]
        if isinstance(row, Verdict):
            found[index] = _judge_fixed(row, worse.rejected[at[index]], worse.adjusted[at[index]])
    return [found.get(i) or _unjudged(row, alpha) for i, row in enumerate(rows)]


def _as_evidence(row: RowEvidence | Verdict) -> RowEvidence:
    assert isinstance(row, RowEvidence)
    return row


def _p_worse(row: RowEvidence | Verdict, *, with_bias: bool = True) -> float | None:
    if isinstance(row, Verdict):
        return row.p_value
    return row.compute_p_worse(with_bias=with_bias) if row.judged else None


def _judge_fixed(verdict: Verdict, rejected: bool, adjusted: float) -> RowJudgement:
    """A verdict judged its own way, held to the family's budget."""
    if verdict.regressed and not rejected:
        verdict = replace(verdict, outcome=Outcome.INCONCLUSIVE,
                          reason=f"{verdict.reason}; not significant for the family (Holm-"
                                 f"adjusted p={adjusted:.3g})")
    return RowJudgement(verdict, verdict.regressed, adjusted)


@dataclass(frozen=True, slots=True)
class _RowFamily:
    worse: bool  # Holm rejects "no worse", the timing bound held against the change
    better: bool
    worse_raw: bool  # ... without the timing bound
    worse_level: float
    better_level: float
    adjusted: float
    alpha: float

    @property
    def level(self) -> float:
        if self.worse:
            return self.worse_level
        if self.better:
            return self.better_level
        return min(self.worse_level, self.better_level)


def _judge_row(row: RowEvidence, family: _RowFamily) -> RowJudgement:
    level = family.level
    low, high = row.compute_interval(level)
    estimate = row.estimate
    look = row.looks[-1]
    tau = row.threshold
    outcome, why = Outcome.INCONCLUSIVE, ""
    timing_limited = False
    if family.worse and estimate - look.bias_worse >= tau:
        outcome, why = Outcome.REGRESSION, "worse"
    elif family.better and -estimate - look.bias_better >= tau:
        outcome, why = Outcome.IMPROVEMENT, "better"
    elif -tau < low and high < tau:
        outcome, why = Outcome.NO_CHANGE, "no change"
    elif high < tau:
        outcome, why = Outcome.NO_CHANGE, "no regression"
    elif family.worse_raw and estimate >= tau and look.bias_worse > 0.0:
        timing_limited = True
    reason = _annotated(row, _reason(row, outcome, why, (low, high), family, timing_limited))
    runs = _runs_needed(row, (low, high)) if outcome is Outcome.INCONCLUSIVE else None
    verdict = build_verdict(row, outcome, (low, high), row.compute_p_worse(), 1.0 - level,
                            reason, runs)
    return RowJudgement(verdict, outcome is Outcome.REGRESSION, family.adjusted, timing_limited)


def _annotated(row: RowEvidence, reason: str) -> str:
    """The reason with the round that decided a sequential row, or why it stopped undecided."""
    if row.decided_round is not None:
        word, _, rest = reason.partition(":")
        return f"{word} (round {row.decided_round}):{rest}"
    if row.conditional_power is not None:
        return (f"{reason}; more rounds would likely not show one (conditional power "
                f"{row.conditional_power:.0%})")
    return reason


def _runs_needed(row: RowEvidence, interval: tuple[float, float]) -> int | None:
    """Runs per side for the interval to shrink enough to decide (it narrows as 1/sqrt(n))."""
    low, high = interval
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    half = (high - low) / 2.0
    distance, tau = abs(row.estimate), row.threshold
    target = max(tau - distance if distance < tau else distance, tau / 4.0, 1e-9)
    runs = max(row.base_runs, row.head_runs, 1)
    return min(MAX_RUNS_HINT, max(runs + 1, math.ceil(runs * (half / target) ** 2)))


def _reason(row: RowEvidence, outcome: Outcome, why: str, interval: tuple[float, float],
            family: _RowFamily, timing_limited: bool) -> str:
    rel, low, high = (_relative(row, v) + 0.0 for v in (row.estimate, *interval))  # no -0.0
    low, high = sorted((low, high))
    text = (f"{rel:+.1%} [{low:+.1%}, {high:+.1%}] at {_percent(1.0 - family.level)} (the row's "
            f"level in a family at {_percent(1.0 - family.alpha)}), Holm-adjusted p(worse)="
            f"{family.adjusted:.3g}")
    timing = ("" if row.lag_s == 0.0 else
              f"; the interval holds the client's timing error ({row.lag_s * 1000:.0f} ms "
              "of event-loop lag in client-bound runs)")
    effect = f"{row.min_effect:.1%}"
    if outcome is Outcome.REGRESSION:
        return f"worse: {text}; significant for the family and at least {effect}{timing}"
    if outcome is Outcome.IMPROVEMENT:
        return f"better: {text}; significant for the family and at least {effect}{timing}"
    if outcome is Outcome.NO_CHANGE and why == "no regression":
        return f"no regression: {text} rules out a regression of {effect}{timing}"
    if outcome is Outcome.NO_CHANGE:
        return f"no change: {text} lies within ±{effect}{timing}"
    if timing_limited:
        return (f"within the client's timing error: {text}; the change would be significant, "
                f"but {row.lag_s * 1000:.0f} ms of event-loop lag in client-bound runs could "
                "explain it: could not measure")
    return f"inconclusive: {text} neither shows nor rules out a change of {effect}{timing}"


def _percent(fraction: float) -> str:
    """95%, 97.5%, 99.58%, 99.996%: enough digits to tell a level apart from 100 %."""
    return f"{fraction * 100.0:.4g}%"


def _relative(row: RowEvidence, signed_log: float) -> float:
    """A signed log change (worse > 0) as the relative change of the metric itself."""
    value = signed_log if row.lower_is_better else -signed_log
    if math.isinf(value):
        return math.inf if value > 0 else -1.0
    return math.expm1(value)


def build_verdict(row: RowEvidence, outcome: Outcome, interval: tuple[float, float] | None,
                  p_value: float | None, confidence: float, reason: str,
                  runs_needed: int | None = None) -> Verdict:
    ci: tuple[float, float] | None = None
    rel: float | None = None
    if row.judged:
        rel = _relative(row, row.estimate)
    elif row.observed is not None:
        rel = _relative(row, row.observed)
    if interval is not None:
        ends = sorted(_relative(row, v) + 0.0 for v in interval)  # + 0.0: no -0.0
        ci = (ends[0], ends[1]) if all(math.isfinite(v) for v in ends) else None
    return Verdict(
        outcome=outcome, rel_change=rel, ci=ci, p_value=p_value, statistic=row.statistic,
        lower_is_better=row.lower_is_better, base_value=row.base_value,
        head_value=row.head_value, base_count=row.base_count, head_count=row.head_count,
        base_runs=row.base_runs, head_runs=row.head_runs, min_effect=row.min_effect,
        confidence=confidence, method=row.method, reason=reason, runs_needed=runs_needed)


def _unjudged(row: RowEvidence | Verdict, alpha: float) -> RowJudgement:
    if isinstance(row, Verdict):
        return RowJudgement(row, False, None)
    why = row.shortfall or "no run measured both sides"
    return RowJudgement(build_verdict(row, Outcome.INCONCLUSIVE, None, None, 1.0 - alpha,
                                      f"inconclusive: {why}", _runs_hint(row)), False, None)


def _runs_hint(row: RowEvidence) -> int | None:
    """Runs per side that would give a noise estimate, where that is what is missing (more
    runs do not help a p99 of too few requests per run)."""
    if row.base_runs + row.head_runs == 0 or row.observed is None:
        return None
    return max(2, row.base_runs, row.head_runs)
