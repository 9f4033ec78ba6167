"""The Trends page's controls and the markers drawn on its chart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import streamlit as st

from tracker.dashboard import data, ui
from tracker.dashboard.trend_changes import compute_change_markers
from tracker.dashboard.trend_series import (
    STAT_LABELS,
    find_version_changes,
    latency_label,
    metric_label,
    split_latency,
)
from tracker.metrics import QUALITY_METRICS
from tracker.store.queries import TrendOptions

OTHER = "other"
OTHER_LABEL = "throughput, SLOs, cost, energy, memory, server and quality"
WINDOWS = {"last 30 days": 30, "last 90 days": 90, "last year": 365, "everything": None}


def metric_families(metrics: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Latency families (``ttft``, ``scheduled_ttft``, ...) and the other metrics."""
    families: list[str] = []
    others: list[str] = []
    for metric in metrics:
        latency = split_latency(metric)
        if latency is None:
            others.append(metric)
        elif latency[0] not in families:
            families.append(latency[0])
    return families, others


def _metric_controls(default_metric: str, metrics: tuple[str, ...]) -> str:
    latencies, others = metric_families(metrics)
    families = [*latencies, OTHER]
    default = split_latency(default_metric)
    default_family = default[0] if default and default[0] in latencies else OTHER
    left, right = st.columns([1, 2])
    family = left.selectbox("Metric", families, index=families.index(default_family),
                            format_func=lambda f: OTHER_LABEL if f == OTHER
                            else latency_label(f), key="trend_family")
    if family == OTHER:
        chosen = right.radio("Measure", others, format_func=metric_label, horizontal=True,
                             key="trend_other")
        return str(chosen)
    stats = list(STAT_LABELS)
    default_stat = default[1] if default else "p99"
    stat = right.radio("Statistic", stats, index=stats.index(default_stat), horizontal=True,
                       format_func=STAT_LABELS.__getitem__, key="trend_stat")
    return f"{family}_{stat}_s"


def workload_names(url: str, options: TrendOptions, metric: str, configs: tuple[str, ...],
                   suites: tuple[str, ...]) -> list[str]:
    """The workloads to choose from: every name stored with ``metric`` for these configs and
    suites, in run order (so the results a workload's run adds -- a session's ``chat/turn-1``
    and ``chat/turns-2+``, a stage's ``chat@c4`` -- follow it), then the suites' own workloads
    never measured. (The suite definitions alone name only ``chat``.)"""
    defined = [] if metric in QUALITY_METRICS else [w for s in suites
                                                     for w in options.workloads.get(s, ())]
    measured: list[str] = []
    if configs and suites:  # the query the chart makes for every workload: cached once
        trend = data.load_trend(url, data.TrendSelection(metric, configs, suites, None))
        measured = [str(name) for name in trend["workload"]] if not trend.empty else []
    return list(dict.fromkeys([*measured, *defined]))


def choose_selection(url: str, options: TrendOptions) -> tuple[data.TrendSelection, bool]:
    """Draw the controls and return the selection they describe and whether to draw the noise
    band."""
    default = data.default_trend_selection(options)
    metric = _metric_controls(default.metric, options.metrics)
    left, middle, right = st.columns(3)
    configs = left.multiselect("Configs", options.configs, default=list(default.configs),
                               format_func=ui.plain_text, key="trend_configs")
    suites = middle.multiselect("Suites", options.suites, default=list(default.suites),
                                format_func=ui.plain_text, key="trend_suites")
    names = workload_names(url, options, metric, tuple(configs), tuple(suites))
    # a quality metric's series are its sets' (quality:<set>), chosen in a widget of their own
    quality = metric in QUALITY_METRICS
    workloads = right.multiselect("Quality sets" if quality else "Workloads", names,
                                  default=names, format_func=ui.plain_text,
                                  placeholder="every set" if quality else "every workload",
                                  key="trend_quality_sets" if quality else "trend_workloads")
    left, right = st.columns([1, 2])
    window = left.selectbox("Time", list(WINDOWS), index=len(WINDOWS) - 1, key="trend_window")
    show_band = right.toggle("Noise band", value=True, key="trend_band")
    days = WINDOWS[window]
    since = None if days is None else \
        datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(days=days)
    chosen = tuple(workloads) if workloads and len(workloads) < len(names) else None
    return data.TrendSelection(metric, tuple(configs), tuple(suites), chosen, since), show_band


def version_changes(url: str, shaped: pd.DataFrame, configs: tuple[str, ...]) -> pd.DataFrame:
    bodies = data.load_config_bodies(url, configs)
    return find_version_changes(shaped, bodies)


def change_markers(url: str, shaped: pd.DataFrame, selection: data.TrendSelection
                   ) -> pd.DataFrame:
    """The change points to draw: the records the watch stored for the selection, then what the
    detector finds in the series shown that no record holds."""
    records = data.load_trend_records(url, selection)
    return compute_change_markers(shaped, records, selection.metric)
