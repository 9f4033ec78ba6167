"""Measured values: frozen, unit-named, no I/O.

Durations are seconds, sizes are bytes, counts are plain ints; ``None`` means "not measured".
Definitions (written once, here, and repeated in README.md and the result JSON):

- ``start_s``: when the request body had been written to the socket, in seconds since the
  workload's clock origin (a monotonic clock).
- ``ttft_s``: from ``start_s`` to the first streamed chunk whose delta carries non-empty content.
  A role-only or empty first chunk is not a token.
- ``itl_s``: every gap between consecutive content chunks; chunks that arrive in the same network
  read share one timestamp (so a gap can be 0).
- ``e2el_s``: from ``start_s`` to the end of the stream.
- ``tpot_s``: per request, ``(e2el_s - ttft_s) / (output_tokens - 1)``; not defined for one token.
- ``output_tokens``: the server's ``usage.completion_tokens`` (asked for with
  ``stream_options.include_usage``); when the server sends no usage, the number of content chunks,
  and ``output_tokens_source`` says which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class TokenSource(StrEnum):
    USAGE = "usage"  # reported by the server
    CHUNKS = "chunks"  # counted content chunks (fallback; one chunk may carry several tokens)
    CLIENT = "client"  # estimated by the tracker's own word tokenizer (input only)
    MIXED = "mixed"  # a workload whose requests used different sources


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    PARTIAL = "partial"  # some workloads or requests did not finish; what finished is kept
    FAILED = "failed"  # nothing could be measured


@dataclass(frozen=True, slots=True)
class RequestRecord:
    index: int
    start_s: float
    ttft_s: float | None
    e2el_s: float | None
    itl_s: tuple[float, ...]
    output_tokens: int | None
    output_tokens_source: TokenSource | None
    input_tokens: int | None
    input_tokens_source: TokenSource | None
    error_class: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_class is None

    @property
    def tpot_s(self) -> float | None:
        if self.ttft_s is None or self.e2el_s is None or self.output_tokens is None:
            return None
        if self.output_tokens < 2:
            return None
        return (self.e2el_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Distribution of one latency over a workload's successful requests, in seconds."""

    count: int
    mean_s: float
    median_s: float
    std_s: float
    p90_s: float
    p99_s: float


@dataclass(frozen=True, slots=True)
class WorkloadSummary:
    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput_per_s: float | None
    output_throughput_tokens_per_s: float | None
    total_token_throughput_tokens_per_s: float | None
    ttft: LatencyStats | None
    tpot: LatencyStats | None
    itl: LatencyStats | None
    e2el: LatencyStats | None
    output_tokens_source: TokenSource | None
    input_tokens_source: TokenSource | None
    errors: Mapping[str, int] = field(default_factory=dict)  # error class -> count


@dataclass(frozen=True, slots=True)
class WorkloadResult:
    name: str
    concurrency: int
    num_requests: int
    warmup_requests: int
    params: Mapping[str, Any]  # the workload's canonical settings, for display and export
    started_at: datetime
    ended_at: datetime
    records: tuple[RequestRecord, ...]
    summary: WorkloadSummary
    complete: bool = True  # False when the workload was cut short (interrupt, target died)


@dataclass(frozen=True, slots=True)
class VersionRef:
    name: str
    version: str


@dataclass(frozen=True, slots=True)
class RunResult:
    run_id: int
    status: RunStatus
    simulated: bool
    config: VersionRef
    suite: VersionRef
    started_at: datetime
    ended_at: datetime | None
    host: str
    tracker_version: str
    environment: Mapping[str, Any]
    workloads: tuple[WorkloadResult, ...]
    status_reason: str | None = None
    config_body: Mapping[str, Any] = field(default_factory=dict)  # canonical config, no secrets
