"""What changed around a change point: the config diff and the environment diff.

Pure: it is given the config bodies and environments of the runs in a series (oldest first) and
the change point's index. The diff itself is the one config diff (``tracker.inputs.config_diff``,
secrets hidden). The change may sit a night or two off the estimated location, so every
difference between consecutive runs within ``tolerance`` of it is reported. "Nothing changed" is
an answer: then the cause is likely the engine itself, the hardware, the load or noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tracker.inputs.config_diff import Change, compute_config_diff

# environment keys that identify a machine run to run but say nothing about its performance
VOLATILE_ENVIRONMENT_KEYS = frozenset({  # differ between runs of one setup: never a cause
    "pid", "started_at", "hostname_id", "port", "log_path", "startup_s", "model_load_s"})
ATTRIBUTION_TOLERANCE = 2  # runs either side of a change point's estimated location


def compute_attribution_window(index: int, count: int,
                               tolerance: int = ATTRIBUTION_TOLERANCE) -> range:
    """The runs ``at`` (of ``count``, each compared with the run before it) within ``tolerance``
    of ``index``: where a change point's cause is looked for."""
    return range(max(1, index - tolerance), min(count - 1, index + tolerance) + 1)


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


def compute_attribution(
    index: int,
    configs: Sequence[Mapping[str, Any]],
    environments: Sequence[Mapping[str, Any]],
    *,
    tolerance: int = ATTRIBUTION_TOLERANCE,
) -> Attribution:
    """Config and environment differences between consecutive runs around ``index`` (the first
    run of the new level), within ``tolerance`` runs either side."""
    if len(configs) != len(environments):
        raise ValueError(f"configs ({len(configs)}) and environments ({len(environments)}) "
                         "must describe the same runs")
    if not 0 <= index < len(configs):
        raise ValueError(f"index {index} is outside the series of {len(configs)} runs")
    config_changes: list[Change] = []
    environment_changes: list[Change] = []
    for at in compute_attribution_window(index, len(configs), tolerance):
        config_changes += [replace(c, at=at)
                           for c in compute_config_diff(configs[at - 1], configs[at])]
        environment_changes += [
            replace(c, at=at)
            for c in compute_config_diff(environments[at - 1], environments[at],
                                         ignore=VOLATILE_ENVIRONMENT_KEYS)]
    return Attribution(index, tuple(config_changes), tuple(environment_changes))
