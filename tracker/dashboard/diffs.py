"""Differences between two nested mappings (config bodies, environments), as dotted paths."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tracker.analysis.attribution import ABSENT, compute_mapping_diff

MISSING = "(not set)"


@dataclass(frozen=True, slots=True)
class DiffEntry:
    path: str  # dotted, e.g. "engine.max_num_seqs"
    old: Any  # None with old_set False: the key is absent on that side
    new: Any
    old_set: bool = True
    new_set: bool = True

    @property
    def kind(self) -> str:
        if not self.old_set:
            return "added"
        if not self.new_set:
            return "removed"
        return "changed"


def compute_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[DiffEntry]:
    """Every path whose value differs, sorted by path (the analysis' own mapping diff)."""
    return [DiffEntry(change.path, None if change.old is ABSENT else change.old,
                      None if change.new is ABSENT else change.new,
                      old_set=change.old is not ABSENT, new_set=change.new is not ABSENT)
            for change in compute_mapping_diff(old, new)]


def render_value(value: Any, present: bool = True) -> str:
    if not present:
        return MISSING
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render_diff_lines(entries: list[DiffEntry], limit: int = 12) -> list[str]:
    """Plain text lines (``path: old → new``), at most ``limit`` plus a count of the rest."""
    lines = [f"{e.path}: {render_value(e.old, e.old_set)} → {render_value(e.new, e.new_set)}"
             for e in entries[:limit]]
    if len(entries) > limit:
        lines.append(f"… and {len(entries) - limit} more")
    return lines


def diff_frame(entries: list[DiffEntry], old_label: str, new_label: str) -> pd.DataFrame:
    """A table of the differences, values as text, for st.dataframe (never rendered as HTML)."""
    return pd.DataFrame(
        [(e.path, e.kind, render_value(e.old, e.old_set), render_value(e.new, e.new_set))
         for e in entries],
        columns=["key", "change", old_label, new_label],
    )
