"""Render a bisection (``tracker.bisection.probes.BisectResult``): the culprit table of the gate's
Markdown, and the ``bisect`` object of its JSON.

Culprit: a field, or fields that regress only together (one row, joined by ``+``), with the base
and head values as the config diff shows them (redacted there) and the share of the regression
it explains on the failing metric, with its interval. Probe reasons come from outside (a
server's error, a config's validation) and are shown as escaped text.
"""

from __future__ import annotations

from typing import Any

from tracker.bisection.plan import BisectOutcome, Culprit, Probe
from tracker.bisection.probes import BisectResult
from tracker.inputs.config_diff import ABSENT, HIDDEN, Change, render_value
from tracker.redaction import escape_markdown
from tracker.reports.diff_report import render_code_cell

HEADLINES = {
    BisectOutcome.NO_REGRESSION: "no regression, nothing to bisect",
    BisectOutcome.NOT_MEASURED: "could not measure, nothing to bisect",
    BisectOutcome.FOUND: "culprit found",
    BisectOutcome.NARROWED: "narrowed, not isolated",
    BisectOutcome.INTERRUPTED: "interrupted, the probes so far",
}


def render_share(culprit: Culprit) -> str:
    if culprit.share is None:
        return "-"
    text = f"{culprit.share:.0%}"
    if culprit.share_interval is not None:
        low, high = culprit.share_interval
        text += f" [{low:.0%}, {high:.0%}]"
    return text


def render_alone(culprit: Culprit) -> str:
    verdict = culprit.verdict
    if verdict is None or verdict.rel_change is None:
        return "-"
    if verdict.ci is None:
        return f"{verdict.rel_change:+.1%}"
    low, high = verdict.ci
    return f"{verdict.rel_change:+.1%} [{low:+.1%}, {high:+.1%}]"


def _values(culprit: Culprit, changes: dict[str, Change]) -> str:
    parts = []
    for path in culprit.fields:
        change = changes[path]
        parts.append(f"{_value(change.old)} → {_value(change.new)}")
    return "; ".join(parts)


def _value(value: Any) -> str:
    """As the diff's table shows it: the markers (default) and (hidden) as words."""
    if value is ABSENT or value is HIDDEN:
        return str(value)
    return render_code_cell(render_value(value))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_culprit_table(result: BisectResult) -> list[str]:
    changes = {change.path: change for change in result.changes}
    lines = ["| field | base → head | share of the regression [interval] | "
             "alone vs base [interval] |", "|---|---|---|---|"]
    for culprit in result.culprits:
        names = " + ".join(render_code_cell(path) for path in culprit.fields)
        if culprit.interaction:
            names += " (together)"
        lines.append(f"| {_cell(names)} | {_cell(_values(culprit, changes))} | "
                     f"{render_share(culprit)} | {render_alone(culprit)} |")
    return lines


def _probe_row(probe: Probe) -> str:
    fields = ", ".join(render_code_cell(path) for path in probe.fields)
    judgement = probe.judgement
    runs = " · ".join(", ".join(map(str, ids)) or "-"
                      for ids in (judgement.control_run_ids, judgement.probe_run_ids))
    reason = escape_markdown(judgement.reason)
    return (f"| {probe.number} | {_cell(fields)} | {judgement.outcome.value} | "
            f"{_cell(reason)} | {runs} |")


def render_bisect_markdown(result: BisectResult) -> str:
    """The ``### Bisection`` section of the gate's Markdown."""
    lines = [f"### Bisection: {HEADLINES[result.outcome]}", ""]
    if result.label is not None and result.head_verdict is not None:
        whole = result.head_verdict
        change = ("" if whole.rel_change is None
                  else f" ({whole.rel_change:+.1%} for the head)")
        lines += [f"On {escape_markdown(result.label)}{change}, the metric the gate failed on: "
                  f"{escape_markdown(result.stop_reason)}; each probe is judged against "
                  f"interleaved base runs at {result.probe_confidence:.2%} confidence (the "
                  "gate's false-alarm budget over the probes).", ""]
    else:
        lines += [escape_markdown(result.stop_reason) + ".", ""]
    if result.culprits:
        lines += [*render_culprit_table(result), ""]
    if result.probes:
        lines += [f"<details><summary>{len(result.probes)} probes</summary>", "",
                  "| probe | fields applied | outcome | why | runs (base · probe) |",
                  "|---|---|---|---|---|", *(_probe_row(p) for p in result.probes), "",
                  "</details>", ""]
    return "\n".join(lines)


def _culprit_json(culprit: Culprit, changes: dict[str, Change]) -> dict[str, Any]:
    verdict = culprit.verdict
    return {
        "fields": [{"path": path, "old": changes[path].old, "new": changes[path].new}
                   for path in culprit.fields],
        "interaction": culprit.interaction,
        "share": culprit.share,
        "share_interval": None if culprit.share_interval is None else list(culprit.share_interval),
        "rel_change": None if verdict is None else verdict.rel_change,
        "ci": None if verdict is None or verdict.ci is None else list(verdict.ci),
    }


def render_bisect_json(result: BisectResult) -> dict[str, Any]:
    changes = {change.path: change for change in result.changes}
    return {
        "outcome": result.outcome.value,
        "bisection_id": result.bisection_id,
        "workload": None if result.row is None else result.row[0],
        "metric": None if result.row is None else result.row[1],
        "stop_reason": result.stop_reason,
        "probe_confidence": result.probe_confidence,
        "culprits": [_culprit_json(culprit, changes) for culprit in result.culprits],
        "probes": [{"number": p.number, "fields": list(p.fields),
                    "outcome": p.judgement.outcome.value, "reason": p.judgement.reason,
                    "control_run_ids": list(p.judgement.control_run_ids),
                    "probe_run_ids": list(p.judgement.probe_run_ids)}
                   for p in result.probes],
    }
