"""What every importer shares: the file read once (bytes, sha256, JSON), the run it becomes, and
the one error a bad file raises.

An importer maps another tool's result file onto ``tracker.results`` values; it reads the file
and nothing else (no store, no network). One ``ImportedRun`` per benchmark in the file, each with
one workload. A value the tool defines differently from the tracker is kept under its own
tool-prefixed name in ``ImportedRun.source_values`` (and the workload's ``params``), never under a
tracker name it does not mean.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracker.errors import UsageError
from tracker.redaction import register_secrets_in
from tracker.results import IMPORT_KEY, LatencyStats, WorkloadResult

FORMATS = ("vllm", "guidellm", "aiperf", "inference-perf", "llmd")


class ImportFormatError(UsageError):
    """The file is not the result file it was taken for (truncated, empty, another tool's)."""


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A result file as read: its name for messages, its bytes' sha256, and its text."""

    path: str
    sha256: str
    text: str

    def fail(self, expected: str, why: str) -> ImportFormatError:
        return ImportFormatError(f"{self.path}: not {expected}: {why}")


@dataclass(frozen=True, slots=True)
class ImportedRun:
    """One benchmark of a file, as a tracker run of one workload."""

    tool: str  # "vllm", "guidellm", "aiperf", "inference-perf", "llmd"
    tool_version: str | None  # None: the file does not say
    sha256: str
    benchmark: int  # its position in the file (0-based)
    started_at: datetime
    ended_at: datetime
    host: str
    workload: WorkloadResult
    source_values: Mapping[str, float] = field(default_factory=dict)  # tool-prefixed names
    notes: tuple[str, ...] = ()  # what the mapping could not carry, in words

    @property
    def environment(self) -> dict[str, Any]:
        """The run's environment: where it came from, under ``import``."""
        return {IMPORT_KEY: {"tool": self.tool, "tool_version": self.tool_version,
                           "sha256": self.sha256, "benchmark": self.benchmark,
                           "notes": list(self.notes)}}


def read_source(path: str | Path) -> SourceFile:
    """The file's bytes hashed and decoded; a missing or unreadable file is a usage error."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read it ({exc.strerror or exc}); check the "
                                "path") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{path}: not a UTF-8 text file (byte {exc.start}); expected "
                                f"a result file of one of {', '.join(FORMATS)}") from None
    return SourceFile(str(path), hashlib.sha256(data).hexdigest(), text)


TOO_DEEP = "its JSON nests deeper than any result file does (thousands of levels)"


def parse_json(source: SourceFile, expected: str) -> Any:
    """The file's one JSON document; empty or cut short is an error naming what was expected."""
    if not source.text.strip():
        raise source.fail(expected, "the file is empty")
    try:
        parsed = json.loads(source.text)
    except json.JSONDecodeError as exc:
        raise source.fail(expected, f"invalid JSON at line {exc.lineno} column {exc.colno} "
                                    f"({exc.msg}); the file may be truncated") from None
    except RecursionError:
        raise source.fail(expected, TOO_DEEP) from None
    register_secrets_in(parsed)  # a key the tool recorded is hidden wherever else it appears
    return parsed


def require_object(source: SourceFile, value: Any, expected: str, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise source.fail(expected, f"expected a JSON object, got {type(value).__name__}; "
                                    f"no {key!r} key")
    return value


def number(source: SourceFile, body: Mapping[str, Any], key: str, expected: str) -> float:
    """``body[key]`` as a finite number, else an error naming the key."""
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise source.fail(expected, f"{key!r} must be a number (got {value!r})")
    return float(value)


def optional_number(body: Mapping[str, Any], key: str) -> float | None:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def latency_stats(count: int, values_s: Mapping[str, float | None]) -> LatencyStats | None:
    """Stats from mean/median/std/p90/p99 in seconds; None unless all five are there."""
    names = ("mean", "median", "std", "p90", "p99")
    found = [values_s.get(name) for name in names]
    if count <= 0 or any(value is None for value in found):
        return None
    mean_s, median_s, std_s, p90_s, p99_s = (float(v) for v in found if v is not None)
    return LatencyStats(count, mean_s, median_s, std_s, p90_s, p99_s)


def utc(value: datetime) -> datetime:
    """A naive timestamp is taken as UTC (the tools write local time without a zone)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
