"""GuideLLM's benchmarks JSON (``guidellm run … --output kind=json,path=x.json``) → one tracker
run per benchmark (docs/import-formats.md, "GuideLLM").

GuideLLM 0.8.1 writes, per benchmark, a summary and every request it measured
(``requests.successful/errored/incomplete``, unless ``sample_size`` cut them). Its summary is not
the tracker's statistics: its percentiles are inverted-CDF values (the first value whose
cumulative share reaches p, not interpolated), its ``inter_token_latency_ms`` and
``time_per_output_token_ms`` are weighted by each request's tokens, and its "TPOT" includes the
first token. So the tracker's TTFT, TPOT and E2EL are the tracker's statistics of GuideLLM's
per-request values (TTFT, ``request_latency``, output tokens). GuideLLM's own summary is kept
under ``guidellm_`` names. GuideLLM keeps no chunk gaps: ITL is not measured. The throughputs are
GuideLLM's ``*_per_second`` means: its rate distributions are weighted by duration, so the
mean is the successful events inside the measured window over that window, a total over the
wall time. Their other statistics are kept under ``guidellm_`` names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tracker.ingest.source import (
    ImportedRun,
    SourceFile,
    bad_value,
    count,
    epoch_instant,
    mapping,
    optional_number,
    parse_json,
    require_object,
)
from tracker.redaction import redact_text
from tracker.results import (
    RequestRecord,
    WorkloadResult,
    WorkloadSummary,
    compute_latency_stats,
)

EXPECTED = "a GuideLLM benchmarks report (JSON with 'benchmarks')"
KEPT = {  # GuideLLM summary metric -> scale to seconds (None: a rate, kept as it is)
    "time_to_first_token_ms": 1000.0, "inter_token_latency_ms": 1000.0,
    "time_per_output_token_ms": 1000.0, "request_latency": 1.0,
    "requests_per_second": None, "output_tokens_per_second": None, "tokens_per_second": None,
}
STATUSES = {"successful": None, "errored": "guidellm_errored", "incomplete": "guidellm_incomplete"}


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


def _mapping(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return mapping(body, key)


def _successful(metrics: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return _mapping(_mapping(metrics, name), "successful")


def _window(source: SourceFile, bench: Mapping[str, Any], index: int) -> tuple[float, float]:
    scheduler = _mapping(bench, "scheduler_metrics")
    at = f"benchmarks[{index}].scheduler_metrics"
    start = optional_number(scheduler, "measure_start_time")
    end = optional_number(scheduler, "measure_end_time")
    if start is not None and end is not None:
        epoch_instant(f"{at}.measure_start_time", start)
        epoch_instant(f"{at}.measure_end_time", end)
    if start is None or end is None or end <= start:
        raise source.fail(EXPECTED, f"benchmarks[{index}].scheduler_metrics needs "
                                    "measure_start_time < measure_end_time")
    return start, end


def _run(source: SourceFile, index: int, bench: Mapping[str, Any],
         version: str | None) -> ImportedRun:
    metrics = bench["metrics"]
    start, end = _window(source, bench, index)
    totals = _mapping(metrics, "request_totals")
    at = f"benchmarks[{index}].metrics.request_totals"
    completed, errored, incomplete = (count(f"{at}.{key}", optional_number(totals, key))
                                      for key in ("successful", "errored", "incomplete"))
    failed = errored + incomplete
    records = _records(_mapping(bench, "requests"), start)
    notes = ["guidellm has no per-chunk gaps: ITL not measured"]
    if sum(1 for r in records if r.ok) != completed or len(records) != completed + failed:
        notes.append(f"the file holds {len(records)} of {completed + failed} requests "
                     "(sample_size?): TTFT, TPOT and E2EL not stored; GuideLLM's own summary "
                     "is kept under guidellm_ names")
        records = ()
    kept = _kept(metrics)
    summary = _summary(metrics, records, completed, failed, end - start)
    started_at, ended_at = epoch_instant("start", start), epoch_instant("end", end)
    workload = WorkloadResult(
        name=_name(bench, index), concurrency=_concurrency(bench, completed + failed),
        num_requests=completed + failed, warmup_requests=0,
        params={"guidellm_strategy": _mapping(bench, "config").get("strategy"),
                "source_values": kept},
        started_at=started_at, ended_at=ended_at, records=records, summary=summary)
    return ImportedRun(tool="guidellm", tool_version=version, sha256=source.sha256,
                       benchmark=index, started_at=started_at, ended_at=ended_at,
                       host="imported", workload=workload, source_values=kept,
                       notes=tuple(notes))


def _summary(metrics: Mapping[str, Any], records: Sequence[RequestRecord], completed: int,
             failed: int, duration_s: float) -> WorkloadSummary:
    ok = [r for r in records if r.ok]
    input_tokens = _total(metrics, "prompt_token_count")
    output_tokens = _total(metrics, "output_token_count")
    return WorkloadSummary(
        completed=completed, failed=failed, duration_s=duration_s,
        total_input_tokens=input_tokens, total_output_tokens=output_tokens,
        request_throughput_per_s=_rate(metrics, "requests_per_second", completed, duration_s),
        output_throughput_tokens_per_s=_rate(metrics, "output_tokens_per_second",
                                             output_tokens, duration_s),
        total_token_throughput_tokens_per_s=_rate(metrics, "tokens_per_second",
                                                  input_tokens + output_tokens, duration_s),
        ttft=compute_latency_stats(r.ttft_s for r in ok if r.ttft_s is not None),
        tpot=compute_latency_stats(t for r in ok if (t := r.tpot_s) is not None), itl=None,
        e2el=compute_latency_stats(r.e2el_s for r in ok if r.e2el_s is not None),
        output_tokens_source=None, input_tokens_source=None,
        errors=_errors(records, failed))


def _total(metrics: Mapping[str, Any], name: str) -> int:
    """A token count's ``total_sum`` (GuideLLM writes it as mean * count: rounded)."""
    return count(f"{name}.successful.total_sum",
                 round(optional_number(_successful(metrics, name), "total_sum") or 0.0))


def _rate(metrics: Mapping[str, Any], name: str, total: float, duration_s: float) -> float:
    """GuideLLM's mean rate: its rate distribution is weighted by each interval's duration, so
    its mean is the events inside the measured window over the window — a total over the wall
    time, the tracker's throughput. Without it: the file's total over the window."""
    mean = optional_number(_successful(metrics, name), "mean")
    return total / duration_s if mean is None else mean


def _errors(records: Sequence[RequestRecord], failed: int) -> dict[str, int]:
    if not records:
        return {"guidellm_errored": failed} if failed else {}
    found = Counter(r.error_class for r in records if r.error_class is not None)
    return dict(found)


def _records(requests: Mapping[str, Any], window_start: float) -> tuple[RequestRecord, ...]:
    for status in STATUSES:
        if not isinstance(requests.get(status) or [], list):
            raise bad_value(f"requests.{status}", "must be a list of requests",
                            requests.get(status))
    rows = [(row, error_class) for status, error_class in STATUSES.items()
            for row in (requests.get(status) or []) if isinstance(row, Mapping)]
    rows.sort(key=lambda item: optional_number(item[0], "request_start_time") or window_start)
    return tuple(_record(i, row, error_class, window_start)
                 for i, (row, error_class) in enumerate(rows))


def _record(index: int, row: Mapping[str, Any], error_class: str | None,
            window_start: float) -> RequestRecord:
    ttft_ms = optional_number(row, "time_to_first_token_ms")
    latency = optional_number(row, "request_latency")
    start = optional_number(row, "request_start_time")
    info = _mapping(row, "info")
    output_tokens = optional_number(row, "output_tokens")
    input_tokens = optional_number(row, "prompt_tokens")
    error = info.get("error") if error_class else None
    chunks = optional_number(_mapping(info, "timings"), "token_iterations")
    return RequestRecord(
        index=index, start_s=0.0 if start is None else start - window_start,
        ttft_s=None if ttft_ms is None or error_class else ttft_ms / 1000.0,
        e2el_s=None if error_class else latency, itl_s=(),
        output_tokens=None if output_tokens is None else count("output_tokens", output_tokens),
        output_tokens_source=None,
        input_tokens=None if input_tokens is None else count("prompt_tokens", input_tokens),
        input_tokens_source=None, error_class=error_class,
        error=None if not error_class else redact_text(str(error or error_class)),
        output_chunks=None if chunks is None else count("token_iterations", chunks))


def _kept(metrics: Mapping[str, Any]) -> dict[str, float]:
    """GuideLLM's own summary statistics, under ``guidellm_{metric}_{stat}[_s]``."""
    kept: dict[str, float] = {}
    for name, scale in KEPT.items():
        dist = _successful(metrics, name)
        percentiles = _mapping(dist, "percentiles")
        base, unit = name.removesuffix("_ms"), "" if scale is None else "_s"
        for stat, value in (("mean", optional_number(dist, "mean")),
                            ("median", optional_number(dist, "median")),
                            ("std", optional_number(dist, "std_dev")),
                            ("p90", optional_number(percentiles, "p90")),
                            ("p99", optional_number(percentiles, "p99"))):
            if value is not None:
                kept[f"guidellm_{base}_{stat}{unit}"] = value / (scale or 1.0)
    return kept


def _strategy(bench: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(_mapping(bench, "config"), "strategy")


def _name(bench: Mapping[str, Any], index: int) -> str:
    strategy = _strategy(bench)
    kind, streams, rate = strategy.get("type_"), _streams(bench), strategy.get("rate")
    if kind == "concurrent" and streams:
        return f"c{streams}"
    if rate:
        return f"{kind or 'rate'}-{rate}"
    return f"{kind or 'benchmark'}-{index}"


def _concurrency(bench: Mapping[str, Any], requests: int) -> int:
    streams = _streams(bench)
    return streams if streams is not None else requests


def _streams(bench: Mapping[str, Any]) -> int | None:
    streams = optional_number(_strategy(bench), "streams")
    return None if streams is None else count("config.strategy.streams", streams)
