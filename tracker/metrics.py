"""The metric registry: every stored metric with its unit and the direction that is better.

A workload's summary is flattened into ``{metric name: value}`` in SI units (seconds, tokens/s,
bytes). Only the edges (display, exported JSON) convert to milliseconds and GiB. The server's
own per-run values (``SERVER_METRICS``: the prefix-cache hit rate, the KV-cache usage peak, the
preemptions, speculative decoding's acceptance rate and mean acceptance length) and the GPU
memory (NVML's, or the simulator's own account of its simulated GPU) join them in
``compute_workload_metrics``. A result without the server's counters (a ``/turn-1`` or
``/turns-2+`` split) gets the hit rate from its requests' ``cached_input_tokens`` where they
carry it. Two kinds are a run's, not a workload's: the launched server's startup time
(``compute_run_metrics``, stored with each workload) and the quality set's accuracy and drift
(``QUALITY_METRICS``, the series ``quality:<set>``).
``COMPARED_METRICS`` is the one list a run-vs-run comparison judges (the gate and the dashboard's
Compare), and ``compute_samples`` the values it judges them on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tracker.results import (
    LatencyStats,
    QualityResult,
    RequestRecord,
    TokenSource,
    WorkloadResult,
    WorkloadSummary,
    compute_latency_stats,
    compute_session_durations,
)


class Direction(StrEnum):
    LOWER_IS_BETTER = "lower_is_better"
    HIGHER_IS_BETTER = "higher_is_better"


class ClientTiming(StrEnum):
    """How the client's own lateness (a starved or overloaded load generator) enters a metric:
    ``tracker.analysis.timing`` turns a run's lag into a bound on the metric's value."""

    STAMPS = "stamps"  # the difference of two client stamps, each late by up to the lag
    PER_TOKEN = "per_token"  # two stamps over the request's output tokens after the first
    SCHEDULE = "schedule"  # from the planned start: the stamps and how late the request left
    PACE = "pace"  # a rate the client's lateness can only hold back (throughput)


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    unit: str
    direction: Direction
    description: str
    latency: str | None = None  # the per-request latency it summarises ("ttft"); None: per run
    statistic: str = "mean"  # of the per-request values; a per-run value: its mean over runs
    # the same bytes night after night where nothing changed (GPU memory): a persisting step of
    # any size is a change (no smallest relative change), and the gate compares it exactly
    bit_constant: bool = False
    # how the client's lateness enters it (None: the server's own count, not the client's clock)
    client_timing: ClientTiming | None = None
    # config fields that set this metric by design: a change of one of them asks for the change
    # (GPU memory follows gpu_memory_utilization), so the gate shows it "as configured"
    configured_by: tuple[str, ...] = ()

    @property
    def lower_is_better(self) -> bool:
        return self.direction is Direction.LOWER_IS_BETTER

    def is_worse(self, before: float, after: float) -> bool:
        """``after`` is worse than ``before`` in this metric's direction (equal: not worse)."""
        return after > before if self.lower_is_better else after < before


GIB = 1024**3  # bytes in a GiB: how memory is shown everywhere

LATENCIES = {
    "ttft": "time to first token",
    "tpot": "time per output token after the first, per request",
    "itl": "inter-chunk latency",
    "e2el": "end-to-end request latency",
    "scheduled_ttft": "time to first token from the planned start (open loop)",
    "scheduled_e2el": "end-to-end latency from the planned start (open loop)",
}
STATISTICS = ("mean", "median", "std", "p90", "p99")

_THROUGHPUTS = (
    Metric("request_throughput_per_s", "req/s", Direction.HIGHER_IS_BETTER,
           "completed requests per second of workload wall time", client_timing=ClientTiming.PACE),
    Metric("output_throughput_tokens_per_s", "tokens/s", Direction.HIGHER_IS_BETTER,
           "output tokens per second of workload wall time", client_timing=ClientTiming.PACE),
    Metric("total_token_throughput_tokens_per_s", "tokens/s", Direction.HIGHER_IS_BETTER,
           "input plus output tokens per second of workload wall time",
           client_timing=ClientTiming.PACE),
    Metric("goodput_req_per_s", "req/s", Direction.HIGHER_IS_BETTER,
           "requests that met every SLO per second of workload wall time",
           client_timing=ClientTiming.PACE),
    Metric("slo_attainment", "fraction", Direction.HIGHER_IS_BETTER,
           "share of all requests that met every SLO"),
    Metric("capacity_at_slo_req_per_s", "req/s", Direction.HIGHER_IS_BETTER,
           "sweep: the highest planned request rate that still met the SLOs"),
)
# Per-run values the server reports on its /metrics (``WorkloadResult.server``), under the names
# tracker.telemetry.server_metrics gives them
_SERVER = (
    Metric("prefix_cache_hit_rate", "fraction", Direction.HIGHER_IS_BETTER,
           "share of the prompt tokens the server served from its prefix cache over the workload "
           "(its counters' deltas: hits / queries; without them, the requests' usage: cached / "
           "prompt tokens)"),
    Metric("kv_cache_usage_peak", "fraction", Direction.LOWER_IS_BETTER,
           "the highest share of the KV-cache blocks in use at any scrape of the workload (near "
           "1: requests wait or are preempted)",
           configured_by=("engine.kv_cache_dtype", "engine.gpu_memory_utilization",
                          "engine.block_size")),
    Metric("num_preemptions", "count", Direction.LOWER_IS_BETTER,
           "requests the server preempted during the workload (its counter's delta)"),
    # speculative decoding (tracker.telemetry.spec_decode), vLLM's definitions
    Metric("spec_decode_acceptance_rate", "fraction", Direction.HIGHER_IS_BETTER,
           "share of the draft tokens the target model accepted over the workload (vLLM's "
           "spec_decode_num_accepted_tokens / spec_decode_num_draft_tokens deltas)"),
    Metric("spec_decode_mean_acceptance_length", "tokens", Direction.HIGHER_IS_BETTER,
           "tokens a decode step yields per draft, the target's bonus token included (1 + "
           "vLLM's spec_decode_num_accepted_tokens / spec_decode_num_drafts deltas)"),
)
SERVER_METRICS: tuple[str, ...] = tuple(m.name for m in _SERVER)
# vLLM takes gpu_memory_utilization x the GPU's memory at start (weights, activations, and the
# KV pool in what is left), so a change of it moves the memory by design
MEMORY_CONFIGURED_BY = ("engine.gpu_memory_utilization",)
# GPU memory of the target (``compute_gpu_memory``): vLLM allocates its whole KV pool at start,
# so the reading is weights + KV pool (+ activations), the same bytes night after night: judged
# on the peak, exactly where it is bit-constant (``tracker.analysis.constant_measures``)
_MEMORY = (
    Metric("gpu_memory_peak_bytes", "bytes", Direction.LOWER_IS_BETTER,
           "the most memory used on any one of the target's GPUs during the workload (NVML, or "
           "the simulator's own account of its simulated GPU)", bit_constant=True,
           configured_by=MEMORY_CONFIGURED_BY),
    Metric("gpu_memory_mean_bytes", "bytes", Direction.LOWER_IS_BETTER,
           "the mean memory used over the workload on the GPU that used the most on average",
           bit_constant=True, configured_by=MEMORY_CONFIGURED_BY),
)
# Per run, not per workload: how long the launched server took from its start to ready (the
# run's ``environment["launch"]["startup_s"]``), stored with each of the run's workloads
_RUN = (
    Metric("startup_s", "s", Direction.LOWER_IS_BETTER,
           "seconds from launching the target to its answering /health and /v1/models (servers "
           "the tracker launches; an attached server or the embedded simulator: not measured)"),
)
# Per run and quality set (``RunResult.quality``), trended as the series ``quality:<set>``
_QUALITY = (
    Metric("accuracy", "fraction", Direction.HIGHER_IS_BETTER,
           "share of the quality set's answered items scored right"),
    Metric("answer_drift", "fraction", Direction.LOWER_IS_BETTER,
           "share of the items answered in this run and the drift baseline run whose answer "
           "text changed"),
)
QUALITY_METRICS: tuple[str, ...] = tuple(m.name for m in _QUALITY)
QUALITY_SERIES_PREFIX = "quality:"  # the series name of a quality set: "quality:<set name>"
# What the workload cost (the config's ``cost`` block, which the runner puts in the workload's
# params as ``params["cost"]``) and the energy its GPUs drew (``WorkloadResult.gpu``)
_COST = (
    Metric("usd_per_1m_output_tokens", "usd_per_1m_tokens", Direction.LOWER_IS_BETTER,
           "US dollars per million output tokens: GPU-hour price x GPUs x the workload's wall "
           "hours / output tokens, or a gateway's per-token prices over the tokens"),
    Metric("usd_per_1m_tokens", "usd_per_1m_tokens", Direction.LOWER_IS_BETTER,
           "US dollars per million input plus output tokens (same costs)"),
)
_ENERGY = (
    Metric("joules_per_output_token", "J/token", Direction.LOWER_IS_BETTER,
           "energy of the target's GPUs over the workload (NVML's energy counter, else the "
           "sampled power integrated over time) per output token"),
    Metric("joules_per_token", "J/token", Direction.LOWER_IS_BETTER,
           "the same energy per input plus output token"),
)


_LATENCY_TIMING = {"tpot": ClientTiming.PER_TOKEN, "scheduled_ttft": ClientTiming.SCHEDULE,
                   "scheduled_e2el": ClientTiming.SCHEDULE}


def _latency_metrics() -> list[Metric]:
    return [
        Metric(f"{key}_{stat}_s", "s", Direction.LOWER_IS_BETTER, f"{stat} {label}", key, stat,
               client_timing=_LATENCY_TIMING.get(key, ClientTiming.STAMPS))
        for key, label in LATENCIES.items()
        for stat in STATISTICS
    ]


# Per session of a multi-turn workload (``tracker.results.compute_session_durations``): the
# time to the session's end, a per-run statistic over its sessions without a failure
_SESSIONS = tuple(
    Metric(f"session_duration_{stat}_s", "s", Direction.LOWER_IS_BETTER,
           f"{stat} time to a session's end: its first request out to its last answer in (think "
           "time, tool latencies and sub-agent branches included)", statistic=stat,
           client_timing=ClientTiming.STAMPS)
    for stat in ("mean", "median", "p90", "p99"))

REGISTRY: dict[str, Metric] = {m.name: m for m in (*_latency_metrics(), *_THROUGHPUTS, *_SERVER,
                                                     *_COST, *_ENERGY, *_MEMORY, *_RUN,
                                                     *_QUALITY, *_SESSIONS)}


def get_metric(name: str) -> Metric:
    return REGISTRY[name]


# What a run-vs-run comparison judges, per workload: the median and the p99 of the per-request
# latencies, and the throughputs of each run.
COMPARED_METRICS: tuple[Metric, ...] = tuple(REGISTRY[name] for name in (
    *(f"{key}_{stat}_s" for key in ("ttft", "tpot", "e2el") for stat in ("median", "p99")),
    "request_throughput_per_s", "output_throughput_tokens_per_s"))


def compute_samples(metric: Metric, workload: WorkloadResult) -> list[float]:
    """The values ``metric`` is judged on in one run of a workload: its latency of each
    successful request (every gap between chunks, for ITL), or the run's one value. They are
    empty when it was not measured."""
    if metric.latency is None:
        value = compute_workload_metrics(workload).get(metric.name)
        return [] if value is None else [value]
    records = [record for record in workload.records if record.ok]
    if metric.latency == "itl":
        return [gap for record in records for gap in record.itl_s]
    values = (getattr(record, f"{metric.latency}_s") for record in records)
    return [float(value) for value in values if value is not None]


def _stats_values(key: str, stats: LatencyStats | None) -> dict[str, float]:
    if stats is None:
        return {}
    return {
        f"{key}_mean_s": stats.mean_s,
        f"{key}_median_s": stats.median_s,
        f"{key}_std_s": stats.std_s,
        f"{key}_p90_s": stats.p90_s,
        f"{key}_p99_s": stats.p99_s,
    }


def compute_summary_metrics(summary: WorkloadSummary) -> dict[str, float]:
    """Flatten a summary into registry metrics. Metrics that were not measured are absent."""
    values: dict[str, float] = {}
    for key, stats in (("ttft", summary.ttft), ("tpot", summary.tpot),
                       ("itl", summary.itl), ("e2el", summary.e2el),
                       ("scheduled_ttft", summary.scheduled_ttft),
                       ("scheduled_e2el", summary.scheduled_e2el)):
        values.update(_stats_values(key, stats))
    throughputs = {
        "request_throughput_per_s": summary.request_throughput_per_s,
        "output_throughput_tokens_per_s": summary.output_throughput_tokens_per_s,
        "total_token_throughput_tokens_per_s": summary.total_token_throughput_tokens_per_s,
        "goodput_req_per_s": summary.goodput_req_per_s,
        "slo_attainment": summary.slo_attainment,
        "capacity_at_slo_req_per_s": summary.capacity_at_slo_req_per_s,
    }
    values.update({k: v for k, v in throughputs.items() if v is not None})
    return values


def compute_request_hit_rate(records: Iterable[RequestRecord]) -> float | None:
    """The prefix-cache hit rate the requests report: the sum of their ``cached_input_tokens``
    over the sum of their ``input_tokens``, over the successful requests whose usage gave both,
    or None when none did (the server did not say, which is not a rate of 0)."""
    cached = prompt = 0
    for record in records:
        if (record.ok and record.cached_input_tokens is not None
                and record.input_tokens is not None
                and record.input_tokens_source is TokenSource.USAGE):
            cached += record.cached_input_tokens
            prompt += record.input_tokens
    return cached / prompt if prompt > 0 else None


def compute_hit_rate(workload: WorkloadResult) -> tuple[float, str] | None:
    """The workload's ``prefix_cache_hit_rate`` and where it comes from: ``"server_counters"``
    (its /metrics deltas over the whole workload, which win), ``"request_usage"`` (its
    requests' cached tokens), or None when neither measured it."""
    server = workload.server
    if server is not None and server.measured and "prefix_cache_hit_rate" in server.values:
        return server.values["prefix_cache_hit_rate"], "server_counters"
    rate = compute_request_hit_rate(workload.records)
    return None if rate is None else (rate, "request_usage")



def _price(cost: Mapping[str, Any], key: str) -> float | None:
    value = cost.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def compute_cost_usd(cost: Mapping[str, Any], summary: WorkloadSummary) -> float | None:
    """What the workload cost in US dollars under ``cost`` (a config's ``cost`` block as the
    runner stored it in ``params["cost"]``): the GPU hours of its measured duration at the GPU
    price, or its tokens at a gateway's prices, or None without a usable price."""
    per_gpu_hour, gpus = _price(cost, "usd_per_gpu_hour"), _price(cost, "gpus")
    if per_gpu_hour is not None and gpus is not None:
        return per_gpu_hour * gpus * (summary.duration_s / 3600.0)
    per_in = _price(cost, "usd_per_1m_input_tokens")
    per_out = _price(cost, "usd_per_1m_output_tokens")
    if per_in is not None and per_out is not None:
        return (summary.total_input_tokens * per_in
                + summary.total_output_tokens * per_out) / 1e6
    return None


def compute_cost_metrics(workload: WorkloadResult) -> dict[str, float]:
    """``usd_per_1m_output_tokens`` and ``usd_per_1m_tokens``, absent without a price in the
    workload's params or without tokens (a workload that produced none has no cost per token).
    A ``/turn-1`` or ``/turns-2+`` split (``params["turns"]``), or a LoRA adapter's
    ``/adapter-<name>`` split (``params["adapter"]``), shares its workload's GPU hours with the
    other splits, so only a per-token price gives it a cost."""
    cost = workload.params.get("cost")
    summary = workload.summary
    if not isinstance(cost, Mapping):
        return {}
    if "turns" in workload.params or "adapter" in workload.params:
        cost = {k: v for k, v in cost.items() if k not in ("usd_per_gpu_hour", "gpus")}
    usd = compute_cost_usd(cost, summary)
    if usd is None:
        return {}
    values: dict[str, float] = {}
    total = summary.total_input_tokens + summary.total_output_tokens
    if summary.total_output_tokens > 0:
        values["usd_per_1m_output_tokens"] = usd / summary.total_output_tokens * 1e6
    if total > 0:
        values["usd_per_1m_tokens"] = usd / total * 1e6
    return values


def compute_energy_metrics(workload: WorkloadResult) -> dict[str, float]:
    """``joules_per_output_token`` and ``joules_per_token`` from the GPUs' energy over the
    workload (``GpuTelemetry.energy_j``), absent when it was not measured or without tokens."""
    gpu, summary = workload.gpu, workload.summary
    energy_j = None if gpu is None or not gpu.measured else gpu.energy_j
    if energy_j is None:
        return {}
    values: dict[str, float] = {}
    total = summary.total_input_tokens + summary.total_output_tokens
    if summary.total_output_tokens > 0:
        values["joules_per_output_token"] = energy_j / summary.total_output_tokens
    if total > 0:
        values["joules_per_token"] = energy_j / total
    return values


SIM_MEMORY_GAUGE = "gpu_memory_used_bytes"  # the simulator's per-GPU gauge, as scraped


def compute_gpu_memory(workload: WorkloadResult) -> tuple[float, float, str] | None:
    """The workload's GPU memory (peak, mean, source), per GPU, from one of two sources read
    alike: ``"simulator"`` (the simulator's own gauge on its /metrics: its simulated GPU, which
    no NVML sees and only the simulator exposes, so it wins) or ``"nvml"`` (the sampled GPUs:
    the highest peak of any GPU, and the highest of the GPUs' means). It is None when neither
    measured it."""
    server = workload.server
    if server is not None and server.measured:
        peak = server.values.get(f"{SIM_MEMORY_GAUGE}_peak")
        mean = server.values.get(f"{SIM_MEMORY_GAUGE}_mean")
        if peak is not None and mean is not None:
            return peak, mean, "simulator"
    gpu = workload.gpu
    if gpu is None or not gpu.measured or gpu.memory_peak_bytes is None:
        return None
    means = [d.memory_used_mean_bytes for d in gpu.devices if d.memory_used_mean_bytes is not None]
    if not means:
        return None
    return float(gpu.memory_peak_bytes), max(means), "nvml"


def compute_memory_metrics(workload: WorkloadResult) -> dict[str, float]:
    """``gpu_memory_peak_bytes`` and ``gpu_memory_mean_bytes`` (``compute_gpu_memory``)."""
    found = compute_gpu_memory(workload)
    if found is None:
        return {}
    return {"gpu_memory_peak_bytes": found[0], "gpu_memory_mean_bytes": found[1]}


def compute_run_metrics(environment: Mapping[str, Any]) -> dict[str, float]:
    """The per-run metrics a run's environment holds: ``startup_s`` of a server the tracker
    launched, absent for an attached server or the embedded simulator."""
    launch = environment.get("launch")
    startup = launch.get("startup_s") if isinstance(launch, Mapping) else None
    if isinstance(startup, int | float) and not isinstance(startup, bool):
        return {"startup_s": float(startup)}
    return {}


def compute_quality_metrics(quality: QualityResult | None) -> dict[str, float]:
    """``accuracy`` and ``answer_drift`` of a run's quality set, absent when not measured (no
    item answered, no drift baseline)."""
    if quality is None:
        return {}
    values = {"accuracy": quality.accuracy, "answer_drift": quality.drift}
    return {name: value for name, value in values.items() if value is not None}


def quality_series_name(set_name: str) -> str:
    """The series a quality set's metrics are trended and watched under: ``quality:<set>``."""
    return f"{QUALITY_SERIES_PREFIX}{set_name}"


def compute_workload_metrics(workload: WorkloadResult) -> dict[str, float]:
    """Every registry metric one run of a workload measured: its summary's
    (``compute_summary_metrics``), the server's (``SERVER_METRICS``) when it was scraped, its
    cost (``compute_cost_metrics``), its energy (``compute_energy_metrics``) and its GPU memory
    (``compute_memory_metrics``). The per-run metrics (``compute_run_metrics``,
    ``compute_quality_metrics``) are not a workload's: the store adds them.
    The hit rate is the server's counters' over the whole workload when they gave one, else
    the requests' own (``compute_request_hit_rate``), else absent."""
    values = compute_summary_metrics(workload.summary)
    server = workload.server
    if server is not None and server.measured:
        values.update({name: server.values[name] for name in SERVER_METRICS
                       if name in server.values})
    if (hit_rate := compute_hit_rate(workload)) is not None:
        values["prefix_cache_hit_rate"] = hit_rate[0]
    values.update(compute_cost_metrics(workload))
    values.update(compute_energy_metrics(workload))
    values.update(compute_memory_metrics(workload))
    values.update(compute_session_metrics(workload))
    return values


def compute_session_metrics(workload: WorkloadResult) -> dict[str, float]:
    """``session_duration_*_s`` of a multi-turn workload's sessions without a failure, absent
    for other workloads and for a ``/turn-1`` or ``/turns-2+`` split (part of each session)."""
    if "turns" in workload.params:
        return {}
    stats = compute_latency_stats(compute_session_durations(workload.records))
    if stats is None:
        return {}
    return {"session_duration_mean_s": stats.mean_s, "session_duration_median_s": stats.median_s,
            "session_duration_p90_s": stats.p90_s, "session_duration_p99_s": stats.p99_s}
