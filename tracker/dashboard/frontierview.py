"""The Frontier page's logic: a config's capacity frontier per version and per recent night.

The points are the results a run already stores for a rate or concurrency ladder: a sweep's
probes (``<workload>@<R>rps``) or a workload's stages (``@<R>rps``, ``@c<N>``), each with its
achieved request throughput and a latency statistic. A version's frontier is the median, per
load asked for, over its latest ``VERSION_RUNS`` runs. A night's is one run's. The analysis
(``tracker.analysis.frontier``) gives the Pareto front and the knee. This module reads the
store (cached) and draws. Only the history's own runs count (not a gate's, a bisection's or an
imported tool's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from sqlalchemy.orm import Session

from tracker.analysis.frontier import (
    Frontier,
    FrontierPoint,
    combine_runs,
    compute_frontier,
    compute_latency_at_throughput,
    parse_probe_load,
)
from tracker.dashboard import data
from tracker.dashboard.charts import LAYOUT, PALETTE, _esc
from tracker.results import NATIVE_SOURCE
from tracker.store import queries

THROUGHPUT_METRIC = "request_throughput_per_s"
CAPACITY_METRIC = "capacity_at_slo_req_per_s"
LATENCY_METRICS = ("ttft_p90_s", "ttft_median_s", "ttft_p99_s", "e2el_p90_s", "e2el_median_s",
                   "e2el_p99_s", "tpot_p90_s")
VERSION_RUNS = 5  # a version's frontier: the median over its latest runs
LATEST_NIGHTS = 3
NIGHT_COLOR = "#7f7f7f"


@dataclass(frozen=True, slots=True)
class FrontierLine:
    """One frontier drawn: a config version's (its latest runs) or one night's run."""

    label: str
    kind: str  # "version" or "night"
    version: str
    run_ids: tuple[int, ...]
    frontier: Frontier
    capacity_req_per_s: float | None  # the sweep's stored capacity at the SLO (median)


# --- reading -----------------------------------------------------------------------------------


def query_frontier_rows(url: str, config: str, suite: str, latency_metric: str) -> pd.DataFrame:
    """Every stored workload result of ``config`` on ``suite`` (the history's runs) with its
    throughput, ``latency_metric`` and capacity at the SLO (NaN where not measured)."""
    def work(session: Session) -> pd.DataFrame:
        frames = []
        for metric in (THROUGHPUT_METRIC, latency_metric, CAPACITY_METRIC):
            found = queries.fetch_trend(session, metric, configs=[config], suites=[suite])
            found = found[found["source"] == NATIVE_SOURCE]
            frames.append(found.assign(metric=metric))
        return pd.concat(frames, ignore_index=True)

    with Session(data.engine_for(url)) as session:
        long = work(session)
    if long.empty:
        return pd.DataFrame(columns=["run_id", "started_at", "config_version", "workload",
                                     THROUGHPUT_METRIC, "latency_s", CAPACITY_METRIC])
    wide = long.pivot_table(index=["run_id", "started_at", "config_version", "workload"],
                            columns="metric", values="value", aggfunc="first").reset_index()
    wide = wide.rename(columns={latency_metric: "latency_s"})
    for column in (THROUGHPUT_METRIC, "latency_s", CAPACITY_METRIC):
        if column not in wide.columns:
            wide[column] = float("nan")
    return wide


load_frontier_rows = st.cache_data(ttl=data.CACHE_TTL_S, show_spinner=False)(query_frontier_rows)


# --- shaping -----------------------------------------------------------------------------------


def ladder_workloads(rows: pd.DataFrame) -> tuple[str, ...]:
    """The workloads with a ladder: a name one of whose runs stored two load points or more."""
    names = sorted({str(name).split("@", 1)[0] for name in rows["workload"] if "@" in str(name)})
    found = []
    for name in names:
        loads = rows[[parse_probe_load(name, str(w)) is not None for w in rows["workload"]]]
        if not loads.empty and int(loads.groupby("run_id").size().max()) >= 2:
            found.append(name)
    return tuple(found)


def _run_points(rows: pd.DataFrame, workload: str) -> dict[int, list[FrontierPoint]]:
    points: dict[int, list[FrontierPoint]] = {}
    columns = (rows["run_id"].tolist(), rows["workload"].tolist(),
               rows[THROUGHPUT_METRIC].tolist(), rows["latency_s"].tolist())
    for run_id, name, throughput, latency in zip(*columns, strict=True):
        load = parse_probe_load(workload, str(name))
        if load is None or pd.isna(throughput) or pd.isna(latency):
            continue
        points.setdefault(int(run_id), []).append(
            FrontierPoint(load, float(throughput), float(latency)))
    return points


def compute_frontier_lines(rows: pd.DataFrame, workload: str) -> list[FrontierLine]:
    """Each version's frontier (oldest version first), then the latest nights' (newest last)."""
    points = _run_points(rows, workload)
    runs = (rows[rows["run_id"].isin(list(points))]
            .drop_duplicates("run_id").sort_values(["started_at", "run_id"]))
    capacity = rows[rows["workload"] == workload].set_index("run_id")[CAPACITY_METRIC]
    lines: list[FrontierLine] = []
    for version, group in runs.groupby("config_version", sort=False):
        ids = tuple(int(i) for i in group["run_id"].tail(VERSION_RUNS))
        lines.append(FrontierLine(
            f"version {str(version)[:12]} · {len(ids)} run{'s' if len(ids) != 1 else ''}",
            "version", str(version), ids, compute_frontier(combine_runs([points[i] for i in ids])),
            _median(capacity, ids)))
    latest = runs.tail(LATEST_NIGHTS)
    for run_id, started_at, version in zip(latest["run_id"].tolist(),
                                           latest["started_at"].tolist(),
                                           latest["config_version"].tolist(), strict=True):
        lines.append(FrontierLine(
            f"night #{run_id} · {started_at:%Y-%m-%d %H:%M}", "night", str(version),
            (int(run_id),), compute_frontier(points[int(run_id)]),
            _median(capacity, (int(run_id),))))
    return lines


def _median(capacity: pd.Series, ids: Sequence[int]) -> float | None:
    values = capacity.reindex(list(ids)).dropna()
    return None if values.empty else float(values.median())


def reference_throughput(lines: Sequence[FrontierLine]) -> float | None:
    """Where "latency at a fixed throughput" is read by default: the lowest knee of the
    versions (inside every version's measured range more often than any other choice)."""
    knees = [line.frontier.knee.throughput_req_per_s for line in lines
             if line.kind == "version" and line.frontier.knee is not None]
    return min(knees, default=None)


def frontier_table(lines: Sequence[FrontierLine], at_req_per_s: float | None) -> pd.DataFrame:
    """One row per line: its knee, its capacity at the SLO, its latency at ``at_req_per_s``."""
    rows = []
    for line in lines:
        knee = line.frontier.knee
        at = (None if at_req_per_s is None
              else compute_latency_at_throughput(line.frontier.front, at_req_per_s))
        rows.append({
            "frontier": line.label, "runs": ", ".join(f"#{i}" for i in line.run_ids),
            "knee load": None if knee is None else knee.load.label,
            "knee req/s": None if knee is None else knee.throughput_req_per_s,
            "knee latency ms": None if knee is None else knee.latency_s * 1000,
            "capacity at SLO req/s": line.capacity_req_per_s,
            "latency ms at the fixed throughput": None if at is None else at * 1000,
        })
    return pd.DataFrame(rows)


# --- drawing -----------------------------------------------------------------------------------


def render_frontier_chart(lines: Sequence[FrontierLine], latency_label: str) -> go.Figure:
    """Latency (ms) against achieved throughput: each version's Pareto front as a line with
    all its points, each night's dotted, every knee a star."""
    figure = go.Figure()
    versions = [line for line in lines if line.kind == "version"]
    colors = {line.version: PALETTE[i % len(PALETTE)] for i, line in enumerate(versions)}
    for line in lines:
        night = line.kind == "night"
        color = NIGHT_COLOR if night else colors.get(line.version, NIGHT_COLOR)
        front = line.frontier.front
        hover = [f"{_esc(line.label)}<br>{_esc(p.load.label)}: {p.throughput_req_per_s:.3g} "
                 f"req/s at {p.latency_s * 1000:.3g} ms" for p in front]
        figure.add_trace(go.Scatter(
            x=[p.throughput_req_per_s for p in front], y=[p.latency_s * 1000 for p in front],
            mode="lines+markers", name=_esc(line.label), hovertext=hover, hoverinfo="text",
            line={"color": color, "dash": "dot" if night else "solid",
                  "width": 1 if night else 2},
            marker={"size": 5 if night else 8}, legendgroup=line.kind))
    knees = [(line, line.frontier.knee) for line in lines if line.frontier.knee is not None]
    if knees:
        figure.add_trace(go.Scatter(
            x=[k.throughput_req_per_s for _, k in knees if k is not None],
            y=[k.latency_s * 1000 for _, k in knees if k is not None],
            mode="markers", name="knee", hoverinfo="text",
            hovertext=[f"knee of {_esc(line.label)}: {k.load.label}, "
                       f"{k.throughput_req_per_s:.3g} req/s at {k.latency_s * 1000:.3g} ms"
                       for line, k in knees if k is not None],
            marker={"symbol": "star", "size": 16, "line": {"width": 1, "color": "#222222"},
                    "color": [NIGHT_COLOR if line.kind == "night"
                              else colors.get(line.version, NIGHT_COLOR) for line, _ in knees]}))
    figure.update_layout(**LAYOUT, height=520, hovermode="closest",
                         xaxis_title="achieved throughput (req/s)",
                         yaxis_title=f"{latency_label} (ms)", legend_title_text="frontier")
    return figure
