"""AIPerf's ``profile_export_aiperf.json`` (with the ``profile_export.jsonl`` beside it) → one
tracker run (docs/import-formats.md, "AIPerf").

AIPerf's names differ from the tracker's: its ``inter_token_latency`` is per request
``(request_latency - ttft) / (osl - 1)``, the tracker's TPOT. Its ``inter_chunk_latency`` is every
gap between chunks, the tracker's ITL, and ``request_latency`` is E2EL. Values in ms become seconds.
Metrics with no tracker meaning (time to second token, AIPerf's "effective" latency from when a
request was due, per-user throughput) keep an ``aiperf_`` name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from tracker.ingest.source import (
    TOO_DEEP,
    BadValue,
    ImportedRun,
    ImportFormatError,
    SourceFile,
    bad_value,
    count,
    finite,
    instant,
    latency_stats,
    mapping,
    optional_number,
    parse_json,
    read_source,
    require_object,
    utc,
)
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.results import RequestRecord, TokenSource, WorkloadResult, WorkloadSummary

EXPECTED = "an AIPerf profile export (profile_export_aiperf.json)"
KEY = "time_to_first_token"
RECORDS_FILE = "profile_export.jsonl"
LATENCIES = {"ttft": "time_to_first_token", "tpot": "inter_token_latency",
             "itl": "inter_chunk_latency", "e2el": "request_latency"}
KEPT = {  # AIPerf metric -> (statistic, scale, kept name): no tracker metric means it
    "time_to_second_token": ("p50", 1e-3, "aiperf_time_to_second_token_median_s"),
    "effective_latency": ("p50", 1e-3, "aiperf_effective_latency_median_s"),
    "output_token_throughput_per_user": (
        "p50", 1.0, "aiperf_output_token_throughput_per_user_median_tokens_per_s"),
}


def load_aiperf(source: SourceFile) -> list[ImportedRun]:
    if source.text.lstrip().startswith("{") and _first_line_is_record(source):
        raise source.fail(EXPECTED, f"this is AIPerf's per-record {RECORDS_FILE}; import the "
                                    "profile_export_aiperf.json beside it (its records are "
                                    "read from there)")
    body = require_object(source, parse_json(source, EXPECTED), EXPECTED, KEY)
    if not isinstance(body.get(KEY), Mapping) or "aiperf_version" not in body:
        raise source.fail(EXPECTED, f"no {KEY!r} metric or 'aiperf_version' key")
    records = _records(source)
    summary = _summary(body)
    started_at, ended_at = _time(source, body, "start_time"), _time(source, body, "end_time")
    phase = _phase(body)
    concurrency = count("input_config.phases[profiling].concurrency",
                        optional_number(phase, "concurrency")) or summary.completed + summary.failed
    kept = {name: value * scale for key, (stat, scale, name) in KEPT.items()
            if (value := optional_number(_metric(body, key), stat)) is not None}
    workload = WorkloadResult(
        name=f"c{concurrency}" if phase.get("concurrency") else "aiperf", concurrency=concurrency,
        num_requests=count("input_config.phases[profiling].requests",
                           optional_number(phase, "requests"))
        or summary.completed + summary.failed,
        warmup_requests=0, params={**_params(body), "source_values": kept},
        started_at=started_at, ended_at=ended_at, records=records, summary=summary)
    notes = () if records else (f"no {RECORDS_FILE} beside the file: no request records",)
    return [ImportedRun(
        tool="aiperf", tool_version=str(body["aiperf_version"]), sha256=source.sha256,
        benchmark=0, started_at=started_at, ended_at=ended_at, host="imported",
        workload=workload, source_values=kept, notes=notes)]


def _metric(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return mapping(body, key)


def _summary(body: Mapping[str, Any]) -> WorkloadSummary:
    completed = count("completed_request_count.avg", _avg(body, "completed_request_count")) \
        or count("request_count.avg", _avg(body, "request_count"))
    failed = count("error_request_count.avg", _avg(body, "error_request_count"))
    stats = {}
    for key, name in LATENCIES.items():
        metric = _metric(body, name)
        values = {stat: _ms(metric, field) for stat, field in
                  (("mean", "avg"), ("median", "p50"), ("std", "std"), ("p90", "p90"),
                   ("p99", "p99"))}
        stats[key] = latency_stats(count(f"{name}.count", optional_number(metric, "count")),
                                   values)
    usage = mapping(_metric(body, "input_config"), "endpoint").get("use_server_token_count")
    source = TokenSource.USAGE if usage else TokenSource.CLIENT
    return WorkloadSummary(
        completed=completed, failed=failed, duration_s=_avg(body, "benchmark_duration") or 0.0,
        total_input_tokens=count("total_isl.avg", _avg(body, "total_isl")),
        total_output_tokens=count("total_osl.avg", _avg(body, "total_osl")),
        request_throughput_per_s=_avg(body, "request_throughput"),
        output_throughput_tokens_per_s=_avg(body, "output_token_throughput"),
        total_token_throughput_tokens_per_s=_avg(body, "total_token_throughput"),
        ttft=stats["ttft"], tpot=stats["tpot"], itl=stats["itl"], e2el=stats["e2el"],
        output_tokens_source=source, input_tokens_source=source,
        errors={"aiperf_error": failed} if failed else {})


def _avg(body: Mapping[str, Any], key: str) -> float | None:
    return optional_number(_metric(body, key), "avg")


def _ms(metric: Mapping[str, Any], key: str) -> float | None:
    value = optional_number(metric, key)
    return None if value is None else value / 1000.0


def _phase(body: Mapping[str, Any]) -> Mapping[str, Any]:
    phases = _metric(body, "input_config").get("phases") or []
    if not isinstance(phases, list):
        raise bad_value("input_config.phases", "must be a list", phases)
    found = [p for p in phases if isinstance(p, Mapping) and p.get("kind") == "profiling"]
    return found[0] if found else {}


def _params(body: Mapping[str, Any]) -> dict[str, Any]:
    config = _metric(body, "input_config")
    items = mapping(config, "models", "input_config.models").get("items") or []
    models = [m.get("name") for m in items if isinstance(m, Mapping)] \
        if isinstance(items, list) else []
    return {"aiperf_models": models, "aiperf_endpoint": config.get("endpoint"),
            "aiperf_phase": dict(_phase(body)),
            "aiperf_cli_command": _metric(body, "run_info").get("cli_command")}


def _time(source: SourceFile, body: Mapping[str, Any], key: str) -> datetime:
    try:
        moment = datetime.fromisoformat(str(body.get(key)))
    except ValueError:
        raise source.fail(EXPECTED, f"{key!r} must be an ISO time (got {body.get(key)!r})") from None
    return instant(key, utc(moment))


def _first_line_is_record(source: SourceFile) -> bool:
    try:
        first = parse_untrusted_json(source.text.lstrip().splitlines()[0])
    except (UntrustedJSONError, IndexError):
        return False
    return isinstance(first, Mapping) and "metrics" in first and "metadata" in first


def _records(source: SourceFile) -> tuple[RequestRecord, ...]:
    path = Path(source.path).with_name(RECORDS_FILE)
    if not path.is_file():
        return ()
    records = read_source(path)
    lines = [(number, line) for number, line in enumerate(records.text.splitlines(), start=1)
             if line.strip()]
    rows = [_row(records, number, line) for number, line in lines]
    origin = min((_start_ns(row) for row in rows), default=0)
    built = []
    for i, ((number, _), row) in enumerate(zip(lines, rows, strict=True)):
        try:
            built.append(_record(i, row, origin))
        except BadValue as exc:  # named here: the caller knows only the main file
            raise ImportFormatError(f"{records.path}:{number}: {exc}") from None
    return tuple(built)


def _row(records: SourceFile, line_number: int, line: str) -> Mapping[str, Any]:
    expected = f"AIPerf's per-record {RECORDS_FILE}"
    try:
        row = parse_untrusted_json(line)
    except UntrustedJSONError as exc:
        raise records.fail(expected, f"line {line_number}: " + (TOO_DEEP if exc.too_deep else (
            f"invalid JSON ({exc.msg}); the file may be truncated"))) from None
    metadata = row.get("metadata") if isinstance(row, Mapping) else None
    start = metadata.get("request_start_ns") if isinstance(metadata, Mapping) else None
    if not isinstance(start, int) or not isinstance(row.get("metrics"), Mapping):
        raise records.fail(expected, f"line {line_number}: no 'metadata.request_start_ns' or "
                                     "'metrics'")
    found: Mapping[str, Any] = row
    return found


def _start_ns(row: Mapping[str, Any]) -> int:
    start: int = row["metadata"]["request_start_ns"]
    return start


def _record(index: int, row: Mapping[str, Any], origin_ns: int) -> RequestRecord:
    metrics = row.get("metrics", {})

    def value(name: str) -> Any:
        found = metrics.get(name)
        return found.get("value") if isinstance(found, Mapping) else None

    def number_(name: str) -> float | None:
        found = value(name)
        return None if found is None else finite(f"metrics.{name}.value", found)

    def tokens(name: str) -> int | None:
        found = number_(name)
        return None if found is None else count(f"metrics.{name}.value", found)

    error = row.get("error")
    ttft, latency = number_("time_to_first_token"), number_("request_latency")
    gaps = value("inter_chunk_latency") or []
    if not isinstance(gaps, list):
        raise bad_value("metrics.inter_chunk_latency.value", "must be a list of gaps in ms", gaps)
    return RequestRecord(
        index=index, start_s=(_start_ns(row) - origin_ns) / 1e9,
        ttft_s=None if ttft is None else ttft / 1000.0,
        e2el_s=None if latency is None else latency / 1000.0,
        itl_s=tuple(finite("metrics.inter_chunk_latency.value", g) / 1000.0 for g in gaps),
        output_tokens=tokens("output_sequence_length"),
        output_tokens_source=None, input_tokens=tokens("input_sequence_length"),
        input_tokens_source=None, error_class="aiperf_error" if error else None,
        error=json.dumps(error) if error else None,
        output_chunks=len(gaps) + 1 if ttft is not None else None)
