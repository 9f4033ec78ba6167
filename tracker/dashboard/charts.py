"""Plotly figures for the pages: pure functions of frames, no Streamlit, no store.

Plotly reads a few HTML tags (links among them) in names, labels and hover text, so every string
that comes from the store is redacted and passes through ``html.escape`` (``_esc``) before it
reaches a figure. The tracker's own labels (metric names, units) go in as they are.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from tracker.dashboard.trend_series import display_unit, metric_label
from tracker.redaction import redact_text
from tracker.results import NATIVE_SOURCE, RunOrigin

PALETTE = qualitative.Plotly + qualitative.D3
STATE_COLORS = {
    "regression": "#d62728",
    "failed": "#8c1c13",
    "partial": "#f28e2b",
    "running": "#4e79a7",
    "stale": "#9e9e9e",
    "pass": "#2ca02c",
}
BETTER, WORSE, SAME = "#2ca02c", "#d62728", "#9e9e9e"
CHANGE_COLORS = {"regression": WORSE, "improvement": BETTER, "change": WORSE}
LAYOUT = {"template": "plotly_white", "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
          "hoverlabel": {"align": "left"}}


def _esc(value: object) -> str:
    return html.escape(redact_text(str(value)))


def _rgba(hex_color: str, alpha: float) -> str:
    red, green, blue = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


# --- overview ------------------------------------------------------------------------------


def render_status_grid(overview: pd.DataFrame) -> go.Figure:
    """One square per config x suite, coloured by the state of its latest run."""
    figure = go.Figure()
    for state, color in STATE_COLORS.items():
        rows = overview[overview["state"] == state]
        if rows.empty:
            continue
        hover = [f"<b>{_esc(c)}</b> · {_esc(s)}<br>run #{r} · {_esc(st)}<br>{_esc(w)}"
                 for c, s, r, st, w in zip(rows["config"], rows["suite"], rows["run_id"],
                                           rows["status"], rows["when"], strict=True)]
        figure.add_trace(go.Scatter(
            x=[_esc(s) for s in rows["suite"]], y=[_esc(c) for c in rows["config"]],
            mode="markers", name=state, hovertext=hover, hoverinfo="text",
            marker={"symbol": "square", "size": 26, "color": color,
                    "line": {"width": 1, "color": "white"}}))
    configs = sorted({_esc(c) for c in overview["config"]}, reverse=True)
    suites = sorted({_esc(s) for s in overview["suite"]})
    figure.update_layout(
        **LAYOUT, height=max(220, 34 * len(configs) + 130),
        legend={"orientation": "h", "y": 0, "yanchor": "top", "x": 0},
        xaxis={"categoryorder": "array", "categoryarray": suites, "side": "top",
               "showgrid": False},
        yaxis={"categoryorder": "array", "categoryarray": configs, "showgrid": False})
    figure.update_layout(margin={"t": 60, "b": 40})
    return figure


# --- trends --------------------------------------------------------------------------------


def render_trend_chart(shaped: pd.DataFrame, changes: pd.DataFrame, change_points: pd.DataFrame,
                       metric: str, *, show_band: bool) -> go.Figure:
    """Each series as line + markers, with simulated runs hollow and imported runs as diamonds.

    Markers show version changes and change points, whose hover each run's point repeats."""
    unit = display_unit(metric)
    figure = go.Figure()
    diffs = [f"<b>config version changed</b> ({_esc(config)})<br>" + _lines(diff)
             for config, diff in zip(changes["config"], changes["diff"], strict=True)]
    points = [_lines(text) for text in change_points["text"]]
    notes = _marker_hovers([(changes, diffs), (change_points, points)])
    for index, (series, rows) in enumerate(shaped.groupby("series", sort=True)):
        color = PALETTE[index % len(PALETTE)]
        if show_band:
            _add_band(figure, rows, color, str(series))
        figure.add_trace(_series_trace(rows, str(series), color, unit.label, notes))
    if not changes.empty:
        figure.add_trace(_marker_trace(changes, "config version changed", "diamond", "#333333",
                                       diffs))
        for when in sorted(set(changes["started_at"]))[:30]:
            figure.add_vline(x=when, line={"dash": "dot", "width": 1, "color": "#888888"})
    if not change_points.empty:
        kinds = change_points["kind"] if "kind" in change_points else ["change"] * len(
            change_points)
        figure.add_trace(_marker_trace(
            change_points, "change point", "x", [CHANGE_COLORS.get(k, WORSE) for k in kinds],
            points))
    figure.update_layout(**LAYOUT, height=520, hovermode="closest",
                         yaxis_title=f"{metric_label(metric)} ({unit.label})",
                         legend={"orientation": "h", "y": -0.15, "yanchor": "top", "x": 0})
    return figure


def _source_note(source: str) -> str:
    """The hover's words for a run that is not the tracker's own history."""
    if source == NATIVE_SOURCE:
        return ""
    if source in {origin.value for origin in RunOrigin}:
        return f" · a {source} run, apart from the history"
    return f" · imported from {_esc(source)}"


def _lines(text: object) -> str:
    return "<br>".join(_esc(line) for line in str(text).split("\n"))


def _marker_hovers(markers: Sequence[tuple[pd.DataFrame, Sequence[str]]]
                   ) -> dict[tuple[str, int], str]:
    """The hovers of the markers drawn over each run's point, by (series, run id)."""
    found: dict[tuple[str, int], list[str]] = {}
    for frame, hovers in markers:
        if frame.empty:
            continue
        for series, run, hover in zip(frame["series"], frame["run_id"], hovers, strict=True):
            found.setdefault((str(series), int(run)), []).append(hover)
    return {key: "<br>".join(hovers) for key, hovers in found.items()}


def _series_trace(rows: pd.DataFrame, series: str, color: str, unit: str,
                  notes: Mapping[tuple[str, int], str]) -> go.Scatter:
    """The series' line and points. A point under a marker (a new config version's diamond, a
    change point's cross) carries the marker's hover in its own: in "closest" hover Plotly
    prefers the smaller marker at the centre of the larger one drawn over it (a marker's
    distance is at least 1 - 3 / its radius in pixels), so the marker's hover alone showed only
    at its edge."""
    sources = list(rows["source"]) if "source" in rows else [NATIVE_SOURCE] * len(rows)
    symbols = [("circle" if source == NATIVE_SOURCE else "diamond") + ("-open" if sim else "")
               for sim, source in zip(rows["simulated"], sources, strict=True)]
    hover = [
        f"<b>{_esc(series)}</b><br>{value:.4g} {unit}<br>run #{run} · {_esc(status)}"
        f"{' · simulated' if sim else ''}"
        f"{_source_note(source)}"
        f"<br>config {version[:12]}<br>{when:%Y-%m-%d %H:%M} UTC"
        + (f"<br>{notes[(series, int(run))]}" if (series, int(run)) in notes else "")
        for value, run, status, sim, version, when, source in zip(
            rows["shown"], rows["run_id"], rows["status"], rows["simulated"],
            rows["config_version"], rows["started_at"], sources, strict=True)]
    return go.Scatter(x=rows["started_at"], y=rows["shown"], mode="lines+markers",
                      name=_esc(series), legendgroup=_esc(series), hovertext=hover,
                      hoverinfo="text", customdata=rows["run_id"],
                      line={"color": color, "width": 1.5},
                      marker={"color": color, "size": 6, "symbol": symbols})


def _add_band(figure: go.Figure, rows: pd.DataFrame, color: str, series: str) -> None:
    """The noise band, one piece per config version's runs (each starts afresh)."""
    version = (rows["config_version"] != rows["config_version"].shift(1)).cumsum()
    for _, part in rows.groupby(version, sort=False):
        band = part.dropna(subset=["band_low", "band_high"])
        if band.empty:
            continue
        common = {"x": band["started_at"], "mode": "lines", "line": {"width": 0},
                  "hoverinfo": "skip", "legendgroup": _esc(series), "showlegend": False}
        figure.add_trace(go.Scatter(y=band["band_high"], **common))
        figure.add_trace(go.Scatter(y=band["band_low"], fill="tonexty",
                                    fillcolor=_rgba(color, 0.12), **common))


def _marker_trace(rows: pd.DataFrame, name: str, symbol: str, color: str | Sequence[str],
                  hover: Sequence[str]) -> go.Scatter:
    return go.Scatter(x=rows["started_at"], y=rows["shown"], mode="markers", name=name,
                      hovertext=list(hover), hoverinfo="text",
                      marker={"symbol": symbol, "size": 13, "color": color,
                              "line": {"width": 1, "color": "white"}})


# --- run detail ----------------------------------------------------------------------------


def render_distribution(requests: pd.DataFrame, column: str, label: str,
                        kind: str) -> go.Figure:
    """The latency's distribution per workload, in ms: ``kind`` "cdf" or "histogram"."""
    figure = go.Figure()
    for index, (workload, rows) in enumerate(requests.groupby("workload", sort=False)):
        values = (rows[column].dropna() * 1000.0).sort_values()
        if values.empty:
            continue
        color = PALETTE[index % len(PALETTE)]
        if kind == "cdf":
            share = [(i + 1) / len(values) for i in range(len(values))]
            figure.add_trace(go.Scatter(x=values, y=share, mode="lines", name=_esc(workload),
                                        line={"shape": "hv", "color": color}))
        else:
            figure.add_trace(go.Histogram(x=values, name=_esc(workload), opacity=0.65,
                                          marker={"color": color}, nbinsx=40))
    figure.update_layout(**LAYOUT, height=380, barmode="overlay",
                         xaxis_title=f"{label} (ms)",
                         yaxis_title="share of requests ≤ x" if kind == "cdf" else "requests")
    return figure


def render_latency_over_run(requests: pd.DataFrame, column: str, label: str) -> go.Figure:
    """Each request's latency against when it was sent (seconds into its workload)."""
    figure = go.Figure()
    for index, (workload, rows) in enumerate(requests.groupby("workload", sort=False)):
        ok = rows.dropna(subset=[column])
        figure.add_trace(go.Scattergl(
            x=ok["start_s"], y=ok[column] * 1000.0, mode="markers", name=_esc(workload),
            marker={"size": 5, "opacity": 0.7, "color": PALETTE[index % len(PALETTE)]}))
        failed = rows[rows["error_class"].notna()]
        if not failed.empty:
            figure.add_trace(go.Scattergl(
                x=failed["start_s"], y=[0.0] * len(failed), mode="markers",
                name=f"{_esc(workload)}: failed", hovertext=[_esc(e) for e in
                                                             failed["error_class"]],
                marker={"size": 8, "symbol": "x", "color": WORSE}))
    figure.update_layout(**LAYOUT, height=380, xaxis_title="request sent (s into workload)",
                         yaxis_title=f"{label} (ms)")
    return figure


def render_gpu_timeline(samples: pd.DataFrame) -> go.Figure:
    """GPU memory (GiB, left axis) and utilisation (%, right axis) over each workload."""
    figure = go.Figure()
    for index, ((workload, gpu), rows) in enumerate(samples.groupby(["workload", "gpu"])):
        color = PALETTE[index % len(PALETTE)]
        name = f"{_esc(workload)} · GPU {gpu}"
        figure.add_trace(go.Scatter(x=rows["t_s"], y=rows["memory_gib"], name=f"{name} memory",
                                    mode="lines", line={"color": color}))
        figure.add_trace(go.Scatter(x=rows["t_s"], y=rows["gpu_util_pct"], yaxis="y2",
                                    name=f"{name} utilisation", mode="lines",
                                    line={"color": color, "dash": "dot"}))
    figure.update_layout(**LAYOUT, height=380, xaxis_title="seconds into the workload",
                         yaxis={"title": "memory used (GiB)"},
                         yaxis2={"title": "utilisation (%)", "overlaying": "y", "side": "right",
                                 "range": [0, 100]})
    return figure


# --- compare -------------------------------------------------------------------------------


OUTCOME_COLORS = {"regression": WORSE, "improvement": BETTER, "no_change": SAME,
                  "inconclusive": "#d0d0d0"}


def render_change_bars(changes: pd.DataFrame) -> go.Figure:
    """Relative change per judged metric and workload, coloured by the analysis' outcome,
    with its interval as error bars. ``changes``: workload, label, rel_change, ci_low, ci_high,
    outcome."""
    figure = go.Figure()
    order = [f"{_esc(w)} · {label}" for w, label in
             zip(changes["workload"], changes["label"], strict=True)]
    for outcome, color in OUTCOME_COLORS.items():
        rows = changes[changes["outcome"] == outcome]
        if rows.empty:
            continue
        labels = [f"{_esc(w)} · {label}" for w, label in
                  zip(rows["workload"], rows["label"], strict=True)]
        has_ci = rows["ci_low"].notna()
        figure.add_trace(go.Bar(
            x=rows["rel_change"] * 100.0, y=labels, orientation="h",
            name=outcome.replace("_", " "), marker={"color": color},
            error_x={"type": "data", "symmetric": False, "color": "#555555", "thickness": 1,
                     "array": ((rows["ci_high"] - rows["rel_change"]) * 100.0).where(has_ci),
                     "arrayminus": ((rows["rel_change"] - rows["ci_low"]) * 100.0)
                     .where(has_ci)},
            hovertemplate="%{y}: %{x:+.1f}%<extra>" + outcome.replace("_", " ") + "</extra>"))
    figure.update_layout(**LAYOUT, height=max(240, 24 * len(changes) + 100),
                         xaxis_title="change, head vs base (%), with the analysis' interval",
                         barmode="overlay",
                         yaxis={"categoryorder": "array", "categoryarray": order,
                                "autorange": "reversed"},
                         legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0})
    figure.add_vline(x=0, line={"width": 1, "color": "#444444"})
    return figure


# --- configs -------------------------------------------------------------------------------


def render_version_timeline(versions: pd.DataFrame) -> go.Figure:
    """When each version was first seen and how many runs it has."""
    figure = go.Figure(go.Scatter(
        x=versions["first_seen_at"], y=[_esc(v) for v in versions["version"]],
        mode="markers+lines",
        marker={"size": [8 + min(30.0, float(n) ** 0.5) for n in versions["runs"]],
                "color": PALETTE[0]},
        line={"shape": "hv", "color": "#bbbbbb"},
        hovertext=[f"{_esc(v)} · {n} runs" for v, n in zip(versions["version"], versions["runs"],
                                                      strict=True)],
        hoverinfo="text"))
    figure.update_layout(**LAYOUT, height=max(200, 40 * len(versions) + 80),
                         yaxis={"type": "category", "title": "version"})
    return figure
