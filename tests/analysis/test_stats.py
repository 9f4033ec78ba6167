"""Rank tests, Hodges-Lehmann, the score test, Harrell-Davis and Student's t on literal, seeded inputs."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tracker.analysis.changepoint_scan import rank_sum_p_value
from tracker.analysis.stats import (
    compute_mid_ranks,
    hodges_lehmann,
    mean_ratio_test,
    quantile_shift_test,
    rank_test_one_sided,
    score_rank_test,
    select_pairwise_difference,
    student_t_one_sided,
    student_t_quantile,
)


def test_ranks_give_ties_their_mid_rank_and_count_them() -> None:
    ranks, ties = compute_mid_ranks(np.array([10.0, 20.0, 20.0, 30.0]))
    assert ranks.tolist() == [1.0, 2.5, 2.5, 4.0]
    assert ties == 2**3 - 2


def test_two_sided_rank_sum_matches_the_textbook_normal_approximation() -> None:
    # x = 1..5, y = 6..10: U(y) = 25, mean 12.5, var 5*5*11/12; continuity-corrected z = 2.507
    before, after = np.arange(1.0, 6.0), np.arange(6.0, 11.0)
    assert rank_sum_p_value(before, after) == pytest.approx(0.01219, abs=1e-4)
    assert rank_sum_p_value(after, before) == pytest.approx(rank_sum_p_value(before, after))
    assert rank_sum_p_value(np.full(10, 3.0), np.full(12, 3.0)) == 1.0


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
    assert student_t_one_sided(12.706, 1)[0] == pytest.approx(0.025, abs=5e-4)
    assert student_t_quantile(0.975, 4) == pytest.approx(2.776, abs=1e-3)
    assert student_t_one_sided(0.0, 7) == pytest.approx((0.5, 0.5))


def test_student_t_one_sided_halves_the_two_sided_p() -> None:
    up, down = student_t_one_sided(2.228, 10)
    assert up == pytest.approx(0.025, abs=5e-4)
    assert up + down == pytest.approx(1.0)


def test_one_sided_rank_test_points_the_right_way() -> None:
    up, down = rank_test_one_sided([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert up == pytest.approx(0.01219 / 2.0, abs=1e-4)  # half the textbook two-sided p
    assert down > 0.99
    assert rank_test_one_sided([3.0] * 10, [3.0] * 12) == (1.0, 1.0)


def _mixture(rng: np.random.Generator, n: int) -> np.ndarray:
    """Cache hits at 0.35x beside misses: a bimodal latency, where ranks lose power."""
    values = np.exp(0.3 * rng.standard_normal(n))
    values[rng.random(n) < 0.3] *= 0.35
    return values


def test_the_score_test_recovers_a_shift_of_a_bimodal_sample() -> None:
    rng = np.random.default_rng(12)
    x, y = np.log(_mixture(rng, 3000)), np.log(_mixture(rng, 3000)) + 0.05
    test = score_rank_test(x, y, 0.95)
    assert test.shift == pytest.approx(0.05, abs=0.015)
    assert test.low < 0.05 < test.high
    assert test.p_up < 1e-4 and test.p_down > 0.999


def test_the_score_test_recovers_a_large_shift_too() -> None:
    rng = np.random.default_rng(13)
    x = rng.standard_normal(1000) * 0.1
    test = score_rank_test(x, rng.standard_normal(1000) * 0.1 + 0.4, 0.95)
    assert test.shift == pytest.approx(0.4, abs=0.02)


def test_the_score_test_is_more_powerful_than_mann_whitney_on_bimodal_latencies() -> None:
    rng = np.random.default_rng(14)
    hits = [0, 0]
    for _ in range(60):
        x, y = np.log(_mixture(rng, 1000)), np.log(_mixture(rng, 1000)) + math.log(1.05)
        hits[0] += score_rank_test(x, y, 0.95).p_up < 0.05
        hits[1] += rank_test_one_sided(x, y)[0] < 0.05
    assert hits[0] > hits[1] + 6


def test_the_score_test_holds_its_level_on_identical_samples() -> None:
    rng = np.random.default_rng(15)
    flagged = sum(score_rank_test(np.log(_mixture(rng, 500)), np.log(_mixture(rng, 500)),
                                  0.95).p_up < 0.05 for _ in range(300))
    assert flagged <= 27  # 5 % of 300 is 15; 27 is beyond its 99.9 % binomial range


def test_small_samples_get_mann_whitney_and_hodges_lehmann() -> None:
    x, y = [1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]
    test = score_rank_test(x, y, 0.95)
    assert test.shift == pytest.approx(5.0)
    assert test.p_up == pytest.approx(rank_test_one_sided(x, y)[0])


def test_harrell_davis_sees_a_moved_p99_and_not_a_moved_median() -> None:
    rng = np.random.default_rng(16)
    x = rng.standard_normal(5000)
    y = rng.standard_normal(5000)
    y = np.where(y > 1.6, y + 0.4, y)  # only the top 5 % moves
    tail = quantile_shift_test(x, y, 0.99, 0.95)
    assert tail.shift == pytest.approx(0.4, abs=0.15)
    assert tail.p_up < 0.01
    assert quantile_shift_test(x, y, 0.5, 0.95).p_up > 0.01


def test_means_compare_as_a_ratio_on_the_log_scale() -> None:
    rng = np.random.default_rng(17)
    x = rng.exponential(1.0, 20000)
    test = mean_ratio_test(x, rng.exponential(1.2, 20000), 0.95, log=True)
    assert test.shift == pytest.approx(math.log(1.2), abs=0.03)
    assert test.p_up < 1e-6
    plain = mean_ratio_test([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], 0.95, log=False)
    assert plain.shift == pytest.approx(1.0)
