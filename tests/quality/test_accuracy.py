"""Accuracy, the Wilson interval and the drift, on literal results with known answers."""

from __future__ import annotations

import pytest

from tracker.quality.accuracy import compute_drift, compute_quality_result, compute_wilson_interval
from tracker.quality.sets import QualitySet
from tracker.results import QualityItemResult

SET = QualitySet("s", "v" * 64, "s.jsonl", ())


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (5, 10, 0.2366, 0.7634), (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (38, 40, 0.8350, 0.9862)])
def test_wilson_interval_matches_known_values(k: int, n: int, low: float, high: float) -> None:
    assert compute_wilson_interval(k, n) == pytest.approx((low, high), abs=1e-4)


def test_wilson_interval_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError):
        compute_wilson_interval(3, 0)
    with pytest.raises(ValueError):
        compute_wilson_interval(4, 3)


def _item(item_id: str, output: str | None, score: float | None) -> QualityItemResult:
    return QualityItemResult(item_id, "exact", output, score,
                             None if output is not None else "http_500: boom")


def test_accuracy_counts_answered_items_only() -> None:
    result = compute_quality_result(SET, [_item("a", "1", 1.0), _item("b", "2", 0.0),
                                          _item("c", None, None), _item("d", "4", 1.0)])
    assert (result.answered, result.correct) == (3, 2)
    assert result.accuracy == pytest.approx(2 / 3)
    assert (result.accuracy_ci_low, result.accuracy_ci_high) == pytest.approx(
        compute_wilson_interval(2, 3))
    assert result.drift is None and result.drift_baseline_run_id is None


def test_nothing_answered_has_no_accuracy() -> None:
    result = compute_quality_result(SET, [_item("a", None, None)])
    assert result.accuracy is None and result.accuracy_ci_low is None


def test_drift_is_the_share_of_answers_that_changed_even_when_accuracy_holds() -> None:
    now = compute_quality_result(SET, [_item("a", "Paris", 1.0), _item("b", "Lyon", 0.0),
                                       _item("c", "Rome", 1.0), _item("d", "x", 1.0),
                                       _item("e", None, None)])
    baseline = {"a": "Paris", "b": "Lyon  ", "c": "Milan", "e": "Oslo"}  # d is new since then
    drifted = compute_drift(now, baseline, baseline_run_id=7)
    assert drifted.drift == pytest.approx(1 / 3)  # a, b (whitespace only), c compared; c changed
    assert (drifted.drift_compared, drifted.drift_baseline_run_id) == (3, 7)
    assert [i.changed for i in drifted.items] == [False, False, True, None, None]
    assert drifted.accuracy == now.accuracy


def test_no_common_answers_means_no_drift() -> None:
    now = compute_quality_result(SET, [_item("a", "x", 1.0)])
    drifted = compute_drift(now, {"z": "x"}, baseline_run_id=3)
    assert drifted.drift is None and drifted.drift_baseline_run_id is None
