"""Run detail and Compare helpers: choosing runs, and the tables they show (an imported run's
source and tool-named values among them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd
import streamlit as st

from tracker.dashboard import data, ui
from tracker.dashboard.trend_series import (
    display_format,
    display_unit,
    metric_label,
    split_latency,
)
from tracker.errors import NotFoundError
from tracker.metrics import GIB, REGISTRY
from tracker.reports.run_report import WORKLOAD_HEADERS
from tracker.results import IMPORT_KEY, RunResult
from tracker.store.queries import RunDetail

SUMMARY_METRICS = ("request_throughput_per_s", "output_throughput_tokens_per_s",
                   "ttft_median_s", "ttft_p99_s", "tpot_median_s", "tpot_p99_s",
                   "itl_median_s", "itl_p99_s", "e2el_median_s", "e2el_p99_s")
# Beside the throughputs when any workload of the run measured them (a priced config, NVML energy)
COST_ENERGY_METRICS = ("usd_per_1m_output_tokens", "usd_per_1m_tokens", "joules_per_output_token",
                       "joules_per_token", "gpu_memory_peak_bytes", "kv_cache_usage_peak",
                       "num_preemptions", "startup_s")  # each shown where a workload measured it
LATENCY_COLUMNS = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2el_s": "E2E latency"}
SOURCE_COLUMNS = ("source", "source file sha256")  # an imported run's tool and file
KEPT_ATTR = "source_values"  # the frame attribute listing the tool-prefixed value columns


def choose_run(url: str, key: str, label: str, default: int | None) -> int:
    """A run id from the query parameter ``key`` (kept in sync), else ``default``."""
    start = ui.query_int(key) or default
    if start is None:
        st.info("No run to show.")
        st.stop()
    chosen = int(st.number_input(label, min_value=1, value=start, step=1, key=f"input_{key}"))
    if st.query_params.get(key) != str(chosen):
        st.query_params[key] = str(chosen)
    return chosen


def load_or_stop(url: str, run_id: int) -> RunDetail:
    try:
        return with_import_source(data.load_run_detail(url, run_id))
    except NotFoundError as exc:
        st.error(ui.md_text(exc))
        st.stop()


def with_import_source(detail: RunDetail) -> RunDetail:
    """An imported run's workloads frame with its source (tool and version, the file's sha256)
    and the values the import kept under the tool's own names (``params.source_values``, e.g.
    ``guidellm_time_per_output_token_median_s``), one column each. A native run's frame stays as
    it is."""
    found = detail.run.environment.get(IMPORT_KEY)
    if not isinstance(found, Mapping) or detail.workloads.empty:
        return detail
    frame = detail.workloads.copy()
    version = found.get("tool_version")
    frame[SOURCE_COLUMNS[0]] = f"{found.get('tool')} {version}" if version else found.get("tool")
    frame[SOURCE_COLUMNS[1]] = found.get("sha256")
    kept = {w.name: _source_values(w.params) for w in detail.run.workloads}
    names = sorted({name for values in kept.values() for name in values})
    for name in names:
        frame[name] = [kept.get(w, {}).get(name) for w in frame["workload"]]
    frame.attrs[KEPT_ATTR] = names
    return replace(detail, workloads=frame)


def _source_values(params: Mapping[str, Any]) -> dict[str, float]:
    found = params.get("source_values")
    return {str(k): float(v) for k, v in found.items()
            if isinstance(v, int | float) and not isinstance(v, bool)} \
        if isinstance(found, Mapping) else {}


def summary_table(workloads: pd.DataFrame) -> pd.DataFrame:
    """The workload summaries with latencies in ms and readable column names."""
    table = workloads[["workload", "concurrency", "completed", "failed"]].copy()
    for name in _summary_metrics(workloads):
        unit = display_unit(name)
        values = workloads[name] if name in workloads else pd.Series(
            [None] * len(workloads), dtype="float64")
        table[shown_metric_name(name)] = values * unit.scale
    table["duration (s)"] = workloads["duration_s"]
    table["tokens counted by"] = workloads["output_tokens_source"]
    table["errors"] = workloads["errors"]
    for name in (*(c for c in SOURCE_COLUMNS if c in workloads),
                 *workloads.attrs.get(KEPT_ATTR, ())):
        table[name] = workloads[name]  # the tool's own names, units in them: shown as stored
    return table


def _summary_metrics(workloads: pd.DataFrame) -> list[str]:
    """The throughputs, the cost and energy columns some workload measured, the latencies."""
    return [*SUMMARY_METRICS[:2],
            *(name for name in COST_ENERGY_METRICS if name in workloads
              and workloads[name].notna().any()), *SUMMARY_METRICS[2:]]


# `tracker show`'s columns and headers (tracker.reports.run_report), in view; beside them the
# cost and energy a workload measured (but the KV cache and preemptions, in the Server metrics
# tab), each under a header as short
CLI_COLUMNS = ("workload", "concurrency", "completed", "failed", *SUMMARY_METRICS[:2],
               "ttft_median_s", "ttft_p99_s", "tpot_median_s", "itl_p99_s", "e2el_p99_s")
CLI_HEADERS = dict(zip(CLI_COLUMNS, WORKLOAD_HEADERS, strict=True))
OUT_OF_VIEW = frozenset({"kv_cache_usage_peak", "num_preemptions"})
SHORT_HEADERS = {"usd_per_1m_output_tokens": "$/1M out tok", "usd_per_1m_tokens": "$/1M tok",
                 "joules_per_output_token": "J/out tok", "joules_per_token": "J/tok",
                 "gpu_memory_peak_bytes": "GPU mem peak GiB", "kv_cache_usage_peak": "KV peak",
                 "num_preemptions": "preemptions", "startup_s": "startup s"}
LATENCY_HEADERS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2E"}
STAT_HEADERS = {"median": "p50"}


@dataclass(frozen=True, slots=True)
class SummaryLayout:
    """How the run's workload table is shown: the columns in view (``order``: those of
    `tracker show`'s table, the cost and energy a workload measured, an imported run's tool),
    each metric under a short header with the CLI's digits, and the others (``hidden``, by header)
    one click away in the table's "Show/hide columns" menu."""

    order: tuple[str, ...]
    config: Mapping[str, Any]
    hidden: tuple[str, ...]


def summary_layout(table: pd.DataFrame) -> SummaryLayout:
    """The layout of ``summary_table``'s frame."""
    metrics = {shown_metric_name(name): name for name in REGISTRY}
    config: dict[str, Any] = {
        "workload": st.column_config.TextColumn(pinned=True),
        **{name: CLI_HEADERS[name] for name in CLI_COLUMNS[1:4]},
        "duration (s)": st.column_config.NumberColumn("duration s", format="%.1f"),
        **{column: st.column_config.NumberColumn(short_header(metrics[column]), help=column,
                                                 format=display_format(metrics[column]))
           for column in table.columns if column in metrics},
    }
    shown = [column for column in table.columns if _in_view(table, column, metrics)]
    hidden = tuple(_header(config.get(column), column) for column in table.columns
                   if column not in shown)
    return SummaryLayout(tuple(shown), config, hidden)


def short_header(name: str) -> str:
    """A metric's column header as short as `tracker show`'s (``TTFT p50 ms``, ``req/s``)."""
    if name in CLI_HEADERS:
        return CLI_HEADERS[name]
    latency = split_latency(name)
    if latency is not None:
        key, stat = latency
        return f"{LATENCY_HEADERS.get(key, key)} {STAT_HEADERS.get(stat, stat)} ms"
    return SHORT_HEADERS.get(name, metric_label(name))


def _in_view(table: pd.DataFrame, column: str, metrics: Mapping[str, str]) -> bool:
    if column in metrics:
        name = metrics[column]
        return name in CLI_COLUMNS or (name in COST_ENERGY_METRICS and name not in OUT_OF_VIEW)
    if column == "errors":  # "timeout: 2, ..." where a workload had errors
        return bool(table[column].fillna("").astype(str).ne("").any())
    return column in (*CLI_COLUMNS[:4], SOURCE_COLUMNS[0])


def _header(config: Any, column: str) -> str:
    label = config if isinstance(config, str) else \
        config.get("label") if isinstance(config, Mapping) else None
    return str(label or column)


def shown_metric_name(name: str) -> str:
    """A metric's column name in the table's frame (``TTFT p99 (ms)``)."""
    return f"{metric_label(name)} ({display_unit(name).label})" if name in REGISTRY else name


def gpu_frame(run: RunResult) -> pd.DataFrame:
    """Every NVML sample of every workload: workload, gpu, t_s, memory (GiB), utilisation."""
    rows = [
        (workload.name, sample.gpu_index, sample.t_s,
         None if sample.memory_used_bytes is None else sample.memory_used_bytes / GIB,
         sample.gpu_util_pct, sample.power_w)
        for workload in run.workloads
        if workload.gpu is not None
        for sample in workload.gpu.samples
    ]
    return pd.DataFrame(rows, columns=["workload", "gpu", "t_s", "memory_gib", "gpu_util_pct",
                                       "power_w"])


def telemetry_notes(run: RunResult) -> list[str]:
    """Why GPU or server telemetry is missing, per workload (plain text)."""
    notes = []
    for workload in run.workloads:
        for name, telemetry in (("GPU", workload.gpu),
                                ("server metrics", workload.server)):
            if telemetry is None:
                notes.append(f"{workload.name}: {name} not collected")
            elif not telemetry.measured:
                notes.append(f"{workload.name}: {name} not measured ({telemetry.reason})")
        if workload.gpu is not None and workload.gpu.energy_note:
            notes.append(f"{workload.name}: energy: {workload.gpu.energy_note}")
    return notes


def server_frame(run: RunResult) -> pd.DataFrame:
    """The server's /metrics summary per workload: one row per metric, one column per workload."""
    columns: dict[str, dict[str, float]] = {}
    for workload in run.workloads:
        server = workload.server
        if server is not None and server.measured:
            columns[ui.plain_text(workload.name)] = dict(server.values)
    frame = pd.DataFrame(columns)
    return frame.rename_axis("metric").reset_index() if not frame.empty else frame


def quality_frame(run: RunResult) -> pd.DataFrame:
    if run.quality is None:
        return pd.DataFrame()
    return pd.DataFrame([
        {"item": item.item_id, "scorer": item.scorer, "score": item.score,
         "changed": item.changed, "answer": item.output, "error": item.error}
        for item in run.quality.items])
