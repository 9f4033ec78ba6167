"""The one config diff: what differs between two nested mappings (config bodies, environments).

Pure. Every leaf whose value differs is a ``Change`` at its dotted key path, sorted by path. A key
set on one side only shows ``ABSENT`` on the other (rendered ``(default)``: not set, the
engine's default applies). Redaction is built in: every string passes ``tracker.redaction``
(a key inside a longer text becomes ``[redacted]``), and a value that still looks like a secret,
or sits under a key that names one, comes out as ``HIDDEN``. So a diff may be printed, stored,
rendered or sent as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tracker.inputs.config_secrets import is_secret_key, looks_like_secret_value
from tracker.redaction import redact_data


class Marker(StrEnum):
    """A value that is not one: the key was not set, or its value is not shown."""

    ABSENT = "(default)"
    HIDDEN = "(hidden)"


ABSENT = Marker.ABSENT
HIDDEN = Marker.HIDDEN


@dataclass(frozen=True, slots=True)
class Change:
    """One key whose value differs between the two sides."""

    path: str  # dotted key path, e.g. "engine.max_num_seqs"
    old: Any  # ABSENT when the key was not set; HIDDEN when the value looks like a secret
    new: Any
    at: int | None = None  # index of the first run with the new value, when known

    @property
    def kind(self) -> ChangeKind:
        if self.old is ABSENT:
            return ChangeKind.ADDED
        if self.new is ABSENT:
            return ChangeKind.REMOVED
        return ChangeKind.CHANGED

    def render(self) -> str:
        """``path: old → new``, one line of plain text."""
        return f"{self.path}: {render_value(self.old)} → {render_value(self.new)}"


class ChangeKind(StrEnum):
    """What a change did to its key: set it, unset it, or gave it another value."""

    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


def render_value(value: Any) -> str:
    """A config or environment value as YAML and JSON show it: strings (and the markers) as they
    are, ``true``/``false``, ``null``, numbers, lists and mappings as JSON."""
    if isinstance(value, str):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def compute_config_diff(old: Mapping[str, Any], new: Mapping[str, Any], *,
                        ignore: frozenset[str] = frozenset()) -> list[Change]:
    """Every leaf key whose value differs, sorted by path, values redacted. Keys whose last
    part is in ``ignore`` are left out."""
    before, after = flatten_paths(old), flatten_paths(new)
    changes = []
    for path in sorted(set(before) | set(after)):
        if path.rsplit(".", 1)[-1] in ignore:
            continue
        old_value, new_value = before.get(path, ABSENT), after.get(path, ABSENT)
        if (old_value is ABSENT) != (new_value is ABSENT) or old_value != new_value:
            changes.append(Change(path, _shown(path, old_value), _shown(path, new_value)))
    return changes


def flatten_paths(node: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every leaf by its dotted path (``engine.max_num_seqs``). An empty mapping is a leaf."""
    flat: dict[str, Any] = {}
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_paths(value, path + "."))
        else:
            flat[path] = value
    return flat


def _shown(path: str, value: Any) -> Any:
    """The value through the one redaction, or ``HIDDEN`` where what is left still looks like a
    secret (the config check's rule is stricter than the redaction) or the key names one."""
    if value is ABSENT:
        return value
    redacted = redact_data(value)
    return HIDDEN if _looks_secret(path, redacted) else redacted


def _looks_secret(path: str, value: Any) -> bool:
    if isinstance(value, list):
        return any(_looks_secret(path, item) for item in value)
    if not isinstance(value, str):
        return False
    return looks_like_secret_value(value) or is_secret_key(path.rsplit(".", 1)[-1])
