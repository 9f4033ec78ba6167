"""Regressions: the change points the analysis raised, and their triage."""

import streamlit as st

from tracker.dashboard import data, triage, ui
from tracker.store.regressions import RegressionStatus

url = ui.page_start("Regressions", "Change points the analysis raised; triage them here.")
triage.show_flash()
statuses = [status.value for status in RegressionStatus]
shown = st.multiselect("Status", statuses, default=["open", "acknowledged"],
                       key="regression_statuses")
frame = data.load_regressions(url, tuple(shown))
if frame.empty:
    st.success("No regression records with these statuses.", icon=":material/check_circle:")
    st.stop()

table = triage.regression_table(frame)
event = ui.dataframe(table, on_select="rerun", selection_mode="single-row",
                     key="regression_table", column_config={
                         "change %": st.column_config.NumberColumn(format="%+.1f%%"),
                         "run": st.column_config.NumberColumn(format="#%d")})
wanted = ui.query_int("id")
if event.selection.rows:
    wanted = int(table["id"].iloc[event.selection.rows[0]])
    st.query_params["id"] = str(wanted)
records = {int(r["id"]): r for r in frame.to_dict("records")}
record = records.get(wanted or -1) or next(iter(records.values()))
st.divider()
triage.show_record(url, record)
triage.triage_form(url, record)
