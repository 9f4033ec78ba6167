"""Which tool wrote a result file, from its shape, and the one entry point ``load_imported``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tracker.ingest.source import (
    FORMATS,
    BadValue,
    ImportedRun,
    ImportFormatError,
    SourceFile,
    parse_json,
    read_source,
)
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json

Loader = Callable[[SourceFile], list[ImportedRun]]
ALL_FORMATS = FORMATS  # every format, llm-d's Benchmark Report included


def _loaders() -> dict[str, Loader]:
    from tracker.ingest.aiperf import load_aiperf
    from tracker.ingest.guidellm import load_guidellm
    from tracker.ingest.inference_perf import load_inference_perf
    from tracker.ingest.llmd import load_llmd
    from tracker.ingest.tracker_json import load_tracker_json
    from tracker.ingest.vllm import load_vllm
    return {"vllm": load_vllm, "guidellm": load_guidellm, "aiperf": load_aiperf,
            "inference-perf": load_inference_perf, "llmd": load_llmd,
            "tracker": load_tracker_json}


def sniff_format(source: SourceFile) -> str:
    """``vllm``, ``guidellm``, ``aiperf``, ``inference-perf``, ``llmd`` or ``tracker`` (the
    tracker's own ``tracker.run/1`` JSON) from the file's keys, or an error when none fits."""
    expected = f"a result file of {', '.join(ALL_FORMATS)} (give --format to say which)"
    first = source.text.lstrip()[:1]
    if first == "{" and "\n{" in source.text.strip() and _is_jsonl(source):
        return "aiperf"  # profile_export.jsonl: one record per line
    body = parse_json(source, expected)
    if isinstance(body, list) and body and all(isinstance(row, Mapping) and "start_time" in row
                                               and "info" in row for row in body):
        return "inference-perf"  # per_request_lifecycle_metrics.json: its loader points onward
    if not isinstance(body, Mapping):
        raise source.fail(expected, f"expected a JSON object, got {type(body).__name__}")
    return _format_of(source, body, expected)


def _format_of(source: SourceFile, body: Mapping[str, Any], expected: str) -> str:
    from tracker.ingest.inference_perf import is_inference_perf_report
    from tracker.ingest.llmd import is_llmd_report
    from tracker.ingest.tracker_json import is_tracker_run

    if is_tracker_run(body):
        return "tracker"
    if is_llmd_report(body):
        return "llmd"
    if is_inference_perf_report(body):
        return "inference-perf"
    if "mean_ttft_ms" in body:
        return "vllm"
    if isinstance(body.get("benchmarks"), list):
        return "guidellm"
    if "records" in body or isinstance(body.get("time_to_first_token"), Mapping):
        return "aiperf"
    keys = ", ".join(repr(k) for k in list(body)[:5]) or "none"
    raise source.fail(expected, f"no 'mean_ttft_ms' (vllm), 'benchmarks' (guidellm), "
                                f"'time_to_first_token' (aiperf) or 'load_summary' "
                                f"(inference-perf) key, nor llm-d's version '0.2' report, nor "
                                f"the tracker's 'schema': 'tracker.run/1'; its keys: {keys}")


def _is_jsonl(source: SourceFile) -> bool:
    try:
        parse_untrusted_json(source.text)
    except UntrustedJSONError as exc:
        return not exc.too_deep  # one document, too deep: parse_json says so
    return False


def load_imported(path: str | Path, fmt: str | None = None) -> list[ImportedRun]:
    """The runs in the result file at ``path`` (one per benchmark), sniffed when ``fmt`` is None.

    Every run is checked (``check_imported_run``) before it is returned: a value out of any
    real range is an ``ImportFormatError`` naming the file, the value and where it is."""
    from tracker.ingest.checks import check_imported_run

    source = read_source(path)
    chosen = fmt or sniff_format(source)
    loaders = _loaders()
    if chosen not in loaders:
        raise ImportFormatError(f"--format {chosen}: must be one of {', '.join(ALL_FORMATS)}")
    try:
        runs = loaders[chosen](source)
        for run in runs:
            check_imported_run(run)
    except BadValue as exc:
        raise exc.in_file(source.path) from None
    return runs
