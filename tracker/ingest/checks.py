"""The one check of every imported run before it is returned: each value within a range that a
real benchmark has, so nonsense (a negative count, a NaN TTFT, a start after its end, the year
9999, an integer past the store's 64 bits, a 100,000-character name) is refused with the value
and where it is, instead of being stored.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable, Mapping

from tracker.ingest.source import (
    MAX_COUNT,
    MAX_NAME_CHARS,
    MAX_SECONDS,
    ImportedRun,
    bad_value,
    instant,
)
from tracker.results import LatencyStats, RequestRecord, WorkloadSummary

MAX_RATE = 1e12  # requests or tokens per second
MAX_SOURCE_VALUE = 1e15  # a value kept under the tool's own name


def check_imported_run(run: ImportedRun) -> None:
    """Raise ``BadValue`` for the first value out of range, naming it."""
    where = f"benchmark {run.benchmark}"
    instant(f"{where}: start time", run.started_at)
    instant(f"{where}: end time", run.ended_at)
    if run.ended_at < run.started_at:
        raise bad_value(f"{where}: start time", f"is after the end time "
                                                f"{run.ended_at.isoformat()}",
                        run.started_at.isoformat())
    workload = run.workload
    _check_name(f"{where}: workload name", workload.name)
    _counts(where, {"concurrency": workload.concurrency,
                    "number of requests": workload.num_requests})
    _check_summary(where, workload.summary)
    for record in workload.records:
        _check_record(f"{where}: request {record.index}", record)
    for name, value in run.source_values.items():
        _check_range(f"{where}: {name}", value, -MAX_SOURCE_VALUE, MAX_SOURCE_VALUE)


def _check_name(where: str, name: str) -> None:
    if not name or len(name) > MAX_NAME_CHARS:
        raise bad_value(where, f"must be 1 to {MAX_NAME_CHARS} characters", name)
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in name):
        raise bad_value(where, "must hold no control characters or lone surrogates", name)


def _counts(where: str, values: Mapping[str, int | None]) -> None:
    for name, value in values.items():
        if value is not None and not 0 <= value <= MAX_COUNT:
            raise bad_value(f"{where}: {name}", f"must be a count of 0 to {MAX_COUNT:.0e}", value)


def _check_range(where: str, value: float | None, low: float, high: float) -> None:
    if value is not None and not (math.isfinite(value) and low <= value <= high):
        raise bad_value(where, f"must be a finite number from {low:g} to {high:g}", value)


def _check_summary(where: str, summary: WorkloadSummary) -> None:
    _counts(where, {"completed requests": summary.completed, "failed requests": summary.failed,
                    "input tokens": summary.total_input_tokens,
                    "output tokens": summary.total_output_tokens, **summary.errors})
    _check_range(f"{where}: duration (s)", summary.duration_s, 0.0, MAX_SECONDS)
    for name, rate in (("request throughput", summary.request_throughput_per_s),
                       ("output throughput", summary.output_throughput_tokens_per_s),
                       ("total token throughput", summary.total_token_throughput_tokens_per_s)):
        _check_range(f"{where}: {name} (per s)", rate, 0.0, MAX_RATE)
    for name, stats in (("TTFT", summary.ttft), ("TPOT", summary.tpot), ("ITL", summary.itl),
                        ("E2EL", summary.e2el)):
        if stats is not None:
            _check_stats(f"{where}: {name}", stats)


def _check_stats(where: str, stats: LatencyStats) -> None:
    _counts(where, {"count": stats.count})
    for name in ("mean_s", "median_s", "std_s", "p90_s", "p99_s"):
        _check_range(f"{where} {name.removesuffix('_s')} (s)", getattr(stats, name), 0.0,
                     MAX_SECONDS)


def _check_record(where: str, record: RequestRecord) -> None:
    _check_range(f"{where}: start (s)", record.start_s, -MAX_SECONDS, MAX_SECONDS)
    for name, value in (("TTFT (s)", record.ttft_s), ("E2EL (s)", record.e2el_s)):
        _check_range(f"{where}: {name}", value, 0.0, MAX_SECONDS)
    _check_gaps(where, record.itl_s)
    _counts(where, {"output tokens": record.output_tokens, "input tokens": record.input_tokens,
                    "output chunks": record.output_chunks})


def _check_gaps(where: str, gaps: Iterable[float]) -> None:
    total = 0.0
    for gap in gaps:
        _check_range(f"{where}: ITL gap (s)", gap, 0.0, MAX_SECONDS)
        total += gap
    _check_range(f"{where}: sum of ITL gaps (s)", total, 0.0, MAX_SECONDS)
