"""Speculative decoding in the gate's report: each workload's acceptance before and after, and
whether it is what moved the TPOT.

The verdicts are the analysis' (the acceptance rows and the TPOT rows of the gate). This module
only puts them side by side. A workload whose TPOT regressed while its acceptance rate regressed
names the drafts' acceptance as the cause. One whose TPOT regressed while the acceptance held
says the cause is elsewhere. The config changes under ``engine.speculative_config`` are shown
with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracker.gate.gating import GateResult, GateRow
from tracker.redaction import escape_markdown

RATE = "spec_decode_acceptance_rate"
LENGTH = "spec_decode_mean_acceptance_length"
SPEC_PATH = "engine.speculative_config"


@dataclass(frozen=True, slots=True)
class AcceptanceChange:
    """One workload's acceptance, base → head, beside its TPOT verdicts."""

    workload: str
    rate: tuple[float, float] | None  # (base, head)
    length: tuple[float, float] | None
    rate_regressed: bool  # the analysis' verdict on the acceptance rate row
    tpot_regressed: tuple[str, ...]  # labels of the workload's TPOT rows that regressed

    @property
    def cause(self) -> str | None:
        """What the two verdicts say together, or None when the TPOT did not regress."""
        if not self.tpot_regressed:
            return None
        tpot = ", ".join(self.tpot_regressed)
        if self.rate_regressed:
            return (f"{tpot} regressed as the acceptance rate fell: the drafts' acceptance is "
                    "the cause (fewer tokens per decode step)")
        return f"{tpot} regressed while the acceptance held: the cause is elsewhere"


def _values(row: GateRow | None) -> tuple[float, float] | None:
    verdict = None if row is None else row.verdict
    if verdict is None or verdict.base_value is None or verdict.head_value is None:
        return None
    return verdict.base_value, verdict.head_value


def compute_acceptance_changes(result: GateResult) -> list[AcceptanceChange]:
    """Each workload with an acceptance row, in the report's order."""
    changes: list[AcceptanceChange] = []
    workloads = dict.fromkeys(row.workload for row in result.rows if row.metric == RATE)
    for workload in workloads:
        rows = {row.metric: row for row in result.rows if row.workload == workload}
        rate_row = rows.get(RATE)
        tpot = tuple(row.label for row in rows.values()
                     if row.metric.startswith("tpot_") and row.regressed)
        changes.append(AcceptanceChange(
            workload, _values(rate_row), _values(rows.get(LENGTH)),
            rate_row is not None and rate_row.verdict is not None and rate_row.verdict.regressed,
            tpot))
    return changes


def _spec_changes(result: GateResult) -> list[str]:
    return [change.render() for change in result.config_changes
            if change.path == SPEC_PATH or change.path.startswith(SPEC_PATH + ".")]


def render_speculative_line(result: GateResult) -> str | None:
    """"**Speculative decoding** (…, base → head): chat: acceptance rate 62.0% → 9.8%, mean
    acceptance length 3.48 → 1.39 tokens; TPOT median regressed as the acceptance rate fell: …
    · config: engine.speculative_config.method: eagle3 → ngram", or None when no workload has
    acceptance rows."""
    changes = compute_acceptance_changes(result)
    if not changes:
        return None
    parts: list[str] = []
    for change in changes:
        text = f"{escape_markdown(change.workload)}: acceptance rate "
        text += "-" if change.rate is None else f"{change.rate[0]:.1%} → {change.rate[1]:.1%}"
        if change.length is not None:
            text += (f", mean acceptance length {change.length[0]:.2f} → "
                     f"{change.length[1]:.2f} tokens")
        if change.cause is not None:
            text += f"; {change.cause}"
        parts.append(text)
    configured = _spec_changes(result)
    changed = f" · config: {escape_markdown('; '.join(configured))}" if configured else ""
    return ("**Speculative decoding** (acceptance from the server's spec_decode counters, "
            "base → head): " + " · ".join(parts) + changed)


def render_speculative_json(result: GateResult) -> list[dict[str, Any]]:
    """The same per workload: acceptance rate and mean acceptance length ``{"base", "head"}``,
    the TPOT rows that regressed, whether the acceptance rate regressed, and the cause."""
    def pair(values: tuple[float, float] | None) -> dict[str, float] | None:
        return None if values is None else {"base": values[0], "head": values[1]}

    return [{"workload": c.workload, "acceptance_rate": pair(c.rate),
             "mean_acceptance_length": pair(c.length), "acceptance_regressed": c.rate_regressed,
             "tpot_regressed": list(c.tpot_regressed), "cause": c.cause}
            for c in compute_acceptance_changes(result)]
