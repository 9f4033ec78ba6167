"""Rank tests, Hodges-Lehmann, quantiles, Student's t and the bootstrap on literal inputs."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from tracker.analysis.stats import (
    bootstrap_upper_quantile,
    compute_mad,
    compute_quantile,
    compute_ranks,
    draw_binomial,
    hodges_lehmann,
    mann_whitney,
    select_pairwise_difference,
    student_t_ppf,
    student_t_two_sided_p,
)


def test_quantile_interpolates_linearly_like_numpy() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert compute_quantile(values, 0.5) == 2.5
    assert compute_quantile(values, 0.0) == 1.0
    assert compute_quantile(values, 1.0) == 4.0
    assert compute_quantile(values, 0.9) == pytest.approx(3.7)


def test_mad_of_a_normal_sample_estimates_its_sd() -> None:
    rng = random.Random(4)
    values = [rng.gauss(0.0, 2.0) for _ in range(20000)]
    assert compute_mad(values) == pytest.approx(2.0, rel=0.03)


def test_ranks_give_ties_their_mid_rank_and_count_them() -> None:
    ranks, ties = compute_ranks([10.0, 20.0, 20.0, 30.0])
    assert ranks == [1.0, 2.5, 2.5, 4.0]
    assert ties == 2**3 - 2


def test_mann_whitney_matches_the_textbook_normal_approximation() -> None:
    # x = 1..5, y = 6..10: U(y) = 25, mean 12.5, var 5*5*11/12; continuity-corrected z
    test = mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert test.u == 25.0
    assert test.z == pytest.approx(12.0 / math.sqrt(25 * 11 / 12))
    assert test.p_value == pytest.approx(0.01219, abs=1e-4)


def test_mann_whitney_is_symmetric_in_direction() -> None:
    up = mann_whitney([1, 2, 3, 4, 5, 6], [4, 5, 6, 7, 8, 9])
    down = mann_whitney([4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 5, 6])
    assert up.z == pytest.approx(-down.z)
    assert up.p_value == pytest.approx(down.p_value)


def test_mann_whitney_on_all_equal_values_finds_nothing() -> None:
    test = mann_whitney([3.0] * 10, [3.0] * 12)
    assert test.p_value == 1.0
    assert test.z == 0.0


def test_pairwise_difference_selection_matches_brute_force() -> None:
    rng = random.Random(9)
    x = [rng.gauss(0, 1) for _ in range(23)]
    y = [rng.gauss(0.5, 1) for _ in range(17)]
    every = sorted(b - a for a in x for b in y)
    for k in (1, 5, 100, 196, 391):
        assert select_pairwise_difference(x, y, k) == pytest.approx(every[k - 1])


def test_hodges_lehmann_recovers_an_exact_shift() -> None:
    rng = random.Random(1)
    x = [rng.gauss(0, 1) for _ in range(200)]
    shift = hodges_lehmann(x, [v + 0.7 for v in x], 0.95)
    assert shift.shift == pytest.approx(0.7)
    assert shift.low < 0.7 < shift.high


def test_student_t_matches_table_values() -> None:
    assert student_t_two_sided_p(2.228, 10) == pytest.approx(0.05, abs=1e-3)
    assert student_t_two_sided_p(12.706, 1) == pytest.approx(0.05, abs=1e-3)
    assert student_t_ppf(0.975, 4) == pytest.approx(2.776, abs=1e-3)
    assert student_t_two_sided_p(0.0, 7) == pytest.approx(1.0)


def test_binomial_draws_have_the_binomial_mean_and_variance() -> None:
    rng = random.Random(2)
    draws = [draw_binomial(400, 0.05, rng) for _ in range(20000)]
    assert statistics.fmean(draws) == pytest.approx(20.0, rel=0.02)
    assert statistics.pvariance(draws) == pytest.approx(19.0, rel=0.06)


def test_fast_quantile_bootstrap_matches_the_plain_bootstrap() -> None:
    rng = random.Random(3)
    values = sorted(rng.lognormvariate(0.0, 0.5) for _ in range(600))
    fast = bootstrap_upper_quantile(values, 0.99, random.Random(5), 3000)
    plain = [compute_quantile(sorted(rng.choices(values, k=len(values))), 0.99)
             for _ in range(3000)]
    assert statistics.fmean(fast) == pytest.approx(statistics.fmean(plain), rel=0.01)
    assert statistics.stdev(fast) == pytest.approx(statistics.stdev(plain), rel=0.1)
