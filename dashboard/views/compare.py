"""Compare: two runs (or two config versions) side by side — metrics, config and environment."""

import streamlit as st

from tracker.dashboard import charts, compareview, data, ui
from tracker.errors import NotFoundError

url = ui.page_start("Compare", "Two runs, or two config versions with all their runs, side by "
                    "side.")
pair = compareview.choose_pair(url)
try:
    comparison = data.load_comparison(url, pair.base_id, pair.head_id)
except NotFoundError as exc:
    st.error(ui.md_text(exc))
    st.stop()
base, head = comparison.base, comparison.head

left, right = st.columns(2)
for column, title, run in ((left, "Base", base), (right, "Head", head)):
    with column:
        st.markdown(f"**{title}**")
        ui.show_text(compareview.describe(run))
        if run.status.value != "completed":
            ui.show_status(run.status.value, run.status_reason, simulated=False)
if base.simulated or head.simulated:
    st.warning(ui.SIMULATED_NOTE, icon=":material/science:")
for note in compareview.like_for_like_notes(base, head):
    st.warning(ui.md_text(note), icon=":material/warning:")

if comparison.metrics.empty:
    st.info("These runs share no measured workload.")
else:
    verdicts = data.load_verdicts(url, *pair.judged)
    st.subheader("What changed")
    counts = verdicts["outcome"].value_counts()
    for column, outcome in zip(st.columns(4), compareview.OUTCOMES, strict=True):
        column.metric(outcome.replace("_", " "), int(counts.get(outcome, 0)))
    st.plotly_chart(charts.render_change_bars(
        compareview.headline_changes(comparison.metrics, verdicts)), width="stretch")
    st.caption("Verdicts come from the analysis, as the gate judges them: the run is the unit "
               "(two runs of one version never differ by their requests alone), the noise "
               "from the base version's stored runs, one false-alarm budget for the page; a "
               "regression or improvement is significant and at least its minimum effect, and "
               "each interval is at the level its row was decided at.")
    st.subheader("Every metric")
    ui.dataframe(compareview.metric_table_with_verdicts(comparison.metrics, verdicts),
                 column_config=compareview.METRIC_TABLE_COLUMNS)

config_tab, env_tab = st.tabs(["Config diff", "Environment diff"])
with config_tab:
    diff = compareview.config_diff(base, head)
    if diff.empty:
        st.success("Same config body.")
    else:
        ui.dataframe(diff)
with env_tab:
    diff = compareview.environment_diff(base, head)
    if diff.empty:
        st.success("Same environment.")
    else:
        ui.dataframe(diff)

culprits = compareview.culprit_frame(compareview.load_bisections(url, pair.base_id, pair.head_id))
if not culprits.empty:
    st.subheader("Which change did it")
    st.caption("From `tracker bisect`: probes applying some of the head's changes to the base, "
               "each judged against interleaved base runs (docs/bisect.md).")
    ui.dataframe(culprits, column_config={
        "share %": st.column_config.NumberColumn(format="%.0f%%")})
