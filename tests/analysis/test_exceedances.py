"""The exceedance test of a high quantile: literal samples where it must and must not fire, what
its weights favour, its level under "no difference" on seeded samples, and the generalised
Pareto fit under it."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats  # type: ignore[import-untyped]

from tracker.analysis.exceedances import exceedance_z, fit_tail_shape, tail_shift_test

NORMAL = NormalDist()


def _literal_log_normal(n: int) -> np.ndarray:
    """The log values of a log-normal sample (sigma 0.5) placed exactly at its quantiles."""
    return np.array([0.5 * NORMAL.inv_cdf((i + 0.5) / n) for i in range(n)])


def _stretch_top(logs: np.ndarray, top: float, stretch: float) -> np.ndarray:
    """Values (not logs) above the ``1 - top`` quantile stretched away from it by ``stretch``."""
    values = np.exp(logs)
    cut = float(np.quantile(values, 1.0 - top))
    return np.log(np.where(values <= cut, values, cut + (values - cut) * stretch))


def test_it_fires_when_only_the_slowest_three_percent_get_slower() -> None:
    base = _literal_log_normal(2000)
    head = _stretch_top(base, 0.03, 2.0)  # the p99 +20 %, the median untouched
    test = tail_shift_test(base.tolist(), head.tolist(), 0.99, 0.95)
    assert test.method.startswith("exceedance test")
    assert test.p_up < 0.01 and test.p_down > 0.99
    assert test.shift == pytest.approx(math.log(1.20), abs=0.03)
    assert test.low > 0.0


def _literal_log_normal_between(n: int) -> np.ndarray:
    """Like ``_literal_log_normal``, placed at the quantiles a quarter step lower: a second side
    that is not a copy of the first."""
    return np.array([0.5 * NORMAL.inv_cdf((i + 0.25) / n) for i in range(n)])


def _stretch_for_p99_growth(logs: np.ndarray, top: float, growth: float) -> np.ndarray:
    """Values above the ``1 - top`` quantile stretched away from it so that the p99 grows by
    ``growth``."""
    values = np.exp(logs)
    cut, p99 = (float(v) for v in np.quantile(values, [1.0 - top, 0.99]))
    stretch = (growth * p99 - cut) / (p99 - cut)
    return np.log(np.where(values <= cut, values, cut + (values - cut) * stretch))


def test_a_stretched_top_weighs_more_than_a_shift_of_every_request() -> None:
    # noise-free sides of 1,000: the p99 +10 % once from the slowest 3 % stretched (the spread
    # scores' alternative), once from every request 10 % slower (mostly the counts'); the counts
    # weigh half, so the first lands near the 5 % line (where half of seeded draws land) and
    # the second well below it. With every score at full weight both read z = 1.16.
    base, other = _literal_log_normal(1000), _literal_log_normal_between(1000)
    stretched = exceedance_z(base, _stretch_for_p99_growth(other, 0.03, 1.10), 0.99)
    shifted = exceedance_z(base, other + math.log(1.10), 0.99)
    assert stretched is not None and shifted is not None
    assert stretched[0] == pytest.approx(1.30, abs=0.03)
    assert shifted[0] == pytest.approx(0.61, abs=0.03)
    assert stretched[1] == shifted[1] == 100  # the pooled values above the pooled p95


def test_it_does_not_fire_on_identical_sides_or_a_lighter_tail() -> None:
    base = _literal_log_normal(1000)
    same = tail_shift_test(base.tolist(), base.tolist(), 0.99, 0.95)
    assert same.p_up == pytest.approx(0.5) and same.shift == 0.0
    lighter = tail_shift_test(base.tolist(), _stretch_top(base, 0.03, 0.3).tolist(), 0.99, 0.95)
    assert lighter.p_up > 0.99 and lighter.p_down < 0.01


def test_it_does_not_fire_when_only_the_fast_half_moves() -> None:
    base = _literal_log_normal(1000)
    head = np.where(base < 0.0, base + 0.2, base)  # the fastest half 22 % slower, tail as it was
    test = tail_shift_test(base.tolist(), head.tolist(), 0.99, 0.95)
    assert 0.05 < test.p_up < 0.95


def test_swapping_the_sides_swaps_the_directions() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.normal(0.0, 0.5, 800), rng.normal(0.0, 0.5, 800)
    forward, backward = exceedance_z(x, y, 0.99), exceedance_z(y, x, 0.99)
    assert forward is not None and backward is not None
    assert forward[0] == pytest.approx(-backward[0]) and forward[1] == backward[1] == 80


@pytest.mark.parametrize("shape", ["lognormal", "gamma", "pareto"])
def test_it_holds_its_level_on_identical_seeded_samples(shape: str) -> None:
    rng = np.random.default_rng(2026)
    draws = {
        "lognormal": lambda: 0.5 * rng.standard_normal(600),
        "gamma": lambda: np.log(rng.gamma(2.0, 1.0, 600)),
        "pareto": lambda: np.log((1.0 - rng.random(600)) ** (-1.0 / 1.5)),
    }
    tests = [exceedance_z(draws[shape](), draws[shape](), 0.99) for _ in range(300)]
    p_values = [float(stats.t.sf(t, df)) for t, df in filter(None, tests)]
    assert len(p_values) == 300
    rejected = sum(p < 0.05 for p in p_values)
    assert 3 <= rejected <= 26  # 15 expected; 2.5 sd of 300 draws at 5 % either side
    assert 0.4 < float(np.median(p_values)) < 0.6


def test_a_tail_too_thin_for_the_test_gets_harrell_davis_alone() -> None:
    base = _literal_log_normal(200)  # the pooled top 2 %: 8 values
    test = tail_shift_test(base.tolist(), _stretch_top(base, 0.03, 1.5).tolist(), 0.99, 0.95)
    assert test.method.startswith("harrell-davis")
    assert tail_shift_test(base.tolist(), base.tolist(), 0.9, 0.95).method.startswith(
        "harrell-davis")  # a p90's "tail" is half the sample


def test_equal_values_are_not_a_change() -> None:
    test = tail_shift_test([1.0] * 600, [1.0] * 600, 0.99, 0.95)
    assert test.shift == 0.0 and test.p_up >= 0.5 and test.p_down >= 0.5


def test_the_tail_fit_recovers_exponential_and_pareto_shapes() -> None:
    rng = np.random.default_rng(11)
    xi, beta = fit_tail_shape(rng.exponential(2.0, 20_000))
    assert xi == pytest.approx(0.0, abs=0.03) and beta == pytest.approx(2.0, rel=0.05)
    pareto_excess = (1.0 - rng.random(20_000)) ** -0.5 - 1.0  # shape 0.5, scale 0.5
    xi, beta = fit_tail_shape(pareto_excess)
    assert xi == pytest.approx(0.5, abs=0.05) and beta == pytest.approx(0.5, rel=0.1)
    xi, _ = fit_tail_shape(rng.uniform(0.0, 1.0, 20_000))  # a bounded tail: clipped to 0
    assert xi == 0.0
