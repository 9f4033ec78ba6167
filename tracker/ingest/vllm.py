"""``vllm bench serve --save-result`` JSON → one tracker run (docs/import-formats.md, "vLLM").

vLLM's definitions are the tracker's (the tracker's JSON keeps vLLM's keys): TTFT, TPOT per
request, ITL per chunk gap, E2EL. Milliseconds become seconds. With ``--save-detailed`` the file
has per-request arrays (``ttfts``, ``itls``, ``input_lens``, ``output_lens``, ``errors``), which
become request records. vLLM saves no per-request start or latency, so a record's E2EL is its
TTFT plus its chunk gaps (vLLM's own latency is the last chunk's time) and ``start_s`` is 0.
Values with no tracker meaning (goodput under vLLM's own SLOs, peak output rate) keep a
``vllm_`` name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from tracker.ingest.source import (
    MAX_NAME_CHARS,
    ImportedRun,
    SourceFile,
    bad_value,
    count,
    duration,
    finite,
    instant,
    latency_stats,
    number,
    optional_number,
    parse_json,
    require_object,
    utc,
)
from tracker.results import LatencyStats, RequestRecord, WorkloadResult, WorkloadSummary

EXPECTED = "a vllm bench serve result (--save-result JSON)"
KEY = "mean_ttft_ms"
LATENCIES = ("ttft", "tpot", "itl", "e2el")
SOURCE_VALUES = {  # vLLM key -> the name it is kept under (no tracker metric means it)
    "request_goodput": "vllm_request_goodput_req_per_s",
    "max_output_tokens_per_s": "vllm_max_output_tokens_per_s",
    "max_concurrent_requests": "vllm_max_concurrent_requests",
}


def load_vllm(source: SourceFile) -> list[ImportedRun]:
    body = require_object(source, parse_json(source, EXPECTED), EXPECTED, KEY)
    if KEY not in body:
        raise source.fail(EXPECTED, f"no {KEY!r} key; expected vLLM's keys such as "
                                    "'duration', 'completed' and 'mean_ttft_ms'")
    duration_s = number(source, body, "duration", EXPECTED)
    records = _records(source, body)
    summary = _summary(source, body, duration_s, records)
    ended_at = _date(source, body)
    started_at = ended_at - duration("duration", duration_s)
    origin = _tracker_origin(source, body)
    workload = WorkloadResult(
        name=origin.get("workload") or _workload_name(body),
        concurrency=_concurrency(body, summary),
        num_requests=count("num_prompts", optional_number(body, "num_prompts"))
        or summary.completed + summary.failed,
        warmup_requests=0, params=_params(body), started_at=started_at, ended_at=ended_at,
        records=records, summary=summary)
    source_values = {name: value for key, name in SOURCE_VALUES.items()
                     if (value := optional_number(body, key)) is not None}
    notes = ["vllm saves no per-request start: records' start_s is 0"] if records else []
    notes += [f"{key}: no p90 in the file (vLLM writes only --metric-percentiles) and no "
              "per-request values: its statistics are not stored" for key in LATENCIES
              if getattr(summary, key) is None and f"median_{key}_ms" in body]
    return [ImportedRun(
        tool="vllm", tool_version=_text(body, "vllm_version"), sha256=source.sha256,
        benchmark=0, started_at=started_at, ended_at=ended_at, host="imported",
        workload=_with_params(workload, source_values), source_values=source_values,
        notes=tuple(notes), simulated=origin.get("simulated") is True,
        config_name=origin.get("config"), suite_name=origin.get("suite"))]


def _tracker_origin(source: SourceFile, body: Mapping[str, Any]) -> dict[str, Any]:
    """What ``tracker export`` adds under ``tracker``: the workload's name, the simulated flag,
    the config's and suite's names ({} for vLLM's own files)."""
    origin = body.get("tracker")
    if origin is None:
        return {}
    if not isinstance(origin, Mapping):
        raise source.fail(EXPECTED, "'tracker' must be an object (what tracker export writes)")
    found: dict[str, Any] = {}
    for key in ("workload", "config", "suite"):
        value = origin.get(key)
        if value is not None:
            if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS:
                raise source.fail(EXPECTED, f"tracker.{key} must be a name of 1 to "
                                            f"{MAX_NAME_CHARS} characters (got {value!r:.60})")
            found[key] = value
    simulated = origin.get("simulated")
    if simulated is not None and not isinstance(simulated, bool):
        raise source.fail(EXPECTED, f"tracker.simulated must be true or false (got {simulated!r:.60})")
    found["simulated"] = simulated
    return found


def _summary(source: SourceFile, body: Mapping[str, Any], duration_s: float,
             records: tuple[RequestRecord, ...]) -> WorkloadSummary:
    completed = count("completed", number(source, body, "completed", EXPECTED))
    failed = optional_number(body, "failed")
    if failed is None:
        prompts = count("num_prompts", optional_number(body, "num_prompts")) or completed
        failed = max(0, prompts - completed)
    samples = _samples(records)
    stats = {key: _stats(body, key, samples.get(key), completed) for key in LATENCIES}
    return WorkloadSummary(
        completed=completed, failed=count("failed", failed), duration_s=duration_s,
        total_input_tokens=count("total_input_tokens",
                                 number(source, body, "total_input_tokens", EXPECTED)),
        total_output_tokens=count("total_output_tokens",
                                  number(source, body, "total_output_tokens", EXPECTED)),
        request_throughput_per_s=optional_number(body, "request_throughput"),
        output_throughput_tokens_per_s=optional_number(body, "output_throughput"),
        total_token_throughput_tokens_per_s=optional_number(body, "total_token_throughput"),
        ttft=stats["ttft"], tpot=stats["tpot"], itl=stats["itl"], e2el=stats["e2el"],
        output_tokens_source=None, input_tokens_source=None,
        errors=_error_counts(records))


def _stats(body: Mapping[str, Any], key: str, samples: Sequence[float] | None,
           completed: int) -> LatencyStats | None:
    """The file's own mean/median/std/p90/p99 (ms → s). A missing p90 is computed from the
    per-request values as vLLM computes percentiles (numpy, linear) when the file has them."""
    values = {stat: _ms(body, f"{stat}_{key}_ms") for stat in ("mean", "median", "std", "p90",
                                                                "p99")}
    if values["p90"] is None and samples:
        values["p90"] = float(np.percentile(samples, 90))
    count = len(samples) if samples is not None else completed
    return latency_stats(count, values)


def _ms(body: Mapping[str, Any], key: str) -> float | None:
    value = optional_number(body, key)
    return None if value is None else value / 1000.0


def _samples(records: Sequence[RequestRecord]) -> dict[str, list[float]]:
    """Each latency's per-request values as vLLM summarises them (TPOT: over 2+ tokens)."""
    if not records:
        return {}
    ok = [r for r in records if r.ok]
    return {
        "ttft": [r.ttft_s for r in ok if r.ttft_s is not None],
        "tpot": [t for r in ok if (t := r.tpot_s) is not None],
        "itl": [gap for r in ok for gap in r.itl_s],
        "e2el": [r.e2el_s for r in ok if r.e2el_s is not None],
    }


def _records(source: SourceFile, body: Mapping[str, Any]) -> tuple[RequestRecord, ...]:
    """Request records from ``--save-detailed``'s arrays, or none when the file has no arrays."""
    ttfts, itls = body.get("ttfts"), body.get("itls")
    if ttfts is None and itls is None:
        return ()
    inputs, outputs = body.get("input_lens") or [], body.get("output_lens") or []
    errors = body.get("errors") or []
    for key, value in (("ttfts", ttfts), ("itls", itls), ("input_lens", inputs),
                       ("output_lens", outputs), ("errors", errors)):
        if not isinstance(value, list):
            raise bad_value(key, "must be a list (one value per request)", value)
    assert isinstance(ttfts, list) and isinstance(itls, list)
    if len(itls) != len(ttfts) or any(len(a) not in (0, len(ttfts))
                                      for a in (inputs, outputs, errors)):
        raise source.fail(EXPECTED, "the per-request arrays 'ttfts', 'itls', 'input_lens', "
                                    "'output_lens', 'errors' differ in length")
    return tuple(_record(i, ttfts[i], itls[i], _at(inputs, i), _at(outputs, i), _at(errors, i))
                 for i in range(len(ttfts)))


def _at(values: Sequence[Any], index: int) -> Any:
    return values[index] if values else None


def _record(index: int, ttft: Any, itl: Any, input_len: Any, output_len: Any,
            error: Any) -> RequestRecord:
    failed = bool(error)
    if itl is not None and not isinstance(itl, list):
        raise bad_value(f"itls[{index}]", "must be a list of chunk gaps in seconds", itl)
    gaps = tuple(finite(f"itls[{index}]", g) for g in itl or ())
    ttft_s = None if failed or ttft is None else finite(f"ttfts[{index}]", ttft)
    return RequestRecord(
        index=index, start_s=0.0, ttft_s=ttft_s,
        e2el_s=None if ttft_s is None else ttft_s + sum(gaps),
        itl_s=gaps, output_tokens=None if failed else _int(f"output_lens[{index}]", output_len),
        output_tokens_source=None, input_tokens=_int(f"input_lens[{index}]", input_len),
        input_tokens_source=None,
        error_class="vllm_error" if failed else None, error=str(error) if failed else None,
        output_chunks=None if failed else len(gaps) + 1)


def _int(where: str, value: Any) -> int | None:
    return None if value is None else count(where, finite(where, value))


def _error_counts(records: Sequence[RequestRecord]) -> dict[str, int]:
    failed = sum(1 for r in records if not r.ok)
    return {"vllm_error": failed} if failed else {}


def _date(source: SourceFile, body: Mapping[str, Any]) -> datetime:
    """vLLM's ``date`` (``%Y%m%d-%H%M%S``, local time, written when the run ended), as UTC."""
    text = body.get("date")
    try:
        date = datetime.strptime(str(text), "%Y%m%d-%H%M%S")
    except ValueError:
        raise source.fail(EXPECTED, f"'date' must be vLLM's %Y%m%d-%H%M%S (got {text!r})") from None
    return instant("date", utc(date))


def _workload_name(body: Mapping[str, Any]) -> str:
    concurrency = optional_number(body, "max_concurrency")
    if concurrency is not None:
        return f"c{count('max_concurrency', concurrency)}"
    rate = body.get("request_rate")
    return "rate-inf" if rate in (None, "inf", float("inf")) else f"rate-{rate}"


def _concurrency(body: Mapping[str, Any], summary: WorkloadSummary) -> int:
    concurrency = optional_number(body, "max_concurrency")
    return count("max_concurrency", concurrency) if concurrency is not None \
        else summary.completed + summary.failed


def _params(body: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("backend", "endpoint_type", "label", "model_id", "tokenizer_id", "num_prompts",
            "request_rate", "burstiness", "max_concurrency")
    return {f"vllm_{key}": body[key] for key in keys if key in body}


def _with_params(workload: WorkloadResult, values: Mapping[str, float]) -> WorkloadResult:
    return replace(workload, params={**workload.params, "source_values": dict(values)})


def _text(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    return str(value) if value is not None else None
