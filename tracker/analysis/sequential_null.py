"""The null law of repeated looks: what "no change" gives the smallest p-value over every look.

``tracker.analysis.sequential`` looks after every round. Under "no change" the looks' two-sample
t statistics are pivotal (their joint law depends on neither the level nor the noise), so the
smallest one-sided p-value over the looks up to ``max_rounds`` has one law per (``max_rounds``,
prior degrees of freedom), simulated once here from a fixed seed and cached. Mapping a row's
running minimum through it is an exact p-value for the whole sequence of looks (Pocock's
repeated significance test on the p scale), and its ``alpha`` quantile is the level each look
is tested at. Pure: no I/O.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt
from scipy import stats as scipy_stats  # type: ignore[import-untyped]

NULL_SEQUENCES = 200_000  # simulated null sequences behind the looks' calibration
NULL_SEED = 20261201
GUARD_ROUNDS = 3  # from this round on, a prior is never below the rounds' own variance


def _looks(max_rounds: int, prior_df: int) -> int:
    return max_rounds - (1 if prior_df > 0 else 2) + 1


@functools.cache
def compute_null_min_p(max_rounds: int, prior_df: int = 0) -> npt.NDArray[np.float64]:
    """The null law of the smallest one-sided p-value over the looks up to ``max_rounds``
    (2.. without a prior, 1.. with one of ``prior_df`` degrees of freedom), sorted: the
    two-sample t of ``n`` rounds a side at every ``n``, on seeded normal sequences and a
    chi-square prior, guard included (the t statistics are pivotal: any mean and noise give the
    same law)."""
    rng = np.random.default_rng([NULL_SEED, prior_df])
    shape = (NULL_SEQUENCES, max_rounds)
    base, head = rng.standard_normal(shape), rng.standard_normal(shape)
    prior_squares = rng.chisquare(prior_df, NULL_SEQUENCES) if prior_df else 0.0
    smallest = np.ones(NULL_SEQUENCES)
    for n in range(1 if prior_df else 2, max_rounds + 1):
        x, y = base[:, :n], head[:, :n]
        squares = (((x - x.mean(1, keepdims=True)) ** 2).sum(1)
                   + ((y - y.mean(1, keepdims=True)) ** 2).sum(1))
        if n >= GUARD_ROUNDS and prior_df:
            prior_squares_n = np.maximum(prior_squares, squares / (2 * n - 2) * prior_df)
        else:
            prior_squares_n = prior_squares
        df = prior_df + 2 * n - 2
        se = np.sqrt((squares + prior_squares_n) / df * (2.0 / n))
        p = scipy_stats.t.sf((y.mean(1) - x.mean(1)) / se, df)
        smallest = np.minimum(smallest, p)
    return np.sort(smallest)


def compute_sequential_p(min_p: float, max_rounds: int, prior_df: int = 0) -> float:
    """The chance under "no change" that some look up to ``max_rounds`` gets a p-value as small
    as ``min_p``: an exact p-value for the whole sequence of looks."""
    looks = _looks(max_rounds, prior_df)
    if looks < 1:
        return 1.0
    if looks == 1:
        return min(1.0, min_p)
    null = compute_null_min_p(max_rounds, prior_df)
    return min(1.0, (int(np.searchsorted(null, min_p, side="right")) + 1) / (len(null) + 1))


@functools.cache
def compute_look_level(max_rounds: int, alpha: float, prior_df: int = 0) -> float:
    """The one-sided level each look is tested at so that all looks together keep ``alpha``."""
    if _looks(max_rounds, prior_df) < 2:
        return alpha
    return float(np.quantile(compute_null_min_p(max_rounds, prior_df), alpha))
