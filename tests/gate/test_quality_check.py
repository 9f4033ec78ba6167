"""The gate's choice of runs and items for the paired quality check, on literal results."""

from __future__ import annotations

from datetime import UTC, datetime

from tracker.gate.gating import compute_quality_rows
from tracker.gate.quality_check import compute_pairs, compute_quality_comparison
from tracker.results import QualityItemResult, QualityResult, RunResult, RunStatus, VersionRef

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _quality(scores: dict[str, float | None], outputs: dict[str, str] | None = None,
             version: str = "v1", reused: int | None = None) -> QualityResult:
    outputs = outputs or {}
    items = tuple(QualityItemResult(item, "exact", None if score is None
                                    else outputs.get(item, f"answer {item}"), score)
                  for item, score in scores.items())
    answered = [i for i in items if i.score is not None]
    correct = sum(1 for i in answered if i.score == 1.0)
    return QualityResult("set", version, items, len(answered), correct,
                         correct / len(answered) if answered else None, None, None,
                         reused_from_run_id=reused)


def _run(run_id: int, quality: QualityResult | None) -> RunResult:
    ref = VersionRef("c", "x" * 64)
    return RunResult(run_id, RunStatus.COMPLETED, True, ref, VersionRef("s", "y" * 64), T0, T0,
                     "host", "0", {}, (), quality=quality)


def test_items_pair_by_id_and_an_unanswered_item_is_left_out() -> None:
    base = _quality({"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0})
    head = _quality({"b": 0.0, "a": 1.0, "c": 1.0, "d": None}, {"a": "answer  a"})
    pairs, flipped = compute_pairs(base, head)
    assert [(p.item_id, p.base_right, p.head_right, p.changed) for p in pairs] == [
        ("a", True, True, False),  # the same text once whitespace is collapsed
        ("b", True, False, False), ("c", False, True, False)]
    assert [(f.item_id, f.base_right) for f in flipped] == [("b", True), ("c", False)]


def test_the_first_run_with_answers_stands_for_its_side_and_says_whose_answers() -> None:
    base = [_run(1, None), _run(3, _quality({"a": 1.0, "b": 1.0}))]
    head = [_run(2, _quality({"a": 1.0, "b": 0.0}, reused=7))]
    comparison = compute_quality_comparison(base, head, None, 0.95)
    assert comparison is not None and comparison.paired is not None
    assert (comparison.base_run_id, comparison.head_run_id, comparison.head_asked_by) == (3, 2, 7)
    assert comparison.paired.table.base_only == 1
    assert [e.item_id for e in comparison.examples] == ["b"]


def test_no_quality_on_either_side_is_no_row_and_on_one_side_a_row_without_verdict() -> None:
    assert compute_quality_comparison([_run(1, None)], [_run(2, None)], None, 0.95) is None
    assert compute_quality_rows(None) == []
    one_sided = compute_quality_comparison([_run(1, _quality({"a": 1.0}))], [_run(2, None)],
                                           None, 0.95)
    (row,) = compute_quality_rows(one_sided)
    assert row.verdict is None and row.note == "no quality answers in the head run(s)"


def test_sides_that_asked_different_items_are_compared_on_those_both_answered() -> None:
    base = [_run(1, _quality({"a": 1.0, "b": 1.0, "c": 1.0}, version="v1"))]
    head = [_run(2, _quality({"b": 1.0, "c": 0.0, "z": 1.0}, version="v2"))]
    comparison = compute_quality_comparison(base, head, 0.02, 0.95)
    assert comparison is not None and comparison.paired is not None
    assert comparison.paired.table.pairs == 2
    assert comparison.note is not None and "compared on the 2 both answered" in comparison.note
    assert comparison.paired.verdict.min_effect == 0.02
