"""Measured values: frozen, unit-named, no I/O.

Durations are seconds, sizes are bytes, counts are plain ints. ``None`` means "not measured".
Definitions (written once, here, and repeated in README.md and the result JSON):

- ``start_s``: when the request body had been written to the socket, in seconds since the
  workload's clock origin (a monotonic clock).
- ``ttft_s``: from ``start_s`` to the first streamed chunk whose delta carries non-empty content.
  A role-only or empty first chunk is not a token.
- ``itl_s``: every gap between consecutive content chunks. Chunks that arrive in the same network
  read share one timestamp (so a gap can be 0).
- ``e2el_s``: from ``start_s`` to the end of the stream.
- ``tpot_s``: per request, ``(e2el_s - ttft_s) / (output_tokens - 1)``, not defined for one token.
- ``output_tokens``: the server's ``usage.completion_tokens`` (asked for with
  ``stream_options.include_usage``). When the server sends no usage, it is the number of content
  chunks, and ``output_tokens_source`` says which. ``output_chunks`` is always the content-chunk
  count. A chunk may carry several tokens (vLLM batches them when the client falls behind), so the
  server's count is checked against ``output_text_tokens``, the model's tokenizer's count of the
  text received, where a tokenizer is known (``tracker.load.summary``).
- ``scheduled_start_s`` (open loop only): when the request was planned to start (for a trace,
  its row's time). The scheduled TTFT and E2E latency are measured from it, so client or server
  queueing is not hidden.
- ``requested_input_tokens``: the prompt length the suite asked for, in the tokenizer it was built
  with (None: it asked for none, e.g. a conversation's later turns). ``input_tokens`` beside it is
  the server's ``usage.prompt_tokens`` when it sent one, so a mismatch is visible.
- ``cached_input_tokens``: the prompt tokens the server says it served from its prefix cache
  (``usage.prompt_tokens_details.cached_tokens``, which vLLM with
  ``--enable-prompt-tokens-details``, llama.cpp and SGLang report). It is None when the server
  did not say (0 is a measured miss).
- ``session``, ``turn`` (multi-turn workloads only): the conversation's position among the
  workload's measured ones (0-based, like ``index``) and the turn within it (1-based, and for a
  sub-agent branch's request its depth: the requests before it on its path plus one).
- session duration (``compute_session_durations``): per session without a failed request, from
  its first request's send to its last answer's end (think time, tool latencies and sub-agent
  branches included): the time to the session's end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import numpy as np

IMPORT_KEY = "import"  # a run's environment entry when it was imported from another tool's file
ORIGIN_KEY = "origin"  # a run's environment entry when a gate or a bisection ran it
NATIVE_SOURCE = "native"  # the source of a run the tracker measured itself, for the history
# A run's source, the one rule (``compute_run_source``; the store keeps it in ``runs.source``):
# the first of these environment fields a run has, else native.
RUN_SOURCE_FIELDS = ((IMPORT_KEY, "tool"), (ORIGIN_KEY, "kind"))
SERVER_CHECK_KEY = "server_check"  # a run's environment entry: what the server said about
# itself and the warnings where it contradicts the config (tracker.targets.server_check)


def compute_run_warnings(environment: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The measurement warnings a run carries (its server check's), each a fact and a remedy,
    or () for a run without any (or stored before the check existed)."""
    check = environment.get(SERVER_CHECK_KEY) if isinstance(environment, Mapping) else None
    warnings = check.get("warnings") if isinstance(check, Mapping) else None
    if not isinstance(warnings, Sequence) or isinstance(warnings, str):
        return ()
    return tuple(str(w) for w in warnings)


class RunOrigin(StrEnum):
    """Who measured a run that is not part of a config's history: a PR gate's rounds (base and
    head, whatever files or refs they came from) or a bisection's probes (configs with some of
    a change's fields). Their runs are kept and listed, but the nightly series, the watch, the
    attribution and the gate's noise prior follow the history only."""

    GATE = "gate"
    BISECT = "bisect"


def compute_run_source(environment: Mapping[str, Any] | None) -> str:
    """``native`` for a run of the history the tracker measured, else the tool it was imported
    from (``tracker import`` writes ``environment["import"]["tool"]``) or who ran it apart from
    the history (``environment["origin"]["kind"]``: ``gate`` or ``bisect``)."""
    for key, name in RUN_SOURCE_FIELDS:
        found = environment.get(key) if isinstance(environment, Mapping) else None
        if isinstance(found, Mapping):
            return str(found.get(name))
    return NATIVE_SOURCE


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
    scheduled_start_s: float | None = None  # open loop: the planned start (same clock origin)
    output_chunks: int | None = None  # content chunks received (tokens when usage is missing)
    requested_input_tokens: int | None = None  # what the suite asked for (None: nothing asked)
    session: int | None = None  # multi-turn: the conversation (0-based)
    turn: int | None = None  # multi-turn: the turn within it (1-based)
    cached_input_tokens: int | None = None  # usage's cached_tokens (None: the server did not say)
    output_text_tokens: int | None = None  # the received text in the model's tokenizer (None:
    # not counted); tracker.targets.output_tokens counts it after the workload
    output_text: str | None = field(default=None, repr=False)  # the received text, until it is
    # counted (never stored)

    @property
    def ok(self) -> bool:
        return self.error_class is None

    @property
    def scheduled_ttft_s(self) -> float | None:
        """TTFT from the planned start: includes any wait for a slot, a connection or the loop."""
        if self.ttft_s is None or self.scheduled_start_s is None:
            return None
        return self.start_s - self.scheduled_start_s + self.ttft_s

    @property
    def scheduled_e2el_s(self) -> float | None:
        if self.e2el_s is None or self.scheduled_start_s is None:
            return None
        return self.start_s - self.scheduled_start_s + self.e2el_s

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


def compute_latency_stats(values: Iterable[float]) -> LatencyStats | None:
    """Mean, median, population std, linear-interpolated p90 and p99 (``vllm bench serve``'s
    definitions), or None for no values. Here, beside ``LatencyStats``, so a run's summary and an
    imported tool's per-request values are summarised by one function."""
    data = sorted(values)
    if not data:
        return None
    count = len(data)
    mean = math.fsum(data) / count
    variance = math.fsum((v - mean) ** 2 for v in data) / count
    with np.errstate(invalid="ignore"):  # an infinite value (a hostile file): NaN, then refused
        median, p90, p99 = (float(p) for p in np.percentile(data, (50, 90, 99)))  # linear
    return LatencyStats(count=count, mean_s=mean, median_s=median, std_s=math.sqrt(variance),
                        p90_s=p90, p99_s=p99)


def compute_session_durations(records: Iterable[RequestRecord]) -> list[float]:
    """Each multi-turn session's time to its end, in session order: its first request's send
    to its last answer's end, for the sessions none of whose requests failed (a failed one
    ended early), or empty for a workload without sessions."""
    by_session: dict[int, list[RequestRecord]] = {}
    for record in records:
        if record.session is not None:
            by_session.setdefault(record.session, []).append(record)
    return [max(r.start_s + (r.e2el_s or 0.0) for r in found) - min(r.start_s for r in found)
            for _, found in sorted(by_session.items()) if all(r.ok for r in found)]


@dataclass(frozen=True, slots=True)
class ClientHealth:
    """How the load generator itself fared.

    ``client_bound`` means its numbers are not the server's.
    ``cpu_fraction``: CPU time of the client's event-loop thread over the measured wall time.
    ``loop_lag_*``: how late a 10 ms timer on the client's event loop fired.
    ``send_lag_*``: how late request bodies left versus when they could have left (the planned
    start in open loop, or when a slot freed up). Waiting for a ``max_concurrency`` slot is not lag.
    """

    cpu_fraction: float | None
    loop_lag_p99_s: float | None
    loop_lag_max_s: float | None
    send_lag_p50_s: float | None
    send_lag_p99_s: float | None
    send_lag_max_s: float | None
    client_bound: bool = False
    reason: str | None = None  # why it is client-bound, in words


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
    scheduled_ttft: LatencyStats | None = None  # open loop: TTFT from the planned start
    scheduled_e2el: LatencyStats | None = None  # open loop: E2E latency from the planned start
    goodput_req_per_s: float | None = None  # requests meeting every SLO per second (SLOs set)
    slo_attainment: float | None = None  # fraction of all requests meeting every SLO
    token_count_mismatches: int | None = None  # requests whose usage != content chunks
    input_token_count_mismatches: int | None = None  # requests whose usage != requested input
    capacity_at_slo_req_per_s: float | None = None  # sweep: highest rate that met the SLOs
    client: ClientHealth | None = None  # None: not measured (e.g. stored before issue 3)


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
    gpu: GpuTelemetry | None = None  # NVML while the workload ran; None: telemetry was not run
    server: ServerTelemetry | None = None  # the target's /metrics before, during and after

    @property
    def client_bound(self) -> bool:
        """The client, not the server, limited this workload: never compare it as server numbers."""
        return self.summary.client is not None and self.summary.client.client_bound


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
    quality: QualityResult | None = None  # the suite's quality set; None when it has none


# --- telemetry and output quality ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One NVML reading of one GPU. A field the device does not report is None."""

    gpu_index: int
    t_s: float  # seconds since the workload's sampling began (monotonic clock)
    memory_used_bytes: int | None
    gpu_util_pct: float | None
    memory_util_pct: float | None
    power_w: float | None
    sm_clock_mhz: float | None
    temperature_c: float | None
    throttle_reasons: int | None  # NVML's clock-event (throttle) bitmask


@dataclass(frozen=True, slots=True)
class GpuDeviceSummary:
    """One GPU over one workload: peaks and means of its samples."""

    gpu_index: int
    name: str | None
    memory_total_bytes: int | None
    samples: int
    memory_used_peak_bytes: int | None
    memory_used_mean_bytes: float | None
    gpu_util_mean_pct: float | None
    gpu_util_peak_pct: float | None
    power_mean_w: float | None
    power_peak_w: float | None
    sm_clock_mean_mhz: float | None
    temperature_peak_c: float | None
    throttle_reasons: tuple[str, ...] = ()  # every reason seen in any sample, by name
    energy_j: float | None = None  # over the workload; None: neither counter nor power readings
    energy_source: str | None = None  # "counter" (NVML's total energy) or "sampled power"


@dataclass(frozen=True, slots=True)
class GpuTelemetry:
    """What NVML saw during a workload, or why nothing was measured (``measured`` False)."""

    measured: bool
    reason: str | None = None
    sample_hz: float | None = None
    devices: tuple[GpuDeviceSummary, ...] = ()
    samples: tuple[GpuSample, ...] = ()
    duration_s: float | None = None  # from the sampler's start to its stop (the energy's span)
    energy_note: str | None = None  # why the energy may not be the workload's alone, in words

    @property
    def energy_j(self) -> float | None:
        """The energy of all GPUs together, or None unless every GPU measured its own."""
        values = [d.energy_j for d in self.devices]
        if not values or any(v is None for v in values):
            return None
        return sum(v for v in values if v is not None)

    @property
    def energy_source(self) -> str | None:
        """The energy's source: "counter", "sampled power", or "mixed" when the GPUs differ
        (None: not measured)."""
        sources = {d.energy_source for d in self.devices if d.energy_j is not None}
        if self.energy_j is None or not sources:
            return None
        return sources.pop() if len(sources) == 1 else "mixed"

    @property
    def energy_mean_w(self) -> float | None:
        """The average power of all GPUs together over the span: energy / duration."""
        energy = self.energy_j
        if energy is None or not self.duration_s:
            return None
        return energy / self.duration_s

    @property
    def memory_peak_bytes(self) -> int | None:
        """The highest memory use of any one GPU."""
        peaks = [d.memory_used_peak_bytes for d in self.devices
                 if d.memory_used_peak_bytes is not None]
        return max(peaks) if peaks else None

    @property
    def gpu_util_mean_pct(self) -> float | None:
        """The mean utilisation over the GPUs (each GPU's mean over its samples)."""
        means = [d.gpu_util_mean_pct for d in self.devices if d.gpu_util_mean_pct is not None]
        return sum(means) / len(means) if means else None

    @property
    def power_mean_w(self) -> float | None:
        """The mean power of all GPUs together (the sum of each GPU's mean)."""
        means = [d.power_mean_w for d in self.devices if d.power_mean_w is not None]
        return sum(means) if means else None


@dataclass(frozen=True, slots=True)
class ServerTelemetry:
    """The target's Prometheus metrics over a workload, or why they were not measured.

    ``values`` holds gauges' ``*_peak``/``*_mean``, counters' deltas, the server's latency
    histograms as ``server_*_mean_s`` and ``prefix_cache_hit_rate`` (from counter deltas), under
    vLLM's names whatever the engine (llama.cpp's and SGLang's are mapped onto them). The list is
    ``tracker.telemetry.server_metrics``' docstring (its ``GAUGES``, ``COUNTERS``, ``HISTOGRAMS``).
    A metric the server does not expose is absent. Of these, the registry's ``SERVER_METRICS``
    (``tracker.metrics``) are stored and trended with the workload's own metrics.
    """

    measured: bool
    reason: str | None = None
    scrapes: int = 0
    values: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QualityItemResult:
    """One quality item's answer: ``score`` 1.0 right, 0.0 wrong, None when not answered."""

    item_id: str
    scorer: str
    output: str | None
    score: float | None
    error: str | None = None
    changed: bool | None = None  # differs from the drift baseline's answer; None: no baseline


@dataclass(frozen=True, slots=True)
class QualityResult:
    """A run's quality set: accuracy with its Wilson interval, and the drift from a baseline.

    ``drift`` is the share of items answered in both runs whose answer text changed since the
    baseline run (``drift_baseline_run_id``), or None when there is no baseline to compare with.
    ``reused_from_run_id``: the answers are a copy of that run's (quality asked once per config
    version and suite a night, ``tracker.runner.suite_runner``).
    """

    set_name: str
    set_version: str
    items: tuple[QualityItemResult, ...]
    answered: int
    correct: int
    accuracy: float | None
    accuracy_ci_low: float | None
    accuracy_ci_high: float | None
    drift: float | None = None
    drift_baseline_run_id: int | None = None
    drift_compared: int = 0
    reused_from_run_id: int | None = None  # the run that asked these items; None: this one did
