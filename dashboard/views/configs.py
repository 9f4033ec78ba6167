"""Configs: each config's version history, with the diff between consecutive versions."""

import itertools

import pandas as pd
import streamlit as st

from tracker.dashboard import charts, data, ui
from tracker.dashboard.diffs import diff_frame
from tracker.inputs.config_diff import compute_config_diff

url = ui.page_start("Configs", "Every version of a serving config the store has seen.")
names = data.load_trend_options(url).configs
wanted = st.query_params.get("config")
config = st.selectbox("Config", names, index=names.index(wanted) if wanted in names else 0,
                      format_func=ui.plain_text, key="config_name")
st.query_params["config"] = str(config)
history = data.load_config_history(url, str(config))

versions = pd.DataFrame([{"version": e.version[:12], "first_seen_at": e.first_seen_at,
                          "runs": e.runs, "last_run_at": e.last_run_at} for e in history])
st.plotly_chart(charts.render_version_timeline(versions), width="stretch")
ui.dataframe(versions.iloc[::-1], column_config={
    "first_seen_at": st.column_config.DatetimeColumn("first seen (UTC)"),
    "last_run_at": st.column_config.DatetimeColumn("last run (UTC)")})

st.subheader("Changes, newest first")
pairs = list(itertools.pairwise(history))
if not pairs:
    st.info("A single version so far.")
for old, new in reversed(pairs):
    changes = compute_config_diff(old.canonical, new.canonical)
    label = (f"{old.version[:12]} → {new.version[:12]} · {new.first_seen_at:%Y-%m-%d} · "
             f"{len(changes)} change{'s' if len(changes) != 1 else ''}")
    with st.expander(ui.md_text(label), expanded=new is history[-1]):
        ui.dataframe(diff_frame(changes, old.version[:12], new.version[:12]))
with st.expander(f"Current body ({ui.md_text(history[-1].version[:12])})"):
    ui.show_json(dict(history[-1].canonical))
