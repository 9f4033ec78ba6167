"""Run detail: one stored run — summaries, distributions, timeline, requests, environment."""

import streamlit as st

from tracker.dashboard import charts, data, runview, ui

url = ui.page_start("Run detail", "One stored run, every workload and request.")
run_id = runview.choose_run(url, "run", "Run id", data.default_run_id(url))
detail = runview.load_or_stop(url, run_id)
run = detail.run

st.subheader(f"Run #{run.run_id} · {ui.md_text(run.config.name)} · "
             f"{ui.md_text(run.suite.name)}")
ui.status_badges(run.status.value, run.simulated)
took = "" if run.ended_at is None else \
    f" · took {(run.ended_at - run.started_at).total_seconds():.0f} s"
ui.show_text(f"started {run.started_at:%Y-%m-%d %H:%M:%S} UTC{took} · config "
             f"{run.config.name}@{run.config.version[:12]} · suite {run.suite.name}@"
             f"{run.suite.version[:12]} · host {run.host}")
ui.show_status(run.status.value, run.status_reason, run.simulated)

previous = data.load_previous_run_id(url, run.run_id)
if previous is not None:
    ui.compare_link(previous, run.run_id,
                    f"Compare with the previous run of this config and suite (#{previous})")

st.subheader("Workloads")
summary = runview.summary_table(detail.workloads)
layout = runview.summary_layout(summary)
ui.dataframe(summary, column_order=layout.order, column_config=layout.config)
if layout.hidden:
    st.caption(f"More columns in the table's Show/hide columns menu (the eye above it): "
               f"{ui.md_text(', '.join(layout.hidden))}.")

requests = detail.requests
(dist_tab, timeline_tab, gpu_tab, server_tab, quality_tab, requests_tab, errors_tab, env_tab,
 config_tab) = st.tabs(["Distributions", "Over the run", "GPU", "Server metrics", "Quality",
                        "Requests", "Errors", "Environment", "Config"])
if requests.empty:
    dist_tab.info("This run stored no request records.")
else:
    with dist_tab:
        left, right = st.columns([2, 1])
        column = left.radio("Latency", list(runview.LATENCY_COLUMNS), horizontal=True,
                            format_func=runview.LATENCY_COLUMNS.__getitem__, key="dist_latency")
        kind = right.radio("Shown as", ["cdf", "histogram"], horizontal=True, key="dist_kind",
                           format_func=lambda k: "CDF" if k == "cdf" else "histogram")
        st.plotly_chart(charts.render_distribution(
            requests, column, runview.LATENCY_COLUMNS[column], kind), width="stretch")
    with timeline_tab:
        column = st.radio("Latency", list(runview.LATENCY_COLUMNS), horizontal=True,
                          format_func=runview.LATENCY_COLUMNS.__getitem__, key="time_latency")
        st.plotly_chart(charts.render_latency_over_run(
            requests, column, runview.LATENCY_COLUMNS[column]), width="stretch")
with gpu_tab:
    samples = runview.gpu_frame(run)
    if samples.empty:
        st.info("No GPU samples in this run.")
    else:
        st.plotly_chart(charts.render_gpu_timeline(samples), width="stretch")
    for note in runview.telemetry_notes(run):
        ui.show_text(note)
with server_tab:
    server = runview.server_frame(run)
    if server.empty:
        st.info("No server metrics in this run.")
    else:
        ui.dataframe(server)
with quality_tab:
    if run.quality is None:
        st.info("This run's suite has no quality set.")
    else:
        quality = run.quality
        left, middle, right = st.columns(3)
        left.metric("accuracy", "—" if quality.accuracy is None else
                    f"{quality.accuracy:.1%}", help="with its Wilson interval below")
        middle.metric("answered", f"{quality.answered} / {len(quality.items)}")
        right.metric("answers changed", "—" if quality.drift is None else f"{quality.drift:.1%}",
                     help="share of answers that differ from the baseline run's")
        if quality.accuracy_ci_low is not None and quality.accuracy_ci_high is not None:
            st.caption(f"accuracy interval {quality.accuracy_ci_low:.1%} to "
                       f"{quality.accuracy_ci_high:.1%}; set {ui.md_text(quality.set_name)}")
        items = runview.quality_frame(run)
        if st.toggle("Only answers that changed", value=bool(quality.drift), key="changed_only"):
            items = items[items["changed"] == True]  # noqa: E712 - True/False/None column
        ui.dataframe(items)
with requests_tab:
    ui.dataframe(requests, height=420)
with errors_tab:
    failed = requests[requests["error_class"].notna()]
    if failed.empty:
        st.success("No request failed.")
    else:
        ui.dataframe(failed.groupby(["workload", "error_class"]).size()
                     .reset_index(name="requests"))
        ui.dataframe(failed[["workload", "index", "error_class", "error"]])
with env_tab:
    ui.show_json(dict(run.environment))
    ui.show_text(f"host {run.host} · tracker {run.tracker_version}")
with config_tab:
    ui.show_json(dict(run.config_body))
