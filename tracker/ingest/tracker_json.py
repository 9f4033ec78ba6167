"""The tracker's own ``tracker.run/1`` JSON (``tracker run --json``, ``tracker bench --json``,
``tracker show --json``) → the run it describes (docs/import-formats.md, "The tracker's own JSON").

The file keeps every workload's name, load and summary (milliseconds become seconds again), the
run's simulated flag and the names of its config and suite, so an import stores what the
original run stored. It holds no per-request records and no GPU or server telemetry: those are
not stored, and each imported workload says so in a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from tracker.ingest.source import (
    ImportedRun,
    SourceFile,
    bad_value,
    count,
    instant,
    latency_stats,
    mapping,
    optional_number,
    parse_json,
    require_object,
)
from tracker.results import (
    ClientHealth,
    LatencyStats,
    TokenSource,
    WorkloadResult,
    WorkloadSummary,
)

SCHEMA = "tracker.run/1"
EXPECTED = f"the tracker's own JSON ({SCHEMA}, from tracker run, bench or show --json)"
NOTE = "the tracker's JSON holds no per-request records and no GPU or server telemetry"


def is_tracker_run(body: Mapping[str, Any]) -> bool:
    """The shape ``sniff`` recognises: ``schema`` is ``tracker.run/1``."""
    return body.get("schema") == SCHEMA


def load_tracker_json(source: SourceFile) -> list[ImportedRun]:
    """One ``ImportedRun`` per workload, in the file's order. They are one run (same config,
    suite and simulated flag), which ``tracker import`` stores as one."""
    body = require_object(source, parse_json(source, EXPECTED), EXPECTED, "schema")
    if not is_tracker_run(body):
        raise source.fail(EXPECTED, f"'schema' must be {SCHEMA!r} (got {body.get('schema')!r})")
    workloads = body.get("workloads")
    if not isinstance(workloads, list):
        raise bad_value("workloads", "must be a list", workloads)
    simulated = body.get("simulated")
    if not isinstance(simulated, bool):
        raise bad_value("simulated", "must be true or false", simulated)
    version = _text(mapping(body, "environment"), "tracker_version")
    host = _text(mapping(body, "environment"), "host") or "imported"
    names = (_name(body, "config"), _name(body, "suite"))
    runs = []
    for index, item in enumerate(workloads):
        if not isinstance(item, Mapping):
            raise bad_value(f"workloads[{index}]", "must be an object", item)
        workload = _workload(f"workloads[{index}]", item)
        runs.append(ImportedRun(
            tool="tracker", tool_version=version, sha256=source.sha256, benchmark=index,
            started_at=workload.started_at, ended_at=workload.ended_at, host=host,
            workload=workload, notes=(NOTE,), simulated=simulated, config_name=names[0],
            suite_name=names[1]))
    return runs


def _name(body: Mapping[str, Any], key: str) -> str:
    found = mapping(body, key).get("name")
    if not isinstance(found, str) or not found:
        raise bad_value(f"{key}.name", "must be the name of the run's " + key, found)
    return found


def _text(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    return None if value is None else str(value)


def _workload(where: str, item: Mapping[str, Any]) -> WorkloadResult:
    name = item.get("name")
    if not isinstance(name, str):
        raise bad_value(f"{where}.name", "must be the workload's name", name)
    complete = item.get("complete", True)
    return WorkloadResult(
        name=name, concurrency=_count(where, item, "concurrency"),
        num_requests=_count(where, item, "num_requests"),
        warmup_requests=_count(where, item, "warmup_requests"),
        params=dict(mapping(item, "params", f"{where}.params")),
        started_at=_time(where, item, "started_at"), ended_at=_time(where, item, "ended_at"),
        records=(), summary=_summary(where, item), complete=complete is not False)


def _count(where: str, item: Mapping[str, Any], key: str) -> int:
    return count(f"{where}.{key}", optional_number(item, key))


def _time(where: str, item: Mapping[str, Any], key: str) -> datetime:
    text = item.get(key)
    try:
        return instant(f"{where}.{key}", datetime.fromisoformat(str(text)))
    except ValueError:
        raise bad_value(f"{where}.{key}", "must be an ISO 8601 time", text) from None


def _summary(where: str, item: Mapping[str, Any]) -> WorkloadSummary:
    completed = _count(where, item, "completed")
    errors = mapping(item, "errors", f"{where}.errors")
    stats = {key: _stats(item, key, completed) for key in
             ("ttft", "tpot", "itl", "e2el", "scheduled_ttft", "scheduled_e2el")}
    return WorkloadSummary(
        completed=completed, failed=_count(where, item, "failed"),
        duration_s=optional_number(item, "duration") or 0.0,
        total_input_tokens=_count(where, item, "total_input_tokens"),
        total_output_tokens=_count(where, item, "total_output_tokens"),
        request_throughput_per_s=optional_number(item, "request_throughput"),
        output_throughput_tokens_per_s=optional_number(item, "output_throughput"),
        total_token_throughput_tokens_per_s=optional_number(item, "total_token_throughput"),
        ttft=stats["ttft"], tpot=stats["tpot"], itl=stats["itl"], e2el=stats["e2el"],
        output_tokens_source=_source(where, item, "output_tokens_source"),
        input_tokens_source=_source(where, item, "input_tokens_source"),
        errors={str(k): count(f"{where}.errors.{k}", optional_number(errors, k)) for k in errors},
        scheduled_ttft=stats["scheduled_ttft"], scheduled_e2el=stats["scheduled_e2el"],
        goodput_req_per_s=optional_number(item, "request_goodput"),
        slo_attainment=optional_number(item, "slo_attainment"),
        token_count_mismatches=_optional_count(where, item, "token_count_mismatches"),
        input_token_count_mismatches=_optional_count(where, item, "input_token_count_mismatches"),
        capacity_at_slo_req_per_s=optional_number(item, "capacity_at_slo_req_per_s"),
        client=_client(item))


def _stats(item: Mapping[str, Any], key: str, completed: int) -> LatencyStats | None:
    """``mean_/median_/std_/p90_/p99_{key}_ms`` in seconds. The count is the completed
    requests' (the JSON does not keep it)."""
    values = {stat: _s(optional_number(item, f"{stat}_{key}_ms"))
              for stat in ("mean", "median", "std", "p90", "p99")}
    return latency_stats(completed, values)


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _optional_count(where: str, item: Mapping[str, Any], key: str) -> int | None:
    value = optional_number(item, key)
    return None if value is None else count(f"{where}.{key}", value)


def _source(where: str, item: Mapping[str, Any], key: str) -> TokenSource | None:
    value = item.get(key)
    if value is None:
        return None
    try:
        return TokenSource(value)
    except ValueError:
        choices = ", ".join(s.value for s in TokenSource)
        raise bad_value(f"{where}.{key}", f"must be one of {choices}", value) from None


def _client(item: Mapping[str, Any]) -> ClientHealth | None:
    health = mapping(item, "client_health")
    if not health:
        return None
    ms: Sequence[str] = ("loop_lag_p99", "loop_lag_max", "send_lag_p50", "send_lag_p99",
                         "send_lag_max")
    lags = {name: _s(optional_number(health, f"{name}_ms")) for name in ms}
    return ClientHealth(
        cpu_fraction=optional_number(health, "cpu_fraction"),
        loop_lag_p99_s=lags["loop_lag_p99"], loop_lag_max_s=lags["loop_lag_max"],
        send_lag_p50_s=lags["send_lag_p50"], send_lag_p99_s=lags["send_lag_p99"],
        send_lag_max_s=lags["send_lag_max"], client_bound=item.get("client_bound") is True,
        reason=_text(health, "reason"))
