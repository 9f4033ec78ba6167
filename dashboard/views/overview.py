"""Overview: the latest nightly status of every config x suite, problems first."""

from datetime import UTC, datetime

import streamlit as st

from tracker.dashboard import charts, data, triage, ui
from tracker.dashboard.overview_state import STALE_AFTER, STATE_ORDER, shape_overview
from tracker.dashboard.pages import page

url = ui.page_start("Overview", "The latest run of every config on every suite.")
overview = shape_overview(data.load_overview(url), datetime.now(UTC),
                          data.load_regressed_pairs(url))
open_regressions = data.load_regressions(url, ("open",))
summary = data.load_summary(url)

counts = overview["state"].value_counts()
for column, state in zip(st.columns(len(STATE_ORDER) + 1), (*STATE_ORDER, "runs"), strict=True):
    if state == "runs":
        column.metric("runs stored", f"{summary.runs:,}")
    else:
        column.metric(state, int(counts.get(state, 0)))

st.plotly_chart(charts.render_status_grid(overview), width="stretch")
st.caption(f"Stale: the latest run is older than {STALE_AFTER.total_seconds() / 3600:.0f} h. "
           "Hollow markers on Trends are simulated runs.")

worse, other = triage.split_by_direction(open_regressions)
if not worse.empty:
    st.subheader(f"Open regressions ({len(worse)})")
    for row in worse.head(8).to_dict("records"):
        left, right = st.columns([3, 1])
        left.text(ui.plain_text(triage.describe(row)))
        with right:
            triage.regression_link(int(row["id"]), f"Triage regression {int(row['id'])}")
if not other.empty:
    st.caption(f"Also open: {len(other)} change points of unknown direction (or in the better "
               "direction, stored by an older tracker); see Regressions.")
improvements = data.load_regressions(url, ("improvement",))
if not improvements.empty:
    st.caption(f"{len(improvements)} improvements recorded (not open: nothing to fix); see "
               "Regressions, status improvement.")

problems = overview[overview["state"] != "pass"]
if problems.empty:
    st.success("Every config x suite passed on its latest run.", icon=":material/check_circle:")
else:
    st.subheader("Needs a look")
    for row in problems.head(12).to_dict("records"):
        left, right = st.columns([3, 1])
        left.text(ui.plain_text(f"{row['state']:<10} {row['config']} · {row['suite']} · "
                                f"{row['when']}" + (" · simulated" if row["simulated"] else "")))
        with right:
            ui.run_link(int(row["run_id"]))

st.subheader("Latest runs")
table = overview[["state", "config", "suite", "run_id", "status", "simulated", "when",
                  "started_at", "runs", "status_reason"]].copy()
table["config_version"] = overview["config_version"].str[:12]
event = ui.dataframe(
    table, on_select="rerun", selection_mode="single-row", key="overview_table",
    column_config={"run_id": st.column_config.NumberColumn("run", format="#%d"),
                   "started_at": st.column_config.DatetimeColumn("started (UTC)"),
                   "runs": st.column_config.NumberColumn("runs stored"),
                   "status_reason": "reason"})
st.caption("Select a row to open its run.")
if event.selection.rows:
    chosen = int(table["run_id"].iloc[event.selection.rows[0]])
    st.switch_page(page("run").path, query_params={"run": str(chosen)})
