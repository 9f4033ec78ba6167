"""How the tools' answers are shaped: JSON values with their units, every string redacted.

``to_json`` is the one exit: every answer passes it, so every string (keys included) goes through
the one redaction (``tracker.redaction``), times become ISO 8601 in UTC, and a value that is not a
number (NaN, infinity) becomes ``null`` (not measured), never a stand-in. Values stay in the
metric registry's SI units (seconds, bytes, tokens/s) and travel with their unit. ``shown`` is the
same value as the gate's report writes it (``483.68 ms``), for a human-readable line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from tracker.inputs.config_diff import Change
from tracker.metrics import REGISTRY
from tracker.redaction import redact_text
from tracker.reports.gate_report import render_value

SHORT_VERSION = 12  # hex digits of a config version, as `tracker runs` shows it


def to_json(value: Any) -> Any:
    """``value`` as JSON-ready data: strings redacted, times in ISO 8601, no NaN."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, Enum):
        return to_json(value.value)
    if isinstance(value, Mapping):
        return {redact_text(str(key)): to_json(item) for key, item in value.items()}
    if isinstance(value, Sequence | set | frozenset):
        return [to_json(item) for item in value]
    raise TypeError(f"no JSON shape for {type(value).__name__}")


def iso(moment: datetime) -> str:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")


def short(version: str) -> str:
    return version[:SHORT_VERSION]


def metric_json(name: str) -> dict[str, Any]:
    """A metric's unit, direction and definition (the registry's). Unknown names say so."""
    metric = REGISTRY.get(name)
    if metric is None:
        return {"name": name, "unit": None, "direction": None,
                "description": "not in the metric registry"}
    return {"name": name, "unit": metric.unit, "direction": metric.direction.value,
            "description": metric.description}


def unit_of(name: str) -> str | None:
    metric = REGISTRY.get(name)
    return None if metric is None else metric.unit


def shown(value: float | None, metric: str) -> str | None:
    """The value as the gate's report writes it, in the metric's display unit."""
    if value is None or not math.isfinite(value):
        return None
    unit = unit_of(metric)
    return f"{value:.4g}" if unit is None else render_value(value, unit)


def percent(fraction: float | None) -> str | None:
    return None if fraction is None or not math.isfinite(fraction) else f"{fraction:+.1%}"


def changes_json(changes: Sequence[Change]) -> list[dict[str, Any]]:
    """The one config diff's changes: the key, what happened to it, the values either side
    (``(default)`` when not set, ``(hidden)`` when it looks like a secret)."""
    return [{"path": change.path, "kind": change.kind.value, "old": change.old,
             "new": change.new} for change in changes]
