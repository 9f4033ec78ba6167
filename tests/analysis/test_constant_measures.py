"""The exact comparison of a bit-constant measure: literal readings, known verdicts."""

from __future__ import annotations

import pytest

from tracker.analysis import Outcome, judge_family
from tracker.analysis.constant_measures import EXACT_METHOD, compare_exact, runs_repeat_exactly
from tracker.metrics import GIB, REGISTRY

PEAK = REGISTRY["gpu_memory_peak_bytes"]  # lower is better


def test_one_more_byte_on_every_head_run_is_a_regression_with_no_tolerance() -> None:
    base = [[72 * GIB, 72 * GIB]] * 3
    head = [[72 * GIB + 1, 72 * GIB + 1]] * 3
    verdict = compare_exact(base, head, PEAK)
    assert verdict is not None and verdict.outcome is Outcome.REGRESSION
    assert verdict.p_value == 0.0 and verdict.min_effect == 0.0 and verdict.method == EXACT_METHOD
    assert verdict.base_value == 72 * GIB and verdict.head_value == 72 * GIB + 1
    assert verdict.rel_change == pytest.approx(1 / (72 * GIB))
    assert verdict.base_runs == 3 and verdict.base_count == 6


def test_equal_bytes_are_no_change_and_spend_no_budget() -> None:
    verdict = compare_exact([[5.0, 5.0]], [[5.0, 5.0], [5.0, 5.0]], PEAK)
    assert verdict is not None and verdict.outcome is Outcome.NO_CHANGE
    assert verdict.p_value is None and verdict.rel_change == 0.0


def test_less_memory_is_an_improvement() -> None:
    verdict = compare_exact([[8.0, 8.0]], [[6.0, 6.0]], PEAK)
    assert verdict is not None and verdict.outcome is Outcome.IMPROVEMENT
    assert verdict.rel_change == pytest.approx(-0.25)


def test_a_side_that_moved_within_a_run_or_between_runs_is_not_judged_exactly() -> None:
    assert compare_exact([[8.0, 7.5]], [[9.0, 9.0]], PEAK) is None  # peak above its mean
    assert compare_exact([[8.0, 8.0], [8.5, 8.5]], [[9.0, 9.0]], PEAK) is None
    assert not runs_repeat_exactly([]) and runs_repeat_exactly([[3.0, 3.0], [3.0]])


def test_higher_is_better_flips_the_direction() -> None:
    accuracy = REGISTRY["accuracy"]
    verdict = compare_exact([[0.8]], [[0.7]], accuracy)
    assert verdict is not None and verdict.outcome is Outcome.REGRESSION


def test_an_exact_regression_stays_one_under_holm_among_many_rows() -> None:
    exact = compare_exact([[1.0, 1.0]], [[2.0, 2.0]], PEAK)
    assert exact is not None
    judged = judge_family([exact], alpha=0.05)
    assert judged.regressions == (0,) and judged.adjusted_p_values == (0.0,)
