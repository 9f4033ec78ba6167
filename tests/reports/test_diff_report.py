"""Rendering a config diff: aligned text, hover lines with a limit, and a Markdown table whose
cells show any value literally."""

from __future__ import annotations

import re

from tracker.inputs.config_diff import ABSENT, HIDDEN, Change
from tracker.reports.diff_report import (
    render_code_cell,
    render_diff_lines,
    render_diff_markdown,
    render_diff_text,
)

CHANGES = [Change("engine.kv_cache_dtype", ABSENT, "fp8"), Change("engine.max_num_seqs", 16, 4),
           Change("target.api_key_env", HIDDEN, HIDDEN)]


def test_text_lists_both_sides_and_one_aligned_line_per_change() -> None:
    text = render_diff_text("a.yaml (prod@1)", "b.yaml (prod@2)", CHANGES)
    assert text.splitlines() == [
        "base: a.yaml (prod@1)", "head: b.yaml (prod@2)",
        "  engine.kv_cache_dtype  (default) → fp8",
        "  engine.max_num_seqs    16 → 4",
        "  target.api_key_env     (hidden) → (hidden)",
        "3 differences ((default) = not set, the engine's default applies)"]
    assert "no difference" in render_diff_text("a", "b", [])


def test_lines_stop_at_the_limit_and_count_the_rest() -> None:
    assert render_diff_lines(CHANGES, limit=1) == ["engine.kv_cache_dtype: (default) → fp8",
                                                   "… and 2 more"]
    assert len(render_diff_lines(CHANGES)) == 3


def test_markdown_shows_values_as_code_and_the_markers_as_words() -> None:
    assert render_diff_markdown(CHANGES).splitlines() == [
        "| key | base | head |", "|---|---|---|",
        "| `engine.kv_cache_dtype` | (default) | `fp8` |",
        "| `engine.max_num_seqs` | `16` | `4` |",
        "| `target.api_key_env` | (hidden) | (hidden) |"]
    assert render_diff_markdown([]).startswith("No difference")


def test_a_value_holding_backticks_pipes_and_newlines_stays_one_literal_cell() -> None:
    assert render_code_cell("a`b") == "``a`b``"
    assert render_code_cell("``x``") == "``` ``x`` ```"
    assert render_code_cell("x | y\n# heading") == "`x \\| y # heading`"
    assert render_code_cell("<img src=x>") == "`<img src=x>`"
    row = render_diff_markdown([Change("note", "`a` | b", "![x](http://e/x.png)\n|")])
    (line,) = row.splitlines()[2:]
    assert line == "| `note` | `` `a` \\| b `` | `![x](http://e/x.png) \\|` |"
    assert len(re.findall(r"(?<!\\)\|", line)) == 4  # three cells' borders, no other pipe
