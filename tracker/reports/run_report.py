"""Render results for people and programs: the ``tracker.run/1`` JSON and terminal tables.

This is an edge: seconds become milliseconds here, with ``vllm bench serve``'s key names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from tracker.inputs.traffic import describe_fallback
from tracker.metrics import compute_cost_metrics, compute_energy_metrics
from tracker.reports.load_report import (
    LOAD_DEFINITIONS,
    render_load_json,
    render_load_label,
    render_run_load_lines,
    render_stats_ms,
)
from tracker.reports.telemetry_report import (
    render_gpu_json,
    render_quality_json,
    render_run_telemetry_json,
    render_server_json,
    render_telemetry_lines,
)
from tracker.results import (
    IMPORT_KEY,
    LatencyStats,
    RunResult,
    WorkloadResult,
    compute_run_warnings,
)

SCHEMA = "tracker.run/1"

DEFINITIONS = {
    "ttft": "time to first token: from the moment the request body left the client to the first "
            "streamed chunk with non-empty content (a role-only or empty chunk is not a token)",
    "tpot": "time per output token, per request: (e2el - ttft) / (output_tokens - 1)",
    "itl": "inter-chunk latency: every gap between content chunks; chunks that arrive in one "
           "network read share a timestamp",
    "e2el": "end-to-end latency: from the request body leaving the client to the end of the stream",
    "output_tokens": "the server's usage.completion_tokens (requested with "
                     "stream_options.include_usage); counted content chunks when the server "
                     "sends no usage, as output_tokens_source says",
    "duration": "seconds from the first measured request to the last one's end; warm-up excluded",
    "percentiles": "linear interpolation between order statistics; std is the population std",
    **LOAD_DEFINITIONS,
}

LATENCY_KEYS = ("ttft", "tpot", "itl", "e2el")
COST_METRICS = ("usd_per_1m_output_tokens", "usd_per_1m_tokens")
ENERGY_METRICS = ("joules_per_output_token", "joules_per_token")


def render_workload_json(result: WorkloadResult) -> dict[str, Any]:
    s = result.summary
    body: dict[str, Any] = {
        "name": result.name,
        "concurrency": result.concurrency,
        "num_requests": result.num_requests,
        "warmup_requests": result.warmup_requests,
        "complete": result.complete,
        "completed": s.completed,
        "failed": s.failed,
        "duration": s.duration_s,
        "total_input_tokens": s.total_input_tokens,
        "total_output_tokens": s.total_output_tokens,
        "request_throughput": s.request_throughput_per_s,
        "output_throughput": s.output_throughput_tokens_per_s,
        "total_token_throughput": s.total_token_throughput_tokens_per_s,
    }
    for key in LATENCY_KEYS:
        body.update(render_stats_ms(key, getattr(s, key)))
    body.update(
        output_tokens_source=s.output_tokens_source.value if s.output_tokens_source else None,
        input_tokens_source=s.input_tokens_source.value if s.input_tokens_source else None,
        errors=dict(s.errors),
        started_at=_iso(result.started_at),
        ended_at=_iso(result.ended_at),
        params=dict(result.params),
        telemetry={"gpu": render_gpu_json(result.gpu), "server": render_server_json(result.server)},
        cost=render_cost_json(result),
        energy=render_energy_json(result),
    )
    body.update(render_load_json(result))
    return body


def render_cost_json(result: WorkloadResult) -> dict[str, Any] | None:
    """The workload's prices and cost per million tokens, or None when its config set no price."""
    prices = result.params.get("cost")
    if not isinstance(prices, Mapping):
        return None
    values = compute_cost_metrics(result)
    return {"prices": dict(prices), **{name: values.get(name) for name in COST_METRICS}}


def render_energy_json(result: WorkloadResult) -> dict[str, Any]:
    """The GPUs' energy over the workload and per token, or why it was not measured."""
    gpu = result.gpu
    if gpu is None or not gpu.measured or gpu.energy_j is None:
        reason = ("GPU telemetry was not run" if gpu is None else gpu.reason if not gpu.measured
                  else "not measured: NVML gave neither an energy counter nor power readings")
        return {"measured": False, "reason": reason}
    values = compute_energy_metrics(result)
    return {"measured": True, "joules": gpu.energy_j, "mean_w": gpu.energy_mean_w,
            "source": gpu.energy_source, "note": gpu.energy_note,
            **{name: values.get(name) for name in ENERGY_METRICS}}


def render_cost_energy_lines(run: RunResult) -> list[str]:
    """One line per workload that has a cost or an energy per token."""
    lines = []
    for workload in run.workloads:
        values = {**compute_cost_metrics(workload), **compute_energy_metrics(workload)}
        parts = []
        if "usd_per_1m_output_tokens" in values:
            parts.append(f"${values['usd_per_1m_output_tokens']:.4g}/1M output tokens")
        if "usd_per_1m_tokens" in values:
            parts.append(f"${values['usd_per_1m_tokens']:.4g}/1M tokens")
        if "joules_per_output_token" in values and workload.gpu is not None:
            mean_w = workload.gpu.energy_mean_w
            watts = "" if mean_w is None else f", {mean_w:.0f} W mean"
            parts.append(f"{values['joules_per_output_token']:.4g} J/output token "
                         f"({workload.gpu.energy_source}{watts})")
        if parts:
            lines.append(f"cost/energy {workload.name}: " + ", ".join(parts))
    return lines


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def render_run_json(run: RunResult) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "run_id": run.run_id,
        "status": run.status.value,
        "status_reason": run.status_reason,
        "simulated": run.simulated,
        "warnings": list(compute_run_warnings(run.environment)),
        "started_at": _iso(run.started_at),
        "ended_at": _iso(run.ended_at),
        "config": {"name": run.config.name, "version": run.config.version,
                   "body": dict(run.config_body)},
        "suite": {"name": run.suite.name, "version": run.suite.version},
        "environment": dict(run.environment),
        "telemetry": render_run_telemetry_json(run),
        "quality": render_quality_json(run.quality),
        "definitions": DEFINITIONS,
        "workloads": [render_workload_json(w) for w in run.workloads],
    }


# --- terminal tables -------------------------------------------------------------------------

def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _fmt_ms(stats: LatencyStats | None, attr: str) -> str:
    if stats is None:
        return "-"
    return f"{getattr(stats, attr) * 1000:.1f}"


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


WORKLOAD_HEADERS = ("workload", "conc", "ok", "fail", "req/s", "out tok/s", "TTFT p50 ms",
                    "TTFT p99 ms", "TPOT p50 ms", "ITL p99 ms", "E2E p99 ms")


def render_workload_row(result: WorkloadResult) -> list[str]:
    s = result.summary
    name = result.name if result.complete else f"{result.name} (cut short)"
    return [name, render_load_label(result), str(s.completed), str(s.failed),
            _fmt(s.request_throughput_per_s, 2), _fmt(s.output_throughput_tokens_per_s),
            _fmt_ms(s.ttft, "median_s"), _fmt_ms(s.ttft, "p99_s"), _fmt_ms(s.tpot, "median_s"),
            _fmt_ms(s.itl, "p99_s"), _fmt_ms(s.e2el, "p99_s")]


def render_run_text(run: RunResult) -> str:
    sim = " [SIMULATED]" if run.simulated else ""
    head = (f"run {run.run_id}: {run.status.value}{sim}  config {run.config.name}@"
            f"{run.config.version[:12]}  suite {run.suite.name}@{run.suite.version[:12]}")
    lines = [head]
    if (line := render_source_line(run.environment)) is not None:
        lines.append(line)
    if run.status_reason:
        lines.append(f"  reason: {run.status_reason}")
    lines.extend(f"  warning: {warning}" for warning in compute_run_warnings(run.environment))
    lines.append(render_table(WORKLOAD_HEADERS, [render_workload_row(w) for w in run.workloads]))
    errors: Counter[str] = Counter()
    for workload in run.workloads:
        errors.update(workload.summary.errors)
    if errors:
        lines.append("errors: " + ", ".join(f"{k} x{v}" for k, v in sorted(errors.items())))
    sources = {w.summary.output_tokens_source for w in run.workloads} - {None}
    if sources and sources != {"usage"}:
        lines.append("note: output tokens counted from streamed chunks where the server sent no "
                     "usage (output_tokens_source in the JSON)")
    if (line := render_prompt_lengths_line(run.environment)) is not None:
        lines.append(line)
    lines.extend(render_telemetry_lines(run))
    lines.extend(render_cost_energy_lines(run))
    lines.extend(render_run_load_lines(run))
    return "\n".join(lines)


def render_source_line(environment: Mapping[str, Any]) -> str | None:
    """Where an imported run came from (``tracker import``), or None for a run measured here."""
    source = environment.get(IMPORT_KEY)
    if not isinstance(source, Mapping):
        return None
    version = f" {source['tool_version']}" if source.get("tool_version") else ""
    notes = "; ".join(str(n) for n in source.get("notes") or ())
    return (f"  imported from {source.get('tool')}{version} (file sha256 "
            f"{str(source.get('sha256'))[:12]}, benchmark {source.get('benchmark')})"
            + (f": {notes}" if notes else ""))


def render_prompt_lengths_line(environment: Mapping[str, Any]) -> str | None:
    """Which tokenizer the prompt lengths are exact in (runs before #14 recorded none)."""
    tokenizer = environment.get("tokenizer")
    if tokenizer is None:
        return None
    fallback = environment.get("tokenizer_fallback")
    if fallback:
        return f"note: {describe_fallback(str(tokenizer), str(fallback))}"
    return f"prompt lengths: exact in {tokenizer}"
