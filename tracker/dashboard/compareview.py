"""The Compare page's choices and tables: two runs, or two config versions with all their runs
(the latest of each shown side by side), and, where a bisection ran both, which changed field
made the head regress."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st
from sqlalchemy.orm import Session

from tracker.dashboard import data, runview, ui
from tracker.dashboard.diffs import diff_frame
from tracker.dashboard.trend_series import metric_label, render_metric_value
from tracker.errors import NotFoundError
from tracker.inputs.config_diff import compute_config_diff
from tracker.results import RunResult
from tracker.store.bisections import StoredBisection, fetch_bisections
from tracker.store.queries import (
    fetch_config_history,
    fetch_latest_run_id,
    fetch_previous_run_id,
)
from tracker.store.runs import fetch_run

TWO_RUNS, TWO_VERSIONS = "Two runs", "Two config versions"
OUTCOMES = ("regression", "improvement", "no_change", "inconclusive")


@dataclass(frozen=True, slots=True)
class Pair:
    base_id: int  # the run shown for each side
    head_id: int
    base_ids: tuple[int, ...] = ()  # the runs judged (empty: the shown one)
    head_ids: tuple[int, ...] = ()

    @property
    def judged(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return self.base_ids or (self.base_id,), self.head_ids or (self.head_id,)


def choose_pair(url: str) -> Pair:
    mode = st.radio("Compare", [TWO_RUNS, TWO_VERSIONS], horizontal=True, key="compare_mode",
                    label_visibility="collapsed")
    if mode == TWO_VERSIONS:
        return _choose_versions(url)
    head_start = ui.query_int("head") or data.default_run_id(url)
    base_default = None if head_start is None else load_default_base(url, head_start)
    left, right = st.columns(2)
    with left:
        base_id = runview.choose_run(url, "base", "Base run", base_default or head_start)
    with right:
        head_id = runview.choose_run(url, "head", "Head run", head_start)
    return Pair(base_id, head_id)


def query_default_base(url: str, head_id: int) -> int | None:
    """The run Compare sets against run ``head_id`` when no base is asked for: the latest run
    of the config version before the head's on the head's suite (the newest earlier version
    with one), so the page opens on the last config change. For a config with one version, it
    is the run of its config and suite before the head, and None when there is neither (or no
    such head).
    """
    with Session(data.engine_for(url)) as session:
        try:
            head = fetch_run(session, head_id)
        except NotFoundError:
            return None
        versions = [entry.version for entry in fetch_config_history(session, head.config.name)]
        earlier = versions[:versions.index(head.config.version)] \
            if head.config.version in versions else []
        for version in reversed(earlier):
            found = fetch_latest_run_id(session, head.config.name, version, head.suite.name)
            if found is not None:
                return found
        return fetch_previous_run_id(session, head_id)


load_default_base = st.cache_data(ttl=data.CACHE_TTL_S, show_spinner=False)(query_default_base)


def _choose_versions(url: str) -> Pair:
    options = data.load_trend_options(url)
    left, middle, right = st.columns(3)
    config = left.selectbox("Config", options.configs, format_func=ui.plain_text,
                            key="compare_config")
    suite = middle.selectbox("Suite", options.suites, format_func=ui.plain_text,
                             key="compare_suite")
    history = data.load_config_history(url, str(config))
    versions = [entry.version for entry in history]
    if len(versions) < 2:
        st.info("This config has a single version; compare two runs instead.")
        st.stop()
    labels = {e.version: ui.plain_text(f"{e.version[:12]} (first seen {e.first_seen_at:%Y-%m-%d})")
              for e in history}
    with right:
        base_version = st.selectbox("Base version", versions, index=len(versions) - 2,
                                    format_func=labels.__getitem__, key="compare_base_version")
        head_version = st.selectbox("Head version", versions, index=len(versions) - 1,
                                    format_func=labels.__getitem__, key="compare_head_version")
    base_id = data.load_latest_run_id(url, str(config), str(base_version), str(suite))
    head_id = data.load_latest_run_id(url, str(config), str(head_version), str(suite))
    if base_id is None or head_id is None:
        st.info("One of these versions has no run on this suite.")
        st.stop()
    base_ids = data.load_version_run_ids(url, base_id)
    head_ids = data.load_version_run_ids(url, head_id)
    st.caption(f"Every stored run of each version on this suite is judged ({len(base_ids)} and "
               f"{len(head_ids)}: the run is the unit); the latest of each is shown side by "
               f"side: #{base_id} and #{head_id}.")
    return Pair(base_id, head_id, base_ids, head_ids)


def describe(run: RunResult) -> str:
    """One plain-text line about a run (for st.text, never markdown)."""
    flags = f"{run.status.value}" + (" · simulated" if run.simulated else "")
    return (f"#{run.run_id} · {run.config.name}@{run.config.version[:12]} · {run.suite.name}"
            f"@{run.suite.version[:12]} · {run.started_at:%Y-%m-%d %H:%M} UTC · {flags}")


def like_for_like_notes(base: RunResult, head: RunResult) -> list[str]:
    """Why these two runs may not be comparable, empty when they are like with like."""
    notes = []
    if base.suite.name != head.suite.name:
        notes.append(f"different suites ({base.suite.name} vs {head.suite.name}): only "
                     "workloads with the same name are compared")
    elif base.suite.version != head.suite.version:
        notes.append("the suite changed between the runs (its version differs), so the "
                     "prompts or workloads may differ")
    if base.simulated != head.simulated:
        notes.append("one run is simulated and the other is not")
    if base.run_id == head.run_id:
        notes.append("base and head are the same run")
    return notes


TABLE_COLUMNS = ["workload", "metric", "base", "head", "change %", "better when"]
P_FLOOR = 0.0001  # a smaller p-value reads "< 0.0001"


def metric_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """The metric deltas with readable names, each value with its unit as the CLI writes it."""
    rows = []
    for row in metrics.to_dict("records"):
        name = str(row["metric"])
        rows.append({
            "workload": row["workload"],
            "metric": metric_label(name),
            "base": render_metric_value(_number(row["base"]), name),
            "head": render_metric_value(_number(row["head"]), name),
            "change %": _change_percent(row["rel_change"]),
            "better when": "lower" if row["direction"] == "lower_is_better" else "higher",
        })
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    return table.astype({"change %": "float64"})  # a number to sort on, even when all empty


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _change_percent(rel_change: Any) -> float | None:
    """The relative change in percent to one decimal, as the gate's report gives it."""
    rel = _number(rel_change)
    return None if rel is None else round(rel * 100.0, 1)


def render_p_value(value: Any) -> str | None:
    """A p-value to 2 significant digits (the gate's ``p=``), or "< 0.0001" below that. It is
    None for none (a bit-constant metric compared exactly has no p-value)."""
    p = _number(value)
    if p is None:
        return None
    return f"< {P_FLOOR:g}" if p < P_FLOOR else f"{p:.2g}"


def outcome_label(outcome: str) -> str:
    """The analysis' outcome in words: ``no_change`` -> "no change"."""
    return outcome.replace("_", " ")


def headline_changes(metrics: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """The metrics the analysis judged, with its outcome, change and interval (relative)."""
    rows = verdicts.merge(metrics[["workload", "metric", "rel_change"]],
                          on=["workload", "metric"], how="left", suffixes=("", "_point"))
    rows["rel_change"] = rows["rel_change"].fillna(rows["rel_change_point"])
    rows = rows.dropna(subset=["rel_change"]).copy()
    rows["label"] = rows["metric"].map(metric_label)
    return rows


P_COLUMN = "p (head worse)"  # one-sided: an improvement reads near 1
# How the table shows its columns: the values are text already, the change a number (to sort
# on) with one decimal as the gate's report has it.
METRIC_TABLE_COLUMNS = {
    "change %": st.column_config.NumberColumn(format="%+.1f%%"),
    "better when": st.column_config.TextColumn("better"),
    P_COLUMN: st.column_config.TextColumn(help="the one-sided p-value of \"head is worse\" "
                                          "(an improvement reads near 1)"),
}
OUTCOME_ORDER = {"regression": 0, "improvement": 1, "inconclusive": 2, "no_change": 3}


def metric_table_with_verdicts(metrics: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """Every metric's delta, the judged ones with the verdict, interval, p-value and reason,
    and the verdict's own values and change (one effect size per row: the judged runs'). Cells
    are display text (the outcome in words, the p-value to 2 digits). A value not measured or
    not judged is empty (None)."""
    table = _with_verdict_values(metric_table(metrics), verdicts)
    judged = verdicts.assign(metric=verdicts["metric"].map(metric_label))
    judged["interval %"] = [
        None if pd.isna(low) else f"[{low * 100:+.1f}%, {high * 100:+.1f}%]"
        for low, high in zip(judged["ci_low"], judged["ci_high"], strict=True)]
    judged[P_COLUMN] = [render_p_value(p) for p in judged["p_value"]]
    judged = judged.rename(columns={"outcome": "verdict"})
    merged = table.merge(judged[["workload", "metric", "verdict", "interval %", P_COLUMN,
                                 "samples", "reason"]], on=["workload", "metric"], how="left")
    merged["_rank"] = merged["verdict"].map(OUTCOME_ORDER).fillna(len(OUTCOME_ORDER))
    merged["verdict"] = [None if pd.isna(v) else outcome_label(str(v)) for v in merged["verdict"]]
    return merged.sort_values(["_rank"], kind="stable").drop(columns="_rank")


def _with_verdict_values(table: pd.DataFrame, verdicts: pd.DataFrame) -> pd.DataFrame:
    """The table with each judged row's base, head and change as the verdict has them."""
    by_row = {(row["workload"], metric_label(str(row["metric"]))): row
              for row in verdicts.to_dict("records")}
    table = table.copy()
    for index, row in table.iterrows():
        found = by_row.get((row["workload"], row["metric"]))
        if found is None:
            continue
        name = str(found["metric"])
        table.at[index, "base"] = render_metric_value(_number(found["base"]), name)
        table.at[index, "head"] = render_metric_value(_number(found["head"]), name)
        table.at[index, "change %"] = _change_percent(found["rel_change"])
    return table


def config_diff(base: RunResult, head: RunResult) -> pd.DataFrame:
    return diff_frame(compute_config_diff(base.config_body, head.config_body),
                      f"base #{base.run_id}", f"head #{head.run_id}")


def environment_diff(base: RunResult, head: RunResult) -> pd.DataFrame:
    return diff_frame(compute_config_diff(base.environment, head.environment),
                      f"base #{base.run_id}", f"head #{head.run_id}")


def query_bisections(url: str, base_id: int, head_id: int) -> list[StoredBisection]:
    """The bisections that made both runs (the gate's base and head, or a probe and its
    control), newest first."""
    with Session(data.engine_for(url)) as session:
        found = fetch_bisections(session, run_ids=[head_id])
    return [b for b in found if {base_id, head_id} <= {run for _, _, run in b.runs}]


load_bisections = st.cache_data(ttl=data.CACHE_TTL_S, show_spinner=False)(query_bisections)


def culprit_frame(bisections: Sequence[StoredBisection]) -> pd.DataFrame:
    """The culprits of the newest of ``bisections``: field(s), share of the regression and its
    interval, on the metric it bisected."""
    if not bisections:
        return pd.DataFrame()
    latest = bisections[0]
    rows = []
    for culprit in latest.culprits:
        interval = culprit.get("share_interval")
        share = culprit.get("share")
        rows.append({
            "field": " + ".join(culprit["fields"]),
            "together": len(culprit["fields"]) > 1,
            "share %": None if share is None else share * 100.0,
            "interval %": None if interval is None
            else f"[{interval[0] * 100:.0f}%, {interval[1] * 100:.0f}%]",
            "metric": f"{latest.workload} {metric_label(str(latest.metric))}",
            "bisection": f"#{latest.bisection_id} ({latest.outcome}, {len(latest.probes)} probes)",
        })
    return pd.DataFrame(rows)
