"""Frontier: a config's throughput against latency over a rate or concurrency ladder, per version
and per recent night, with each knee marked (docs/frontier.md)."""

import streamlit as st

from tracker.dashboard import data, ui
from tracker.dashboard.frontierview import (
    LATENCY_METRICS,
    LATEST_NIGHTS,
    VERSION_RUNS,
    compute_frontier_lines,
    frontier_table,
    ladder_workloads,
    load_frontier_rows,
    reference_throughput,
    render_frontier_chart,
)
from tracker.dashboard.trend_series import metric_label

url = ui.page_start("Frontier", "Throughput against latency over a sweep's or a ladder's loads: "
                    "how a config's capacity frontier moves from version to version.")
options = data.load_trend_options(url)
left, middle, right = st.columns(3)
config = left.selectbox("Config", options.configs, format_func=ui.plain_text,
                        key="frontier_config")
suite = middle.selectbox("Suite", options.suites, format_func=ui.plain_text,
                         key="frontier_suite")
latency = right.selectbox("Latency", LATENCY_METRICS, format_func=metric_label,
                          key="frontier_latency")
rows = load_frontier_rows(url, str(config), str(suite), str(latency))
workloads = ladder_workloads(rows)
if not workloads:
    st.info("No run of this config and suite stored a ladder (a workload with sweep: or "
            "stages:, whose results are named workload@8rps, workload@c4, ...).")
    st.stop()
workload = st.selectbox("Workload", workloads, format_func=ui.plain_text,
                        key="frontier_workload")
lines = compute_frontier_lines(rows, str(workload))
st.plotly_chart(render_frontier_chart(lines, metric_label(str(latency))), width="stretch",
                key="frontier_chart")
st.caption(f"Each version's Pareto front is the median, per load asked for, of its latest "
           f"{VERSION_RUNS} runs; dotted: the latest {LATEST_NIGHTS} nights, each on its own. "
           "Stars mark the knees (Kneedle: where latency starts to rise faster than throughput). "
           "Points past saturation (more load, no more throughput) leave the front.")
default = reference_throughput(lines)
at = st.number_input("Fixed throughput (req/s) to read the latency at", min_value=0.0,
                     value=float(default) if default is not None else 1.0,
                     key="frontier_at")
ui.dataframe(frontier_table(lines, float(at)))
