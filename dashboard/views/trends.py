"""Trends: a metric over time per config x suite x workload, with version changes marked."""

import streamlit as st

from tracker.dashboard import charts, data, ui
from tracker.dashboard.trend_series import (
    display_format,
    display_unit,
    metric_label,
    shape_trend,
)
from tracker.dashboard.trendview import change_markers, choose_selection, version_changes

url = ui.page_start("Trends", "Any metric over time; hover a diamond for the config diff.")
options = data.load_trend_options(url)
selection, show_band = choose_selection(url, options)
if not selection.configs or not selection.suites:
    st.info("Choose at least one config and one suite.")
    st.stop()

trend = data.load_trend(url, selection)
if trend.empty:
    st.info("No run of this selection measured this metric.")
    st.stop()
shaped = shape_trend(trend, selection.metric)
changes = version_changes(url, shaped, selection.configs)
points = change_markers(url, shaped, selection)
st.plotly_chart(charts.render_trend_chart(shaped, changes, points, selection.metric,
                                          show_band=show_band), width="stretch")
band = ("The band is the median ± 2 std of the previous 10 runs of the same config version "
        "(on the log scale, so it never falls below zero; it starts afresh at each new "
        "version). " if show_band else "")
st.caption(f"{metric_label(selection.metric)}: {len(shaped)} points from "
           f"{shaped['run_id'].nunique()} runs. {band}Hollow markers are simulated runs; "
           "diamonds mark a new config version; crosses are change points (red: a regression, "
           "green: an improvement), the nightly watch's records first: hover one for its size "
           "and the config diff.")

latest = shaped.sort_values(["started_at", "run_id"]).iloc[-1]
ui.run_link(int(latest["run_id"]), f"Open the latest run in this view (#{latest['run_id']})")
with st.expander("Runs in this view"):
    ui.dataframe(shaped[["run_id", "started_at", "series", "shown", "status", "simulated",
                         "config_version"]].sort_values("started_at", ascending=False),
                 column_config={"shown": st.column_config.NumberColumn(
                     f"value ({display_unit(selection.metric).label})",
                     format=display_format(selection.metric)),
                     "run_id": st.column_config.NumberColumn("run", format="#%d")})
