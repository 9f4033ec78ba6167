"""llm-d-benchmark's Benchmark Report v0.2 (``version: "0.2"``) ↔ one tracker run
(docs/import-formats.md, "llm-d").

The report is a tool-neutral wrapper: ``scenario.load.standardized.tool`` names the harness that
measured it, and the schema says the meaning of ``time_per_output_token`` and
``inter_token_latency`` depends on that tool. So TTFT and ``request_latency`` (E2EL) always map
onto the tracker's names. TPOT and ITL map only for a tool known to define them as the tracker
does (vLLM's ``vllm bench serve``, and the tracker's own export), and the throughputs likewise
only where the tool's rate is the run's aggregate (completed over the wall time). Everything
else is kept under an ``llmd_`` name. ``normalized_time_per_output_token`` includes the first
token and is never the tracker's TPOT. Statistics in ms, s, ms/token or s/token become seconds.

``render_llmd_report`` writes a stored run's workload back as a v0.2 report (stats in ms, the
tool ``tracker``). Read back, it gives the same statistics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from tracker.ingest.source import (
    ImportedRun,
    SourceFile,
    bad_value,
    count,
    duration,
    instant,
    latency_stats,
    mapping,
    optional_number,
    parse_json,
    require_object,
    utc,
)
from tracker.inputs.yamlfile import YamlLimitError, load_bounded_yaml
from tracker.results import LatencyStats, RunResult, WorkloadResult, WorkloadSummary

EXPECTED = "an llm-d Benchmark Report v0.2 (version '0.2' with 'run' and 'results')"
VERSION = "0.2"
TRACKERS_DEFINITIONS = frozenset({"vllm", "vllm-benchmark", "vllm bench serve", "tracker"})
SCALES_S = {"ms": 1000.0, "s": 1.0, "ms/token": 1000.0, "s/token": 1.0}
STATS = {"mean": "mean", "median": "p50", "std": "stddev", "p90": "p90", "p99": "p99"}
THROUGHPUTS = {"output_token_rate": "output_throughput_tokens_per_s",
               "requests_rate": "request_throughput_per_s",
               "total_token_rate": "total_token_throughput_tokens_per_s"}
DURATION = re.compile(r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?"
                      r"(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$")


def is_llmd_report(body: Mapping[str, Any]) -> bool:
    """The shape ``sniff`` recognises: version "0.2", a ``run`` and results.request_performance."""
    results = body.get("results")
    return (str(body.get("version")) == VERSION and isinstance(body.get("run"), Mapping)
            and isinstance(results, Mapping)
            and isinstance(results.get("request_performance"), Mapping))


def load_llmd(source: SourceFile) -> list[ImportedRun]:
    body = require_object(source, _parse(source), EXPECTED, "version")
    if not is_llmd_report(body):
        keys = ", ".join(repr(k) for k in list(body)[:5]) or "none"
        raise source.fail(EXPECTED, f"needs version '0.2' (got {body.get('version')!r}), a 'run' "
                                    f"object and results.request_performance; its keys: {keys}")
    load = _load(body)
    tool = _text(load, "tool")
    trackers = tool is not None and tool.lower() in TRACKERS_DEFINITIONS
    aggregate = _object(body["results"]["request_performance"], "aggregate")
    started_at, ended_at, notes = _times(source, _object(body["run"], "time"))
    summary, kept, more = _summary(source, aggregate, trackers, ended_at - started_at)
    inner = " ".join(t for t in (tool, _text(load, "tool_version")) if t) or None
    notes = [f"llm-d report of {inner or 'an unnamed tool'} (scenario.load.standardized)",
             *notes, *more]
    concurrency = optional_number(load, "concurrency")
    rate = optional_number(load, "rate_qps")
    workload = WorkloadResult(
        name=_name(concurrency, rate), num_requests=summary.completed + summary.failed,
        concurrency=int(concurrency) if concurrency else summary.completed + summary.failed,
        warmup_requests=0, params=_params(body, load, kept), started_at=started_at,
        ended_at=ended_at, records=(), summary=summary)
    return [ImportedRun(tool="llmd", tool_version=inner, sha256=source.sha256, benchmark=0,
                        started_at=started_at, ended_at=ended_at, host="imported",
                        workload=workload, source_values=kept, notes=tuple(notes))]


def _parse(source: SourceFile) -> Any:
    """JSON, or the YAML llm-d-benchmark also writes."""
    if source.text.lstrip()[:1] in ("{", "[", ""):
        return parse_json(source, EXPECTED)
    try:
        return load_bounded_yaml(source.text)
    except YamlLimitError as exc:
        at = "" if exc.line is None else f"line {exc.line}: "
        raise source.fail(EXPECTED, f"neither JSON nor YAML within limits ({at}{exc}); the "
                                    "file may be truncated") from None


def _object(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return mapping(body, key)


def _load(body: Mapping[str, Any]) -> Mapping[str, Any]:
    return _object(_object(_object(body, "scenario"), "load"), "standardized")


def _text(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    return str(value) if value is not None else None


def _times(source: SourceFile, time: Mapping[str, Any]) -> tuple[datetime, datetime, list[str]]:
    """run.time's start and end (or start + duration) as UTC. A naive time is taken as UTC."""
    start, end = _instant(source, time, "start"), _instant(source, time, "end")
    if start is None:
        raise source.fail(EXPECTED, "run.time.start is missing; the run needs its start time")
    if end is None and (text := time.get("duration")) is not None:
        end = (start[0] + _duration(source, str(text)), start[1])
    if end is None or end[0] < start[0]:
        raise source.fail(EXPECTED, "run.time needs an end (or a duration) not before its start")
    naive = [f"run.time.{k} has no time zone: taken as UTC" for k, (_, n) in
             (("start", start), ("end", end)) if n]
    return start[0], end[0], naive


def _instant(source: SourceFile, time: Mapping[str, Any],
             key: str) -> tuple[datetime, bool] | None:
    value = time.get(key)
    if value is None:
        return None
    if isinstance(value, datetime):  # YAML reads an unquoted ISO time as a datetime
        return instant(f"run.time.{key}", value), value.tzinfo is None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise source.fail(EXPECTED, f"run.time.{key} must be an ISO-8601 time "
                                    f"(got {value!r})") from None
    return instant(f"run.time.{key}", utc(parsed)), parsed.tzinfo is None


def _duration(source: SourceFile, text: str) -> timedelta:
    found = DURATION.match(text)
    if found is None or text in ("P", "PT"):
        raise source.fail(EXPECTED, f"run.time.duration must be an ISO-8601 duration such as "
                                    f"PT120.5S (got {text!r})")
    parts = {k: float(v) if v else 0.0 for k, v in found.groupdict().items()}
    seconds = parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]
    if not seconds < float("inf"):
        raise bad_value("run.time.duration", "must be a finite duration", text)
    return duration("run.time.duration", seconds)


def _values_s(source: SourceFile, where: str,
              stats: Mapping[str, Any]) -> dict[str, float | None]:
    """One Statistics object's mean/median/std/p90/p99 in seconds."""
    units = stats.get("units")
    if units not in SCALES_S:
        raise source.fail(EXPECTED, f"{where}.units must be one of {', '.join(SCALES_S)} "
                                    f"(got {units!r})")
    scale = SCALES_S[str(units)]
    return {stat: None if (v := optional_number(stats, key)) is None else v / scale
            for stat, key in STATS.items()}


def _summary(source: SourceFile, aggregate: Mapping[str, Any], trackers: bool,
             window: timedelta) -> tuple[WorkloadSummary, dict[str, float], list[str]]:
    requests = _object(aggregate, "requests")
    at = "results.request_performance.aggregate.requests"
    total, failures, incomplete = (count(f"{at}.{key}", optional_number(requests, key))
                                   for key in ("total", "failures", "incomplete"))
    if failures + incomplete > total:
        raise bad_value(f"{at}.failures", f"with incomplete ({incomplete}) is more than the "
                                          f"total ({total})", failures)
    completed = total - failures - incomplete
    stats, kept, notes = _latencies(source, _object(aggregate, "latency"), trackers, completed)
    rates, kept_rates, rate_notes = _rates(_object(aggregate, "throughput"), trackers)
    errors = {k: n for k, n in (("llmd_failures", failures), ("llmd_incomplete", incomplete))
              if n}
    summary = WorkloadSummary(
        completed=completed, failed=failures + incomplete, duration_s=window.total_seconds(),
        total_input_tokens=_tokens(requests, "input_length", completed),
        total_output_tokens=_tokens(requests, "output_length", completed),
        request_throughput_per_s=rates.get("request_throughput_per_s"),
        output_throughput_tokens_per_s=rates.get("output_throughput_tokens_per_s"),
        total_token_throughput_tokens_per_s=rates.get("total_token_throughput_tokens_per_s"),
        ttft=stats.get("ttft"), tpot=stats.get("tpot"), itl=stats.get("itl"),
        e2el=stats.get("e2el"), output_tokens_source=None, input_tokens_source=None,
        errors=errors)
    return summary, {**kept, **kept_rates}, [*notes, *rate_notes]


def _latencies(source: SourceFile, latency: Mapping[str, Any], trackers: bool,
               completed: int) -> tuple[dict[str, LatencyStats | None], dict[str, float],
                                        list[str]]:
    """The tracker's stats for the names that mean the same, with the rest kept as ``llmd_*_s``."""
    targets = {"time_to_first_token": "ttft", "request_latency": "e2el",
               "time_per_output_token": "tpot" if trackers else None,
               "inter_token_latency": "itl" if trackers else None,
               "normalized_time_per_output_token": None}
    stats: dict[str, LatencyStats | None] = {}
    kept: dict[str, float] = {}
    notes: list[str] = []
    for name, target in targets.items():
        if not isinstance(found := latency.get(name), Mapping):
            continue
        values = _values_s(source, f"results.request_performance.aggregate.latency.{name}",
                           found)
        if target is None:
            kept.update({f"llmd_{name}_{k}_s": v for k, v in values.items() if v is not None})
            continue
        stats[target] = latency_stats(completed, values)
        if stats[target] is None:
            missing = ", ".join(STATS[k] for k, v in values.items() if v is None)
            notes.append(f"{name}: no {missing or 'successful request'} in the report: its "
                         "statistics are not stored")
    if not trackers:
        notes.append("time_per_output_token and inter_token_latency mean what the tool means: "
                     "kept as llmd_*, not the tracker's TPOT and ITL")
    return stats, kept, notes


def _rates(throughput: Mapping[str, Any],
           trackers: bool) -> tuple[dict[str, float], dict[str, float], list[str]]:
    means = {name: v for name in THROUGHPUTS if isinstance(found := throughput.get(name), Mapping)
             and (v := optional_number(found, "mean")) is not None}
    if trackers:
        return {THROUGHPUTS[name]: v for name, v in means.items()}, {}, []
    kept = {f"llmd_{name}_mean_per_s": v for name, v in means.items()}
    note = ["throughputs: the tool's rates are not known to be the run's aggregate: kept as "
            "llmd_*_mean_per_s"] if means else []
    return {}, kept, note


def _tokens(requests: Mapping[str, Any], key: str, completed: int) -> int:
    """A total from the per-request mean over the successful requests (0: not reported)."""
    mean = optional_number(_object(requests, key), "mean")
    return round(mean * completed) if mean is not None else 0


def _name(concurrency: float | None, rate: float | None) -> str:
    if concurrency:
        return f"c{int(concurrency)}"
    return f"rate-{rate:g}" if rate else "benchmark"


def _params(body: Mapping[str, Any], load: Mapping[str, Any],
            kept: Mapping[str, float]) -> dict[str, Any]:
    run = body["run"]
    found = {f"llmd_run_{k}": run[k] for k in ("uid", "eid", "cid", "user") if k in run}
    found |= {f"llmd_{k}": load[k] for k in ("tool", "tool_version", "stage", "rate_qps",
                                             "concurrency") if k in load}
    return {**found, "source_values": dict(kept)}


# --- export ----------------------------------------------------------------------------------


def render_llmd_report(run: RunResult, workload: WorkloadResult) -> dict[str, Any]:
    """One workload of a stored run as a v0.2 report: the tracker's definitions, stats in ms."""
    s = workload.summary
    latency = {name: _statistics_ms(stats, unit) for name, stats, unit in (
        ("time_to_first_token", s.ttft, "ms"), ("time_per_output_token", s.tpot, "ms/token"),
        ("inter_token_latency", s.itl, "ms/token"), ("request_latency", s.e2el, "ms"))
        if stats is not None}
    rates = {name: {"units": unit, "mean": value} for name, unit, value in (
        ("output_token_rate", "token/s", s.output_throughput_tokens_per_s),
        ("requests_rate", "qps", s.request_throughput_per_s),
        ("total_token_rate", "token/s", s.total_token_throughput_tokens_per_s))
        if value is not None}
    per_request = max(s.completed, 1)
    input_mean = s.total_input_tokens / per_request
    requests = {"total": s.completed + s.failed, "failures": s.failed, "incomplete": 0,
                "input_length": {"units": "count", "mean": input_mean},
                "output_length": {"units": "count", "mean": s.total_output_tokens / per_request}}
    duration_s = (workload.ended_at - workload.started_at).total_seconds()
    return {
        "version": VERSION,
        "run": {"uid": f"tracker-run-{run.run_id}-{workload.name}",
                "eid": f"{run.config.name}@{run.config.version[:12]}",
                "time": {"start": workload.started_at.isoformat(),
                         "end": workload.ended_at.isoformat(), "duration": f"PT{duration_s}S"}},
        "scenario": {"load": {
            "metadata": {"schema_version": "0.0.1", "cfg_id": run.suite.name,
                         "description": f"tracker workload {workload.name}"},
            "standardized": {"tool": "tracker", "tool_version": run.tracker_version, "stage": 1,
                             "input_seq_len": {"distribution": "other", "value": input_mean},
                             "concurrency": workload.concurrency}}},
        "results": {"request_performance": {"aggregate": {
            "requests": requests, "latency": latency, "throughput": rates}}},
    }


def _statistics_ms(stats: LatencyStats, units: str) -> dict[str, Any]:
    return {"units": units, "mean": stats.mean_s * 1000.0, "stddev": stats.std_s * 1000.0,
            "p50": stats.median_s * 1000.0, "p90": stats.p90_s * 1000.0,
            "p99": stats.p99_s * 1000.0}
