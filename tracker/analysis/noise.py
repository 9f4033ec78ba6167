"""Run-to-run noise: a run's statistic on the log scale, and the prior the history gives.

The run is the unit of replication (requests of one run share batches, and a whole run drifts),
so the noise a comparison needs is how much the log of a run's statistic (its median, p99 or mean
of per-request values, or its one value, such as a throughput) varies from run to run. Any
statistic computed alike on both sides can be compared this way, a small run's p99 too (it is
then near the run's largest value, and the report says so): the runs' own spread is its noise.
Where the store holds earlier runs of the base config version (the history), the sample variance
of their log statistic is a prior with ``runs - 1`` degrees of freedom, pooled with the compared
runs' own spread (``compute_pooled_variance``). From ``GUARD_RUNS`` runs a side on, the prior is
never taken below that own spread, so a quiet history cannot make a busy comparison look precise.
Nor is the pooled variance of a quantile a run cannot resolve (the p99 of 16 requests: its
largest value) ever taken below the spread of the runs' top values
(``compute_sampling_variance``), so two runs a side whose largest values happen to agree cannot
make a change look precise. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as scipy_stats  # type: ignore[import-untyped]

from tracker.analysis.sequential_null import GUARD_ROUNDS

QUANTILES: dict[str, float] = {"median": 0.5, "p90": 0.9, "p99": 0.99}
STATISTICS = (*QUANTILES, "mean")
MIN_VALUES = 8  # per run, for a per-request statistic
MIN_PRIOR_RUNS = 3  # earlier runs behind a prior, at least
GUARD_RUNS = GUARD_ROUNDS  # runs a side from which the prior never falls below the own spread


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


def compute_log_statistic(values: Sequence[float], statistic: str) -> float | str:
    """The log of a run's statistic, or why it cannot be had."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0 or not np.all(np.isfinite(x)) or float(x.min()) <= 0.0:
        return "values must be finite and > 0 for a ratio"
    if n == 1:
        return math.log(float(x[0]))  # a value measured once per run
    if statistic != "mean" and n < MIN_VALUES:
        return f"{statistic} needs >= {MIN_VALUES} values per run (got {n})"
    return math.log(compute_statistic(x, statistic))


def compute_statistic(values: Sequence[float] | npt.NDArray[np.float64], statistic: str) -> float:
    """A sample's mean or its quantile, linear between order statistics (numpy's default, as in
    ``vllm bench serve``): the one definition of a run's or a pooled sample's statistic."""
    if statistic == "mean":
        return float(np.mean(values))
    return float(np.quantile(values, QUANTILES[statistic]))


def resolves_statistic(statistic: str, values_per_run: float) -> bool:
    """Whether a run of ``values_per_run`` values resolves ``statistic``: a median, a mean, one
    value a run, or a quantile with at least one value beyond it (a p99 of 100 or more)."""
    q = QUANTILES.get(statistic)
    return q is None or values_per_run * (1.0 - q) >= 1.0


def compute_sampling_variance(values: Sequence[float], statistic: str) -> float:
    """How much a run's log statistic varies from its requests alone, where the run cannot
    resolve its quantile (fewer than one value beyond it: the p99 of 16 or 32 requests): the
    Maritz-Jarrett variance of the log quantile (its order statistics weighted by the Beta law of
    the quantile's rank, the rank kept one below the largest, so it is the spread of the run's
    top values). 0.0 otherwise: a median, a mean, a p99 of 1,000 requests (requests of a run are
    not independent draws: in a closed loop the queue repeats itself run after run, and a floor
    from their spread would bury real changes)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if resolves_statistic(statistic, n) or n < MIN_VALUES or not np.all(np.isfinite(x)) \
            or float(x.min()) <= 0.0:
        return 0.0
    q = QUANTILES[statistic]
    logs = np.sort(np.log(x))
    rank = min(max(math.floor(q * n + 0.5), 2), n - 1)
    edges = scipy_stats.beta.cdf(np.arange(n + 1) / n, rank - 1, n - rank)
    weights = np.diff(edges)
    first = float(weights @ logs)
    return max(float(weights @ (logs * logs)) - first * first, 0.0)


def describe_run_statistic(statistic: str, values_per_run: int) -> str:
    """What a run's quantile is when the run is small: the p99 of 48 requests lies between
    its two largest values. It is the same statistic on both sides, and the runs' spread is its
    noise, so it is compared as it is, and the report says what it is."""
    if resolves_statistic(statistic, values_per_run):
        return ""
    return (f" ({statistic} of about {values_per_run} values a run: near the run's largest "
            "value)")


def compute_run_noise_prior(runs: Sequence[Sequence[float]],
                            statistic: str) -> RunNoisePrior | None:
    """The prior of earlier runs' values (one list per run): None under ``MIN_PRIOR_RUNS`` runs
    whose statistic can be had."""
    logs = [x for x in (compute_log_statistic(run, statistic) for run in runs)
            if not isinstance(x, str)]
    if len(logs) < MIN_PRIOR_RUNS:
        return None
    return RunNoisePrior(float(np.var(logs, ddof=1)), len(logs) - 1)


def compute_pooled_variance(squares: float, own_df: int, runs_a_side: int,
                            prior: RunNoisePrior | None) -> tuple[float, int]:
    """The variance of one run's log statistic and its degrees of freedom: the compared runs'
    own sum of squares (``own_df`` degrees of freedom) pooled with the prior's, the prior held at
    least at the own estimate from ``GUARD_RUNS`` runs a side on."""
    if prior is None:
        return (squares / own_df if own_df > 0 else math.nan), own_df
    prior_variance = prior.variance
    if runs_a_side >= GUARD_RUNS and own_df > 0:
        prior_variance = max(prior_variance, squares / own_df)
    df = prior.df + own_df
    return (prior.df * prior_variance + squares) / df, df
