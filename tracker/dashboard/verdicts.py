"""Verdicts for the Compare page, from ``tracker.analysis``.

Only analysis decides "regression": Compare shows the gate's own rows (``tracker.gate.rows``),
judged by the one comparison policy (``tracker.analysis.policy``), so the dashboard and
``tracker gate --base-run/--head-run`` never disagree: the run is the unit (two runs of one
config version never read as a change from their requests alone), the history's runs of the
base version give the noise, client-bound runs count with their timing error, and one
false-alarm budget covers the page. ``p_value`` is the one-sided p-value of "head is worse" in
the metric's bad direction (an improvement reads near 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from tracker.gate.rows import (
    GateOptions,
    GateRow,
    compute_gate_rows,
    compute_rows_prior,
    judge_gate_rows,
)
from tracker.inputs.config_diff import compute_config_diff
from tracker.results import RunResult

VERDICT_COLUMNS = ["workload", "metric", "outcome", "rel_change", "ci_low", "ci_high",
                   "p_value", "samples", "reason", "base", "head"]
AS_CONFIGURED = "as_configured"  # the outcome shown for a change a config field asks for
FAMILY_ALPHA = 0.05


def compute_verdicts(base: Sequence[RunResult], head: Sequence[RunResult],
                     history: Sequence[RunResult] = ()) -> pd.DataFrame:
    """The analysis' verdict on each row the gate judges (``tracker.gate.rows``), over all the
    runs of each side, with the noise prior from ``history`` (earlier runs of the base
    version, not the compared ones)."""
    if not base or not head:
        return pd.DataFrame([], columns=VERDICT_COLUMNS)
    changes = compute_config_diff(base[0].config_body, head[0].config_body)
    prior = compute_rows_prior(history, base, head)
    rows = judge_gate_rows(compute_gate_rows(base, head, GateOptions(), prior=prior),
                           FAMILY_ALPHA, changes)
    return pd.DataFrame([_row(row, prior_runs=len(history)) for row in rows
                         if row.verdict is not None], columns=VERDICT_COLUMNS)


def _row(row: GateRow, *, prior_runs: int) -> tuple[object, ...]:
    verdict = row.verdict
    assert verdict is not None
    low, high = verdict.ci if verdict.ci is not None else (None, None)
    outcome = AS_CONFIGURED if row.as_configured is not None else verdict.outcome.value
    reason = verdict.reason
    if row.as_configured is not None:
        reason = f"as configured ({row.as_configured}): {reason}"
    for note in (row.note, row.client_note):
        if note:
            reason = f"{reason} ({note})"
    runs = f"{verdict.base_runs} vs {verdict.head_runs} run(s)"
    if prior_runs and "earlier runs" in verdict.method:
        runs += f", noise from {prior_runs} earlier"
    return (row.workload, row.metric, outcome, verdict.rel_change, low, high, verdict.p_value,
            runs, reason, verdict.base_value, verdict.head_value)
