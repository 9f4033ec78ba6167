"""What the store returns besides ``tracker.results`` values: small frozen listings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tracker.results import NATIVE_SOURCE, RunStatus


@dataclass(frozen=True, slots=True)
class RunListing:
    """One line of ``tracker runs``. Request totals are summed over the run's workloads."""

    run_id: int
    status: RunStatus
    simulated: bool
    config_name: str
    config_version: str  # sha256 hex
    suite_name: str
    started_at: datetime
    ended_at: datetime | None
    workloads: int
    completed: int
    failed: int
    source: str = NATIVE_SOURCE  # or the tool it was imported from, or gate / bisect


@dataclass(frozen=True, slots=True)
class ConfigVersionRow:
    """One version of a named serving config, as first seen by the store."""

    version: str  # sha256 hex of the canonical form
    first_seen_at: datetime
    canonical: Mapping[str, Any]

    @property
    def short_version(self) -> str:
        return self.version[:12]
