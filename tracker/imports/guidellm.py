"""GuideLLM's benchmarks JSON (``guidellm benchmark --output-path x.json``) → one tracker run
per benchmark (docs/import.md, "GuideLLM").

GuideLLM's names differ from the tracker's: ``time_per_output_token_ms`` includes the first
token (``(last - start) / output_tokens``), so it is kept as ``guidellm_time_per_output_token_*``;
its ``inter_token_latency_ms`` is per request ``(last - first) / (out - 1)``, the tracker's TPOT;
it has no per-chunk gaps, so the tracker's ITL is not measured. ``request_latency`` is already
seconds. Statistics are over the ``successful`` requests. GuideLLM's ``*_per_second`` are
distributions of rates over time, not a total over the wall time: they are kept under
``guidellm_`` names, and the tracker's throughputs are the successful totals over the measured
window (``measure_end_time - measure_start_time``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tracker.imports.source import (
    ImportedRun,
    SourceFile,
    latency_stats,
    optional_number,
    parse_json,
    require_object,
)
from tracker.results import WorkloadResult, WorkloadSummary

EXPECTED = "a GuideLLM benchmarks report (JSON with 'benchmarks')"
LATENCIES = {"ttft": ("time_to_first_token_ms", 1000.0), "tpot": ("inter_token_latency_ms", 1000.0),
             "e2el": ("request_latency", 1.0)}
KEPT = ("time_per_output_token_ms", "requests_per_second", "output_tokens_per_second",
        "tokens_per_second")


def load_guidellm(source: SourceFile) -> list[ImportedRun]:
    body = require_object(source, parse_json(source, EXPECTED), EXPECTED, "benchmarks")
    benchmarks = body.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise source.fail(EXPECTED, "no 'benchmarks' list")
    version = _version(body)
    return [_run(source, i, _object(source, b, i), version) for i, b in enumerate(benchmarks)]


def _object(source: SourceFile, value: Any, index: int) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not isinstance(value.get("metrics"), Mapping):
        raise source.fail(EXPECTED, f"benchmarks[{index}] has no 'metrics' object")
    return value


def _version(body: Mapping[str, Any]) -> str | None:
    metadata = body.get("metadata")
    found = metadata.get("guidellm_version") if isinstance(metadata, Mapping) else None
    return str(found) if found is not None else None


def _successful(metrics: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    found = metrics.get(name)
    ok = found.get("successful") if isinstance(found, Mapping) else None
    return ok if isinstance(ok, Mapping) else {}


def _values(dist: Mapping[str, Any], scale: float) -> dict[str, float | None]:
    found = dist.get("percentiles")
    percentiles: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    raw = {"mean": optional_number(dist, "mean"), "median": optional_number(dist, "median"),
           "std": optional_number(dist, "std_dev"), "p90": optional_number(percentiles, "p90"),
           "p99": optional_number(percentiles, "p99")}
    return {k: None if v is None else v / scale for k, v in raw.items()}


def _run(source: SourceFile, index: int, bench: Mapping[str, Any],
         version: str | None) -> ImportedRun:
    metrics = bench["metrics"]
    scheduler = bench.get("scheduler_metrics") or {}
    start = optional_number(scheduler, "measure_start_time")
    end = optional_number(scheduler, "measure_end_time")
    if start is None or end is None or end <= start:
        raise source.fail(EXPECTED, f"benchmarks[{index}].scheduler_metrics needs "
                                    "measure_start_time < measure_end_time")
    totals = metrics.get("request_totals") or {}
    completed = int(optional_number(totals, "successful") or 0)
    failed = int((optional_number(totals, "errored") or 0)
                 + (optional_number(totals, "incomplete") or 0))
    stats = {key: latency_stats(int(optional_number(_successful(metrics, name), "count") or 0),
                                _values(_successful(metrics, name), scale))
             for key, (name, scale) in LATENCIES.items()}
    duration_s = end - start
    input_tokens = int(optional_number(_successful(metrics, "prompt_token_count"), "total_sum") or 0)
    output_tokens = int(optional_number(_successful(metrics, "output_token_count"), "total_sum")
                        or 0)
    kept = _kept(metrics)
    summary = WorkloadSummary(
        completed=completed, failed=failed, duration_s=duration_s,
        total_input_tokens=input_tokens, total_output_tokens=output_tokens,
        request_throughput_per_s=completed / duration_s,
        output_throughput_tokens_per_s=output_tokens / duration_s,
        total_token_throughput_tokens_per_s=(input_tokens + output_tokens) / duration_s,
        ttft=stats["ttft"], tpot=stats["tpot"], itl=None, e2el=stats["e2el"],
        output_tokens_source=None, input_tokens_source=None,
        errors={"guidellm_errored": failed} if failed else {})
    started_at = datetime.fromtimestamp(start, UTC)
    ended_at = datetime.fromtimestamp(end, UTC)
    name = _name(bench, index)
    workload = WorkloadResult(
        name=name, concurrency=_concurrency(bench, completed + failed),
        num_requests=completed + failed, warmup_requests=0,
        params={"guidellm_strategy": (bench.get("config") or {}).get("strategy"),
                "source_values": kept},
        started_at=started_at, ended_at=ended_at, records=(), summary=summary)
    return ImportedRun(tool="guidellm", tool_version=version, sha256=source.sha256,
                       benchmark=index, started_at=started_at, ended_at=ended_at,
                       host="imported", workload=workload, source_values=kept,
                       notes=("guidellm has no per-chunk gaps: ITL not measured",))


def _kept(metrics: Mapping[str, Any]) -> dict[str, float]:
    kept: dict[str, float] = {}
    for name in KEPT:
        dist = _successful(metrics, name)
        base = name.removesuffix("_ms")
        scale = 1000.0 if name.endswith("_ms") else 1.0
        unit = "_s" if name.endswith("_ms") else ""
        for stat, value in _values(dist, scale).items():
            if value is not None:
                kept[f"guidellm_{base}_{stat}{unit}"] = value
    return kept


def _name(bench: Mapping[str, Any], index: int) -> str:
    strategy = (bench.get("config") or {}).get("strategy") or {}
    kind = strategy.get("type_") if isinstance(strategy, Mapping) else None
    streams = strategy.get("streams") if isinstance(strategy, Mapping) else None
    rate = strategy.get("rate") if isinstance(strategy, Mapping) else None
    if kind == "concurrent" and streams:
        return f"c{streams}"
    if rate:
        return f"{kind or 'rate'}-{rate}"
    return f"{kind or 'benchmark'}-{index}"


def _concurrency(bench: Mapping[str, Any], requests: int) -> int:
    strategy = (bench.get("config") or {}).get("strategy") or {}
    streams = strategy.get("streams") if isinstance(strategy, Mapping) else None
    return int(streams) if isinstance(streams, int) else requests
