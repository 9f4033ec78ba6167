"""inference-perf's lifecycle report (``summary_lifecycle_metrics.json`` or
``stage_N_lifecycle_metrics.json``, with ``per_request_lifecycle_metrics.json`` beside it) → one
tracker run (docs/import-formats.md, "inference-perf").

inference-perf 0.7.0 summarises with numpy (mean and linear percentiles) but writes no standard
deviation, so the tracker's statistics come from its per-request report: TTFT (first token -
start), E2EL (``end_time - start_time``), the tracker's TPOT and its ITL (every gap of
``chunk_times``). inference-perf's own "TPOT" is ``(last token - first token) / (out - 1)`` (no
stream tail), its ITL is every gap between *token* times, and its NTPOT is ``latency / out``: all
are kept under ``inference_perf_`` names. Its throughputs are totals over the last end minus the
first start of the report's requests: the tracker's.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracker.ingest.source import (
    FIX,
    BadValue,
    ImportedRun,
    ImportFormatError,
    SourceFile,
    count,
    duration,
    instant,
    mapping,
    optional_number,
    parse_json,
    read_source,
    require_object,
    utc,
)
from tracker.inputs.yamlfile import YamlLimitError, load_bounded_yaml
from tracker.redaction import redact_text
from tracker.results import (
    RequestRecord,
    TokenSource,
    WorkloadResult,
    WorkloadSummary,
    compute_latency_stats,
)

EXPECTED = "an inference-perf lifecycle report (JSON with 'load_summary' and 'successes')"
PER_REQUEST = "per_request_lifecycle_metrics.json"
STAGE_FILE = re.compile(r"stage_(\d+)_lifecycle_metrics\.json$")
KEPT = ("time_to_first_token", "time_per_output_token", "normalized_time_per_output_token",
        "inter_token_latency", "request_latency")
MAX_CLOCK_S = 1e12  # a request's start and end on inference-perf's clock (31,700 years)
MAX_STAGE = 10_000  # inference-perf numbers its stages from 0; no real run has this many
KEPT_STATS = (("mean", "mean"), ("median", "median"), ("p90", "p90"), ("p99", "p99"))


def is_inference_perf_report(body: Mapping[str, Any]) -> bool:
    successes = body.get("successes")
    return isinstance(body.get("load_summary"), Mapping) and isinstance(successes, Mapping) \
        and isinstance(successes.get("latency"), Mapping)


def load_inference_perf(source: SourceFile) -> list[ImportedRun]:
    parsed = parse_json(source, EXPECTED)
    if isinstance(parsed, list) and parsed and all(isinstance(row, Mapping) and "start_time" in row
                                                   for row in parsed):
        raise source.fail(EXPECTED, f"this is the per-request {PER_REQUEST}; import the "
                                    "summary or a stage report beside it (its records are read "
                                    "from there)")
    body = require_object(source, parsed, EXPECTED, "load_summary")
    if not is_inference_perf_report(body):
        raise source.fail(EXPECTED, "no 'load_summary' object or 'successes.latency' object")
    duration_s = optional_number(body, "benchmark_time_seconds")
    if duration_s is None or duration_s <= 0:
        raise source.fail(EXPECTED, "'benchmark_time_seconds' must be a number > 0 (got "
                                    f"{body.get('benchmark_time_seconds')!r})")
    duration("benchmark_time_seconds", duration_s)
    _stage(source)
    notes: list[str] = []
    records = _records(source, body, duration_s, notes)
    summary = _summary(body, records, duration_s)
    started_at, ended_at = _window(source, duration_s, notes)
    kept = _kept(body)
    load = _mapping(body, "load_summary")
    concurrency = optional_number(load, "concurrency")
    workload = WorkloadResult(
        name=_name(source, load), num_requests=summary.completed + summary.failed,
        concurrency=count("load_summary.concurrency", concurrency) or summary.completed
        + summary.failed,
        warmup_requests=0, params={"inference_perf_load": dict(load), "source_values": kept},
        started_at=started_at, ended_at=ended_at, records=records, summary=summary)
    return [ImportedRun(tool="inference-perf", tool_version=None, sha256=source.sha256,
                        benchmark=0, started_at=started_at, ended_at=ended_at, host="imported",
                        workload=workload, source_values=kept, notes=tuple(notes))]


def _mapping(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return mapping(body, key)


def _stage(source: SourceFile) -> int | None:
    """The stage number in a ``stage_N_lifecycle_metrics.json`` file name, or None for another."""
    found = STAGE_FILE.search(Path(source.path).name)
    if found is None:
        return None
    if len(found.group(1)) > 5 or int(found.group(1)) > MAX_STAGE:
        raise source.fail(EXPECTED, f"the file name says stage {found.group(1)}, past any real "
                                    f"run (at most {MAX_STAGE} stages); import the stage file "
                                    "inference-perf wrote, under its own name")
    return int(found.group(1))


def _summary(body: Mapping[str, Any], records: Sequence[RequestRecord],
             duration_s: float) -> WorkloadSummary:
    successes, failures = _mapping(body, "successes"), _mapping(body, "failures")
    throughput = _mapping(successes, "throughput")
    ok = [r for r in records if r.ok]
    failed = count("failures.count", optional_number(failures, "count"))
    source = TokenSource.USAGE if ok and all(
        r.output_tokens_source is TokenSource.USAGE for r in ok) else None
    return WorkloadSummary(
        completed=count("successes.count", optional_number(successes, "count")), failed=failed,
        duration_s=duration_s,
        total_input_tokens=count("successes.prompt_tokens.total", round(
            optional_number(_mapping(successes, "prompt_tokens"), "total") or 0)),
        total_output_tokens=count("successes.output_tokens.total", round(
            optional_number(_mapping(successes, "output_tokens"), "total") or 0)),
        request_throughput_per_s=optional_number(throughput, "requests_per_sec"),
        output_throughput_tokens_per_s=optional_number(throughput, "output_tokens_per_sec"),
        total_token_throughput_tokens_per_s=optional_number(throughput, "total_tokens_per_sec"),
        ttft=compute_latency_stats(r.ttft_s for r in ok if r.ttft_s is not None),
        tpot=compute_latency_stats(t for r in ok if (t := r.tpot_s) is not None),
        itl=compute_latency_stats(gap for r in ok for gap in r.itl_s),
        e2el=compute_latency_stats(r.e2el_s for r in ok if r.e2el_s is not None),
        output_tokens_source=source, input_tokens_source=source,
        errors={"inference_perf_error": failed} if failed else {})


def _kept(body: Mapping[str, Any]) -> dict[str, float]:
    """inference-perf's own statistics (seconds), under ``inference_perf_{metric}_{stat}_s``."""
    latency = _mapping(_mapping(body, "successes"), "latency")
    kept: dict[str, float] = {}
    for name in KEPT:
        for stat, key in KEPT_STATS:
            if (value := optional_number(_mapping(latency, name), key)) is not None:
                kept[f"inference_perf_{name}_{stat}_s"] = value
    return kept


def _name(source: SourceFile, load: Mapping[str, Any]) -> str:
    concurrency, rate = load.get("concurrency"), load.get("requested_rate")
    if isinstance(concurrency, int) and concurrency > 0:
        return f"c{concurrency}"
    if isinstance(rate, int | float) and not isinstance(rate, bool):
        return f"rate-{rate:g}"
    stage = STAGE_FILE.search(Path(source.path).name)
    return f"stage-{stage.group(1)}" if stage else "all-stages"


def _records(source: SourceFile, body: Mapping[str, Any], duration_s: float,
             notes: list[str]) -> tuple[RequestRecord, ...]:
    """The report's requests from the per-request report beside it, checked against the
    report's own count and time span, or () with a note when they cannot be matched."""
    path = Path(source.path).with_name(PER_REQUEST)
    if not path.is_file():
        notes.append(f"no {PER_REQUEST} beside the file: no request records, and TTFT, TPOT, "
                     "ITL and E2EL not stored (inference-perf writes no standard deviation)")
        return ()
    rows = _rows(read_source(path))
    total = count("load_summary.count", optional_number(_mapping(body, "load_summary"), "count"))
    stage = _stage(source)
    if stage is not None:  # stages run one after another: skip the earlier stages' requests
        earlier = [_stage_count(source, k) for k in range(stage)] \
            if _has_stages_before(source, stage) else [None]
        before = sum(n for n in earlier if n is not None)
        rows = [] if None in earlier else rows[before:before + total]
    span = (max(r["end_time"] for r in rows) - min(r["start_time"] for r in rows)) if rows \
        else 0.0
    if len(rows) != total or abs(span - duration_s) > 1e-9:
        notes.append(f"{PER_REQUEST} does not hold this report's {total} requests over "
                     f"{duration_s:.6f} s: no request records, latencies not stored")
        return ()
    origin = min(r["start_time"] for r in rows)
    return tuple(_record(i, row, origin) for i, row in enumerate(rows))


def _has_stages_before(source: SourceFile, stage: int) -> bool:
    """Whether every stage before ``stage`` has its report beside (counted, not probed)."""
    found = {int(m.group(1)) for p in Path(source.path).parent.glob("stage_*_lifecycle_metrics.json")
             if (m := STAGE_FILE.search(p.name)) and len(m.group(1)) <= 5}
    return set(range(stage)) <= found


def _stage_count(source: SourceFile, stage: int) -> int | None:
    """An earlier stage's request count, from its report beside, or None when it is missing."""
    path = Path(source.path).with_name(f"stage_{stage}_lifecycle_metrics.json")
    if not path.is_file():
        return None
    body = parse_json(read_source(path), EXPECTED)
    found = optional_number(_mapping(body, "load_summary"), "count") if isinstance(
        body, Mapping) else None
    return None if found is None else count(f"{path.name}: load_summary.count", found)


def _rows(per_request: SourceFile) -> list[Mapping[str, Any]]:
    expected = f"inference-perf's per-request report ({PER_REQUEST})"
    rows = parse_json(per_request, expected)
    if not isinstance(rows, list):
        raise per_request.fail(expected, f"expected a JSON list, got {type(rows).__name__}")
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping) or optional_number(row, "start_time") is None \
                or optional_number(row, "end_time") is None:
            raise per_request.fail(expected, f"[{i}] has no numeric 'start_time' and 'end_time'")
        start, end = float(row["start_time"]), float(row["end_time"])
        if not -MAX_CLOCK_S <= start <= end <= MAX_CLOCK_S:
            raise per_request.fail(expected, f"[{i}]: 'start_time' {start!r} and 'end_time' "
                                             f"{end!r} must be seconds on one clock, start "
                                             f"first, within {MAX_CLOCK_S:.0e}; {FIX}")
    return sorted(rows, key=lambda row: float(row["start_time"]))


def _record(index: int, row: Mapping[str, Any], origin: float) -> RequestRecord:
    info = _mapping(row, "info")
    response = _mapping(info, "response_metrics")
    usage = _mapping(response, "server_usage")
    chunks = [float(t) for t in response.get("chunk_times") or [] if isinstance(t, int | float)]
    start, end, error = float(row["start_time"]), float(row["end_time"]), row.get("error")
    output = optional_number(usage, "completion_tokens")
    prompt = optional_number(usage, "prompt_tokens")
    if prompt is None:
        prompt = optional_number(_mapping(_mapping(info, "request_metrics"), "text"),
                                 "input_tokens")
    return RequestRecord(
        index=index, start_s=start - origin,
        ttft_s=chunks[0] - start if chunks and not error else None,
        e2el_s=None if error else end - start,
        itl_s=tuple(b - a for a, b in itertools.pairwise(chunks)),
        output_tokens=None if error else _count(output, response.get("output_tokens")),
        output_tokens_source=TokenSource.USAGE if output is not None else None,
        input_tokens=None if prompt is None else int(prompt),
        input_tokens_source=TokenSource.USAGE if "prompt_tokens" in usage else None,
        error_class="inference_perf_error" if error else None,
        error=redact_text(json.dumps(error)) if error else None,
        output_chunks=len(chunks) or None)


def _count(server: float | None, client: Any) -> int | None:
    if server is not None:
        return int(server)
    return int(client) if isinstance(client, int) and not isinstance(client, bool) else None


def _window(source: SourceFile, duration_s: float, notes: list[str]) -> tuple[datetime, datetime]:
    """Wall-clock start and end from the llm-d partial reports inference-perf writes beside
    (``inference-perf.partial.stage_N.yaml``: ``run.time``), else the file's modification time."""
    here = Path(source.path)
    stage = STAGE_FILE.search(here.name)
    pattern = f"inference-perf.partial.stage_{stage.group(1)}.yaml" if stage else \
        "inference-perf.partial.stage_*.yaml"
    times = [t for path in sorted(here.parent.glob(pattern)) if (t := _run_time(path))]
    if times:
        return min(t[0] for t in times), max(t[1] for t in times)
    notes.append("no inference-perf.partial.stage_*.yaml beside the file: the run's time is the "
                 "file's modification time")
    ended = datetime.fromtimestamp(here.stat().st_mtime, UTC)
    return ended - duration("benchmark_time_seconds", duration_s), ended


def _run_time(path: Path) -> tuple[datetime, datetime] | None:
    """``run.time`` of a partial report, or None when it has none. A file past the YAML limits,
    or a time out of range, is refused."""
    try:
        body = load_bounded_yaml(read_source(path).text)
    except YamlLimitError as exc:
        at = f"{path}:{exc.line}" if exc.line is not None else str(path)
        raise ImportFormatError(f"{at}: {exc}") from None
    time = body.get("run", {}).get("time") if isinstance(body, Mapping) and isinstance(
        body.get("run"), Mapping) else None
    if not isinstance(time, Mapping):
        return None
    try:
        start, end = (instant(f"run.time.{key}", utc(value if isinstance(value, datetime) else
                                                     datetime.fromisoformat(str(value))))
                      for key, value in (("start", time.get("start")), ("end", time.get("end"))))
    except ValueError:
        return None
    except BadValue as exc:
        raise exc.in_file(str(path)) from None
    if end < start:
        raise ImportFormatError(f"{path}: run.time.end {end.isoformat()} is before run.time.start "
                                f"{start.isoformat()}; {FIX}")
    return start, end
