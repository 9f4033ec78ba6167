"""The paired quality verdict on literal 2x2 tables with known exact p-values, and seeded pairs."""

from __future__ import annotations

import random

import pytest

from tracker.analysis import Outcome, PairedItem, compute_paired_quality, judge_family
from tracker.analysis.paired_quality import (
    PairedTable,
    compute_detectable_drop,
    compute_mcnemar_exact,
    compute_mcnemar_one_sided,
    compute_mcnemar_power,
    compute_newcombe_interval,
)


def _pairs(both_right: int, base_only: int, head_only: int, both_wrong: int) -> list[PairedItem]:
    cells = ((True, True, both_right), (True, False, base_only), (False, True, head_only),
             (False, False, both_wrong))
    pairs = []
    for base, head, count in cells:
        pairs += [PairedItem(f"{base}-{head}-{i}", base, head, base != head) for i in range(count)]
    return pairs


@pytest.mark.parametrize(("b", "c", "expected"), [
    # 2 P(X <= 2), X ~ Bin(12, 1/2) = 2 (1 + 12 + 66) / 4096 = 158 / 4096
    (10, 2, 0.0385742188),
    (2, 10, 0.0385742188),
    # 2 P(X <= 0), X ~ Bin(5, 1/2) = 2 / 32
    (5, 0, 0.0625),
    # 2 (1 + 10 + 45 + 120) / 1024 = 352 / 1024
    (7, 3, 0.34375),
    # 2 P(X <= 3 | 6) = 2 * 42 / 64 > 1: capped at 1
    (3, 3, 1.0),
    # nothing discordant: no evidence at all
    (0, 0, 1.0),
])
def test_the_exact_mcnemar_p_value_matches_the_binomial_formula(b: int, c: int,
                                                                expected: float) -> None:
    assert compute_mcnemar_exact(b, c) == pytest.approx(expected, abs=1e-9)


def test_the_one_sided_p_value_counts_the_losses_on_head() -> None:
    # P(X >= 10 | 12) = (66 + 12 + 1) / 4096
    assert compute_mcnemar_one_sided(10, 2) == pytest.approx(79 / 4096)
    # P(X >= 2 | 12) = 1 - (1 + 12) / 4096: head gained, so "worse" is far from shown
    assert compute_mcnemar_one_sided(2, 10) == pytest.approx(1 - 13 / 4096)
    assert compute_mcnemar_one_sided(5, 0) == pytest.approx(1 / 32)


def test_a_five_point_drop_on_a_thousand_items_is_a_regression() -> None:
    result = compute_paired_quality(_pairs(900, 50, 0, 50))
    assert result.verdict.outcome is Outcome.REGRESSION
    assert result.difference == pytest.approx(-0.05)
    assert result.base_accuracy == pytest.approx(0.95) and result.head_accuracy == pytest.approx(0.90)
    low, high = result.ci
    assert low < -0.05 < high < -0.03
    assert result.verdict.p_value == pytest.approx(0.5 ** 50)
    assert len(result.flipped_worse) == 50 and result.flipped_better == ()
    assert result.changed == 50
    assert judge_family([result.verdict]).regressions == (0,)


def test_the_same_answers_are_no_change() -> None:
    result = compute_paired_quality(_pairs(950, 0, 0, 50))
    assert result.verdict.outcome is Outcome.NO_CHANGE
    assert result.difference == 0.0 and result.p_two_sided == 1.0
    assert -0.01 < result.ci[0] <= 0.0 <= result.ci[1] < 0.01
    assert not result.verdict.regressed


def test_flips_both_ways_at_the_same_rate_are_not_a_regression() -> None:
    result = compute_paired_quality(_pairs(880, 30, 30, 60))
    assert result.verdict.outcome in (Outcome.INCONCLUSIVE, Outcome.NO_CHANGE)
    assert result.p_two_sided == 1.0 or result.p_two_sided > 0.5
    assert "80% power" in result.verdict.reason or result.verdict.outcome is Outcome.NO_CHANGE


def test_a_forty_item_set_cannot_see_five_points_and_says_so() -> None:
    # two items lost of 40: five points, p(worse) = 1/4
    result = compute_paired_quality(_pairs(36, 2, 0, 2))
    assert result.verdict.outcome is Outcome.INCONCLUSIVE
    assert result.detectable_drop > 0.05
    assert f"{result.detectable_drop * 100:.1f} points at 80% power" in result.verdict.reason


def test_the_newcombe_interval_contains_the_estimate_and_narrows_with_more_items() -> None:
    small = compute_newcombe_interval(PairedTable(80, 10, 4, 6), 0.975)
    large = compute_newcombe_interval(PairedTable(800, 100, 40, 60), 0.975)
    assert small[0] < -0.06 < small[1] and large[0] < -0.06 < large[1]
    assert large[1] - large[0] < (small[1] - small[0]) / 2.5


def test_the_newcombe_interval_covers_the_true_difference_as_stated() -> None:
    rng = random.Random(7)
    probabilities = (0.80, 0.08, 0.04, 0.08)  # true difference: 0.04 - 0.08 = -0.04
    covered, trials = 0, 2000
    for _ in range(trials):
        cells = [0, 0, 0, 0]
        for _ in range(200):
            cells[rng.choices(range(4), probabilities)[0]] += 1
        low, high = compute_newcombe_interval(PairedTable(*cells), 0.975)
        covered += low <= -0.04 <= high
    assert 0.93 <= covered / trials <= 0.975  # a 95 % interval, a little conservative


def test_the_power_grows_with_the_drop_and_the_detectable_drop_has_eighty_percent() -> None:
    powers = [compute_mcnemar_power(1000, 0.04, drop, 0.05) for drop in (0.005, 0.01, 0.02, 0.04)]
    assert powers == sorted(powers) and powers[-1] > 0.99
    drop = compute_detectable_drop(1000, 0.04, 0.05)
    assert compute_mcnemar_power(1000, 0.04, drop, 0.05) == pytest.approx(0.8, abs=0.01)
    assert compute_detectable_drop(40, 0.0, 0.05) > compute_detectable_drop(1000, 0.0, 0.05)


def test_an_empty_comparison_is_refused() -> None:
    with pytest.raises(ValueError, match="no item was answered"):
        compute_paired_quality([])
