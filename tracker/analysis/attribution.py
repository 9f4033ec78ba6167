"""What changed around a change point: the config diff and the environment diff.

Pure: it is given the config bodies and environments of the runs in a series (oldest first) and
the change point's index. The change may sit a night or two off the estimated location, so every
difference between consecutive runs within ``tolerance`` of it is reported. "Nothing changed" is
an answer: then the cause is likely the engine itself, the hardware, the load or noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HIDDEN = "(hidden)"
ABSENT = "(default)"
# environment keys that identify a machine run to run but say nothing about its performance
VOLATILE_ENVIRONMENT_KEYS = frozenset({"pid", "started_at", "hostname_id"})


@dataclass(frozen=True, slots=True)
class Change:
    path: str  # dotted key path, e.g. "engine.max_num_seqs"
    old: Any  # ABSENT when the key was not set (the default applied)
    new: Any
    at: int | None = None  # index of the first run with the new value, when known

    def render(self) -> str:
        return f"{self.path}: {render_value(self.old)} → {render_value(self.new)}"


@dataclass(frozen=True, slots=True)
class Attribution:
    index: int
    config_changes: tuple[Change, ...]
    environment_changes: tuple[Change, ...]

    @property
    def nothing_changed(self) -> bool:
        return not self.config_changes and not self.environment_changes

    def summary(self) -> str:
        if self.nothing_changed:
            return ("nothing changed in the config or the environment: likely the engine, "
                    "the hardware, the load or noise")
        parts = [c.render() for c in (*self.config_changes, *self.environment_changes)]
        return "; ".join(parts)


def render_value(value: Any) -> str:
    """A config or environment value as YAML would show it (markers stay as they are)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _flatten(node: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def compute_mapping_diff(old: Mapping[str, Any], new: Mapping[str, Any], *,
                         ignore: frozenset[str] = frozenset()) -> list[Change]:
    """Every leaf key whose value differs, sorted by path; a missing key shows as ABSENT."""
    before, after = _flatten(old), _flatten(new)
    changes = []
    for path in sorted(set(before) | set(after)):
        if path.split(".")[-1] in ignore:
            continue
        old_value, new_value = before.get(path, ABSENT), after.get(path, ABSENT)
        if old_value != new_value:
            changes.append(Change(path, old_value, new_value))
    return changes


def compute_attribution(
    index: int,
    configs: Sequence[Mapping[str, Any]],
    environments: Sequence[Mapping[str, Any]],
    *,
    tolerance: int = 2,
) -> Attribution:
    """Config and environment differences between consecutive runs around ``index`` (the first
    run of the new level), within ``tolerance`` runs either side."""
    if len(configs) != len(environments):
        raise ValueError(f"configs ({len(configs)}) and environments ({len(environments)}) "
                         "must describe the same runs")
    if not 0 <= index < len(configs):
        raise ValueError(f"index {index} is outside the series of {len(configs)} runs")
    first, last = max(1, index - tolerance), min(len(configs) - 1, index + tolerance)
    config_changes: list[Change] = []
    environment_changes: list[Change] = []
    for at in range(first, last + 1):
        config_changes += [Change(c.path, c.old, c.new, at)
                           for c in compute_mapping_diff(configs[at - 1], configs[at])]
        environment_changes += [
            Change(c.path, c.old, c.new, at)
            for c in compute_mapping_diff(environments[at - 1], environments[at],
                                          ignore=VOLATILE_ENVIRONMENT_KEYS)]
    return Attribution(index, tuple(config_changes), tuple(environment_changes))
