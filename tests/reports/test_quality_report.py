"""The gate's quality section: figures from the paired verdict, outside answers redacted and
shown as literal text (no Markdown, no HTML, no table-breaking pipes)."""

from __future__ import annotations

import json
import re

from tracker.analysis import PairedItem, compute_paired_quality
from tracker.gate.quality_check import FlippedItem, QualityComparison
from tracker.reports.quality_report import (
    render_accuracy_change,
    render_quality_json,
    render_quality_markdown,
)

SECRET = "sk-proj-AbCdEf0123456789xyz"
HOSTILE = f"<img src=x onerror=alert(1)> | **bold** key {SECRET}\nsecond line"


def _comparison() -> QualityComparison:
    pairs = [PairedItem(f"q{i}", True, i >= 60, i < 60) for i in range(1000)]
    paired = compute_paired_quality(pairs)
    examples = (FlippedItem("q0", True, "42", HOSTILE), FlippedItem("q1", True, None, "7"))
    return QualityComparison("mixed-1k", 1, 2, None, 1, paired, examples)


def test_the_section_states_accuracy_interval_p_drift_and_the_detectable_drop() -> None:
    comparison = _comparison()
    assert comparison.paired is not None
    text = "\n".join(render_quality_markdown(comparison))
    assert "**accuracy** 100.0% → 94.0%: -6.0 points [" in text
    assert "60 items right on base and wrong on head, 0 the reverse" in text
    assert "drift: 60 of 1000 answers changed text" in text
    drop = comparison.paired.detectable_drop * 100
    assert f"detects a drop of **{drop:.1f} points** at 80% power" in text
    assert "head answers: run 2 (reused from run 1)" in text
    assert render_accuracy_change(comparison.paired.verdict).startswith("-6.0 pts [")


def test_flipped_answers_are_redacted_and_literal() -> None:
    lines = render_quality_markdown(_comparison())
    row = next(line for line in lines if line.startswith("| q0 |"))
    assert SECRET not in row and "\\[redacted\\]" in row
    assert "<img" not in row and "&lt;img" in row
    assert "**bold**" not in row
    assert len(re.split(r"(?<!\\)\|", row)) == 6  # four cells: the answer's pipe is escaped
    assert "\n" not in row
    assert any(line.startswith("| q1 |") and "(no answer)" in line for line in lines)


def test_the_json_block_carries_the_table_and_redacted_examples() -> None:
    block = render_quality_json(_comparison())
    assert block is not None
    assert (block["items"], block["right_on_base_only"], block["right_on_head_only"]) == \
        (1000, 60, 0)
    assert block["head_reused_from_run_id"] == 1 and block["outcome"] == "regression"
    assert SECRET not in json.dumps(block)
    assert render_quality_json(None) is None


def test_a_side_without_answers_is_said_not_compared() -> None:
    comparison = QualityComparison("basic", 1, None, None, None, None,
                                   note="no quality answers in the head run(s)")
    assert "not compared: no quality answers in the head run\\(s\\)" in \
        "\n".join(render_quality_markdown(comparison))
    assert render_quality_json(comparison) == {
        "set": "basic", "base_run_id": 1, "head_run_id": None, "base_reused_from_run_id": None,
        "head_reused_from_run_id": None, "note": "no quality answers in the head run(s)",
        "compared": False}
