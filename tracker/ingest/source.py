"""What every importer shares: the file read once (bytes, sha256, JSON), the run it becomes, and
the one error a bad file raises.

An importer maps another tool's result file onto ``tracker.results`` values. It reads the file
and nothing else (no store, no network). One ``ImportedRun`` per benchmark in the file, each with
one workload. A value the tool defines differently from the tracker is kept under its own
tool-prefixed name in ``ImportedRun.source_values`` (and the workload's ``params``), never under a
tracker name it does not mean.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tracker.errors import UsageError
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.redaction import register_secrets_in
from tracker.results import IMPORT_KEY, LatencyStats, WorkloadResult

FORMATS = ("vllm", "guidellm", "aiperf", "inference-perf", "llmd", "tracker")
# Limits no real result file reaches; each refusal says which and why.
MAX_FILE_BYTES = 256 * 1024 * 1024  # GuideLLM's file with every request of a long run: ~50 MB
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)  # a run's start and end lie in [EARLIEST, LATEST)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)
MAX_SECONDS = 10_000_000.0  # a duration or latency (116 days)
MAX_COUNT = 10**12  # requests, tokens or chunks of one benchmark
MAX_NAME_CHARS = 160  # a workload's name (the suites' own limit)
FIX = "check that this is the tool's own, unedited result file"


class ImportFormatError(UsageError):
    """The file is not the result file it was taken for (truncated, empty, another tool's)."""


class BadValue(ImportFormatError):
    """A value of the wrong kind or out of range, raised where the file's name is not at hand:
    ``load_imported`` puts the file in front (``in_file``)."""

    def in_file(self, path: str) -> ImportFormatError:
        return ImportFormatError(f"{path}: {self}")


def bad_value(where: str, problem: str, value: Any) -> BadValue:
    return BadValue(f"{where}: {problem} (got {_short(value)}); {FIX}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}... ({len(text)} characters)"


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

    tool: str  # "vllm", "guidellm", "aiperf", "inference-perf", "llmd", "tracker"
    tool_version: str | None  # None: the file does not say
    sha256: str
    benchmark: int  # its position in the file (0-based)
    started_at: datetime
    ended_at: datetime
    host: str
    workload: WorkloadResult
    source_values: Mapping[str, float] = field(default_factory=dict)  # tool-prefixed names
    notes: tuple[str, ...] = ()  # what the mapping could not carry, in words
    simulated: bool = False  # measured on the tracker's simulator (only its own JSON says so)
    config_name: str | None = None  # the config and suite the file names (the tracker's own
    suite_name: str | None = None  # JSON); None: the user names them (--config, --suite)

    @property
    def environment(self) -> dict[str, Any]:
        """The run's environment: where it came from, under ``import``."""
        return {IMPORT_KEY: {"tool": self.tool, "tool_version": self.tool_version,
                           "sha256": self.sha256, "benchmark": self.benchmark,
                           "notes": list(self.notes)}}


def read_source(path: str | Path) -> SourceFile:
    """The file's bytes hashed and decoded. A missing or unreadable file, one that is not a
    regular file (a pipe, a device) or one over ``MAX_FILE_BYTES`` is a usage error, told
    before anything is read."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise ImportFormatError(f"{path}: is a directory; give the result file in it")
        if not stat.S_ISREG(info.st_mode):
            raise ImportFormatError(f"{path}: not a regular file (a pipe, a device or a socket); "
                                    "save the result to a file and import that")
        if info.st_size > MAX_FILE_BYTES:
            raise ImportFormatError(_too_big(path, info.st_size))
        with open(path, "rb") as handle:  # never more than the limit, whatever stat said
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read it ({exc.strerror or exc}); check the "
                                "path") from None
    if len(data) > MAX_FILE_BYTES:
        raise ImportFormatError(_too_big(path, len(data)))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{path}: not a UTF-8 text file (byte {exc.start}); expected "
                                f"a result file of one of {', '.join(FORMATS)}") from None
    return SourceFile(str(path), hashlib.sha256(data).hexdigest(), text)


def _too_big(path: str | Path, size_bytes: int) -> str:
    return (f"{path}: the file holds {size_bytes} bytes, over the limit of {MAX_FILE_BYTES} "
            "(256 MiB) for a result file; refused: check that this is the result file you meant")


TOO_DEEP = "its JSON nests deeper than any result file does (thousands of levels)"


def parse_json(source: SourceFile, expected: str) -> Any:
    """The file's one JSON document. A file that is empty or cut short is an error naming what
    was expected."""
    if not source.text.strip():
        raise source.fail(expected, "the file is empty")
    try:
        parsed = parse_untrusted_json(source.text)
    except UntrustedJSONError as exc:
        raise source.fail(expected, TOO_DEEP if exc.too_deep else (
            f"invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg}); the file may "
            "be truncated")) from None
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
    try:
        return finite(key, value)
    except BadValue:
        raise source.fail(expected, f"{key!r} must be a finite number (got {_short(value)})") \
            from None


def optional_number(body: Mapping[str, Any], key: str) -> float | None:
    """``body[key]`` as a float, or None when absent or null. A string, a container, NaN or an
    infinity is refused (``BadValue``): a tool writes a number or nothing."""
    value = body.get(key)
    if value is None:
        return None
    return finite(key, value)


def finite(where: str, value: Any) -> float:
    """A JSON number as a finite float, else ``BadValue`` naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_value(where, "must be a number", value)
    try:
        number_ = float(value)
    except OverflowError:  # an integer of hundreds of digits
        raise bad_value(where, "must be a finite number", value) from None
    if not math.isfinite(number_):
        raise bad_value(where, "must be a finite number", value)
    return number_


def instant(where: str, value: datetime) -> datetime:
    """A time within [EARLIEST, LATEST), as UTC."""
    moment = utc(value)
    if not EARLIEST <= moment < LATEST:
        raise bad_value(where, f"must lie between {EARLIEST:%Y} and {LATEST:%Y}", value.isoformat())
    return moment


def epoch_instant(where: str, seconds: float) -> datetime:
    """Seconds since the epoch as a UTC time within [EARLIEST, LATEST)."""
    if not EARLIEST.timestamp() <= seconds < LATEST.timestamp():
        raise bad_value(where, f"must be a time between {EARLIEST:%Y} and {LATEST:%Y} in "
                               "seconds since 1970", seconds)
    return datetime.fromtimestamp(seconds, UTC)


def duration(where: str, seconds: float) -> timedelta:
    """A duration in seconds within [0, MAX_SECONDS]."""
    if not 0 <= seconds <= MAX_SECONDS:
        raise bad_value(where, f"must be a duration of 0 to {MAX_SECONDS:.0f} seconds", seconds)
    return timedelta(seconds=seconds)


def count(where: str, value: float | int | None) -> int:
    """A count (requests, tokens) within [0, MAX_COUNT]. None counts as 0."""
    if value is None:
        return 0
    if not 0 <= value <= MAX_COUNT:
        raise bad_value(where, f"must be a count of 0 to {MAX_COUNT:.0e}", value)
    return int(value)


def latency_stats(count: int, values_s: Mapping[str, float | None]) -> LatencyStats | None:
    """Stats from mean/median/std/p90/p99 in seconds, or None unless all five are there."""
    names = ("mean", "median", "std", "p90", "p99")
    found = [values_s.get(name) for name in names]
    if count <= 0 or any(value is None for value in found):
        return None
    mean_s, median_s, std_s, p90_s, p99_s = (float(v) for v in found if v is not None)
    return LatencyStats(count, mean_s, median_s, std_s, p90_s, p99_s)


def utc(value: datetime) -> datetime:
    """A naive timestamp is taken as UTC (the tools write local time without a zone)."""
    try:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+05:00 has no UTC time
        raise bad_value("time", f"must lie between {EARLIEST:%Y} and {LATEST:%Y}",
                        value.isoformat()) from None


def mapping(body: Mapping[str, Any], key: str, where: str | None = None) -> Mapping[str, Any]:
    """``body[key]`` when it is an object, or {} when absent or null. Anything else (a list, a
    string where an object belongs) is refused (``BadValue`` naming ``where`` or ``key``)."""
    found = body.get(key)
    if found is None:
        return {}
    if not isinstance(found, Mapping):
        raise bad_value(where or key, "must be an object", found)
    return found
