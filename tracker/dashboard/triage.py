"""The Regressions page's pieces: the table, one record's story, and the triage form."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from tracker.dashboard import data, ui, viewer
from tracker.dashboard.pages import page
from tracker.dashboard.trend_series import display_unit, metric_label
from tracker.store.regressions import RegressionRecord, RegressionStatus

FLASH_KEY = "triage_flash"
STATUS_HELP = {
    "open": "new: someone should look",
    "acknowledged": "someone is looking",
    "expected": "a known trade-off (say why in the note)",
    "fixed": "the level is back",
    "improvement": "the metric's good way: recorded, nothing to fix",
}
KIND_TITLES: dict[bool | None, str] = {True: "Regression", False: "Improvement", None: "Change"}


def regression_table(frame: pd.DataFrame) -> pd.DataFrame:
    table = frame[["id", "status", "config", "suite", "workload"]].copy()
    table["metric"] = frame["metric"].map(metric_label)
    table["change %"] = frame["rel_change"] * 100.0
    table["direction"] = frame["regressed"].map(
        lambda r: "worse" if r is True else "better" if r is False else "unknown")
    table["run"] = frame["run_id"]
    table["detected (UTC)"] = frame["detected_at"]
    table["note"] = frame["note"]
    table["triaged by"] = frame["updated_by"]
    return table


def split_by_direction(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The records in the worse direction, largest change first, and the others (improvements
    and changes of unknown direction), so an improvement never reads as a regression. The watch
    stores improvements with a status of their own, but an older record may still be open."""
    worse = frame["regressed"] == True  # noqa: E712 - a column of True/False/None
    size = frame["rel_change"].abs().fillna(0.0)
    ordered = frame.assign(_size=size).sort_values("_size", ascending=False).drop(columns="_size")
    return ordered[worse.loc[ordered.index]], frame[~worse]


def describe(row: Mapping[Hashable, Any]) -> str:
    """One plain-text line: the series and the size of the change."""
    rel = row["rel_change"]
    change = "" if rel is None or pd.isna(rel) else f" {rel * 100:+.1f}%"
    return (f"{row['config']} · {row['suite']} · {row['workload']} · "
            f"{metric_label(str(row['metric']))}{change}")


def regression_link(regression_id: int, label: str) -> None:
    st.page_link(page("regressions").path, label=label, icon=":material/flag:",
                 query_params={"id": str(regression_id)})


def show_record(url: str, record: Mapping[Hashable, Any]) -> None:
    """One regression: the series, the size of the change, its first run, what changed, and
    who triaged it last."""
    metric = str(record["metric"])
    unit = display_unit(metric)
    stored = data.load_regression(url, int(record["id"]))
    title = KIND_TITLES[stored.regressed]
    st.subheader(f"{title} {int(record['id'])} · {ui.md_text(record['status'])}")
    ui.show_text(f"{record['config']} · {record['suite']} · {record['workload']} · "
                 f"{metric_label(metric)}")
    before, after = record["before"] * unit.scale, record["after"] * unit.scale
    rel = record["rel_change"]
    left, middle, right = st.columns(3)
    left.metric("before (last good version)", f"{before:.4g} {unit.label}")
    middle.metric("after (since the change)", f"{after:.4g} {unit.label}",
                  delta=None if pd.isna(rel) else f"{rel * 100:+.1f}%",
                  delta_color="inverse" if stored.regressed is not None and (
                      (rel > 0) == stored.regressed) else "normal")
    right.metric("detected (UTC)", f"{record['detected_at']:%Y-%m-%d %H:%M}")
    how = describe_size(stored)
    if how is not None:
        st.caption(how)
    if record["attribution"]:
        st.caption("What changed around it")
        ui.show_text(record["attribution"])
    if not pd.isna(record["run_id"]):
        ui.run_link(int(record["run_id"]), f"Open run #{int(record['run_id'])}, the first run "
                    "of the new level")
    ui.show_text(describe_triage(stored))


def describe_size(record: RegressionRecord) -> str | None:
    """How the change was measured, with its interval, or None for a record without one (stored
    before revision 0014, when the levels were the detector's segment medians)."""
    if record.rel_change is None or record.interval is None:
        return None
    low, high = record.interval
    return ("Geometric means of one value per run, the last good config version's runs (or the "
            "segment before the change) against the runs since; a t-test over runs: "
            f"{record.rel_change * 100:+.1f}% [{low * 100:+.1f}%, {high * 100:+.1f}%].")


def describe_triage(record: RegressionRecord) -> str:
    """Who changed the record last, and when (plain text)."""
    if record.updated_by is not None:
        return f"last triaged by {record.updated_by} at {record.updated_at:%Y-%m-%d %H:%M} UTC"
    if record.updated_at > record.detected_at:
        return (f"last changed at {record.updated_at:%Y-%m-%d %H:%M} UTC, by someone not "
                "recorded (an older tracker)")
    return "not triaged yet"


def triage_form(url: str, record: Mapping[Hashable, Any]) -> None:
    """Acknowledge, mark expected or fixed, with a note, written through the store."""
    statuses = [status.value for status in RegressionStatus]
    with st.form(f"triage_{int(record['id'])}"):
        status = st.radio("Status", statuses, index=statuses.index(str(record["status"])),
                          horizontal=True, key="triage_status",
                          format_func=lambda s: f"{s} ({STATUS_HELP.get(s, '')})")
        note = st.text_area("Note", value=ui.plain_text(record["note"] or ""), key="triage_note",
                            placeholder="why it is expected, the fix, the issue link…")
        if st.form_submit_button("Save", type="primary"):
            by = viewer.current_viewer()
            if by is None:  # the gate passed on this run, so the sign-in just ended
                st.error("Not saved: sign in again.")
                st.stop()
            data.save_regression_status(url, int(record["id"]), str(status), note, by)
            st.session_state[FLASH_KEY] = f"Saved: regression {int(record['id'])} is {status}."
            st.rerun()


def show_flash() -> None:
    """The confirmation of the last save, once, after the rerun that shows its effect."""
    message = st.session_state.pop(FLASH_KEY, None)
    if message:
        st.success(str(message), icon=":material/check:")
