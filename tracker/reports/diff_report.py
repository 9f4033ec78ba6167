"""Render a config diff (``tracker.inputs.config_diff``): plain text lines for a terminal or a
hover, and a Markdown table for a PR comment.

The values were redacted by the diff. Here they are only laid out. In Markdown every key and
value is a code span fenced by more backticks than it holds, on one line, with its pipes escaped,
so a value shows as the characters it is and never as markup or a broken table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tracker.inputs.config_diff import ABSENT, HIDDEN, Change, render_value

_BACKTICKS = re.compile(r"`+")


def render_diff_lines(changes: Sequence[Change], limit: int | None = None) -> list[str]:
    """One ``path: old → new`` line per change. With ``limit``, at most that many are given,
    and a count of the rest."""
    shown = changes if limit is None else changes[:limit]
    lines = [change.render() for change in shown]
    if len(changes) > len(shown):
        lines.append(f"… and {len(changes) - len(shown)} more")
    return lines


def render_diff_text(base_title: str, head_title: str, changes: Sequence[Change]) -> str:
    """``tracker diff``'s output: both sides, then one aligned line per changed key."""
    lines = [f"base: {base_title}", f"head: {head_title}"]
    if not changes:
        lines.append("no difference: the two configs have the same canonical form")
        return "\n".join(lines)
    width = max(len(change.path) for change in changes)
    lines += [f"  {c.path:<{width}}  {render_value(c.old)} → {render_value(c.new)}"
              for c in changes]
    lines.append(f"{len(changes)} difference{'s' if len(changes) != 1 else ''} "
                 "((default) = not set, the engine's default applies)")
    return "\n".join(lines)


def render_diff_markdown(changes: Sequence[Change]) -> str:
    """A Markdown table ``key | base | head``, with the markers (default) and (hidden) as words."""
    if not changes:
        return "No difference in the config (same canonical form)."
    rows = ["| key | base | head |", "|---|---|---|"]
    rows += [f"| {render_code_cell(c.path)} | {_value_cell(c.old)} | {_value_cell(c.new)} |"
             for c in changes]
    return "\n".join(rows)


def _value_cell(value: Any) -> str:
    if value is ABSENT or value is HIDDEN:
        return str(value)
    return render_code_cell(render_value(value))


def render_code_cell(text: str) -> str:
    """``text`` as a code span for a Markdown table cell: on one line, fenced by one backtick
    more than its longest run of them (padded when it starts or ends with one), pipes escaped."""
    flat = " ".join(text.split())
    if not flat:
        return ""
    longest = max((len(run) for run in _BACKTICKS.findall(flat)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {flat} " if flat.startswith("`") or flat.endswith("`") else flat
    return f"{fence}{padded}{fence}".replace("|", "\\|")
