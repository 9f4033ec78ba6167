"""Render a gate result: Markdown for a PR comment, JUnit XML for CI, and a JSON verdict.

An edge: seconds become milliseconds here. The verdicts are ``tracker.analysis``'s, shown as is.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from tracker.analysis import Outcome, Verdict
from tracker.analysis.constant_measures import EXACT_METHOD
from tracker.bisection.probes import BisectResult
from tracker.gate.gating import GateOutcome, GateResult, GateRow
from tracker.gate.memory import MEMORY_METRIC
from tracker.gate.quality_check import ACCURACY
from tracker.metrics import GIB
from tracker.redaction import escape_markdown
from tracker.reports.bisect_report import render_bisect_json, render_bisect_markdown
from tracker.reports.diff_report import render_diff_markdown
from tracker.reports.quality_report import (
    render_accuracy_change,
    render_quality_json,
    render_quality_markdown,
)
from tracker.reports.spec_report import render_speculative_json, render_speculative_line

JSON_SCHEMA = "tracker.gate.gating/1"
MIB = 1024**2
SYMBOLS = {
    Outcome.REGRESSION: "❌ regression",
    Outcome.IMPROVEMENT: "✅ improvement",
    Outcome.NO_CHANGE: "🟰 no change",
    Outcome.INCONCLUSIVE: "❔ inconclusive",
}
HEADLINES = {
    GateOutcome.PASS: "✅ pass",
    GateOutcome.REGRESSION: "❌ regression",
    GateOutcome.NOT_MEASURED: "⚠️ could not measure",
}


def render_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value * 1000.0:.2f} ms"
    if unit == "bytes":
        return f"{value / GIB:.2f} GiB"
    if unit == "fraction":
        return f"{value:.1%}"
    return f"{value:.2f} {unit}"


def render_memory_line(result: GateResult) -> str | None:
    """"**GPU memory** (peak per GPU, from NVML): single-user 72.00 GiB → 76.00 GiB (+4.00 GiB,
    ❌ regression) · ...", or None when no row has memory."""
    rows = [row for row in result.rows if row.metric == MEMORY_METRIC.name]
    if not rows:
        return None
    parts: list[str] = []
    for row in rows:
        v = row.verdict
        if v is None or v.base_value is None or v.head_value is None:
            parts.append(f"{escape_markdown(row.workload)} {escape_markdown(row.note or '')}")
            continue
        delta = (v.head_value - v.base_value) / MIB
        parts.append(f"{escape_markdown(row.workload)} {render_value(v.base_value, row.unit)} → "
                     f"{render_value(v.head_value, row.unit)} ({delta:+,.0f} MiB, "
                     f"{render_row_verdict(row)})")
    sources = sorted({row.note for row in rows if row.verdict is not None and row.note})
    where = f", {escape_markdown('; '.join(sources))}" if sources else ""
    exact = [row.verdict for row in rows
             if row.verdict is not None and row.verdict.method == EXACT_METHOD]
    how = (f"; bit-constant: compared exactly, tolerance {exact[0].min_effect:g}" if exact
           else "")
    return f"**GPU memory** (peak per GPU{where}{how}): " + " · ".join(parts)


def render_client_line(result: GateResult) -> str | None:
    """"**Client-bound runs** (judged with their timing error): chat: 4 of 6 base runs
    client-bound (starved: …)", one entry a workload, or None when no run was client-bound."""
    notes = dict.fromkeys((row.workload, row.client_note) for row in result.rows
                          if row.client_note)
    if not notes:
        return None
    parts = [f"{escape_markdown(workload)}: {escape_markdown(note)}" for workload, note in notes]
    return ("**Client-bound runs** (counted, with their client's lag as a bound on what they "
            "measured): " + " · ".join(parts))


def render_warnings_line(result: GateResult,
                         warnings: Mapping[int, Sequence[str]] | None) -> str | None:
    """"**Server checks** (where a run's server contradicts its config): engine.block_size: …
    (base runs 3, 4)", one entry a distinct warning, or None when no run of the gate has one."""
    if not warnings:
        return None
    sides: dict[str, list[str]] = {}
    for side, ids in (("base", result.base_run_ids), ("head", result.head_run_ids)):
        for run_id in ids:
            for warning in warnings.get(run_id, ()):
                sides.setdefault(warning, []).append(f"{side} {run_id}")
    if not sides:
        return None
    parts = [f"{escape_markdown(warning)} (runs {', '.join(runs)})"
             for warning, runs in sides.items()]
    return ("**Server checks** (where a run's server contradicts its config; the run measured "
            "the server as it ran): " + " · ".join(parts))


def render_change(verdict: Verdict) -> str:
    if verdict.rel_change is None or verdict.ci is None:
        return "-"
    low, high = verdict.ci
    return f"{verdict.rel_change:+.1%} [{low:+.1%}, {high:+.1%}]"


def render_verdict(verdict: Verdict) -> str:
    text = SYMBOLS[verdict.outcome]
    if verdict.outcome is Outcome.INCONCLUSIVE and verdict.runs_needed is not None:
        text += f" (~{verdict.runs_needed} runs/side)"
    return text


def render_row_verdict(row: GateRow) -> str:
    """The verdict as the gate takes it: a regression on its own that the gate's one
    false-alarm budget does not keep is shown as such, never as a failure. A change a config
    field asks for is "as configured", and one within the client's timing error could not be
    measured."""
    assert row.verdict is not None
    if row.as_configured is not None:
        return f"⚙️ as configured ({escape_markdown(row.as_configured)})"
    if row.within_timing_error:
        return "⚠️ within the client's timing error: could not measure"
    if row.verdict.regressed and not row.regressed:
        adjusted = "" if row.adjusted_p_value is None else f", p={row.adjusted_p_value:.2g}"
        return f"❔ worse, not significant for the whole gate (Holm{adjusted})"
    if row.verdict.rel_change is None and row.verdict.runs_needed is None:
        why = row.verdict.reason.removeprefix("inconclusive: ")
        return f"{render_verdict(row.verdict)}: {escape_markdown(why)}"
    return render_verdict(row.verdict)


def render_rounds(result: GateResult) -> str | None:
    """"sequential: decided after 3 of 8 rounds; run-to-run noise from the rounds alone", or
    the fixed design's rounds."""
    if result.rounds is None:
        return None
    if result.rounds.sequential:
        runs = result.rounds.noise_runs
        noise = ("the rounds alone" if runs is None
                 else f"{runs} earlier runs of the base")
        return f"sequential: {result.rounds.stop_reason}; run-to-run noise from {noise}"
    return f"{result.rounds.rounds} rounds (fixed design)"


def _table_row(row: GateRow) -> str:
    if row.verdict is None:
        cells = [escape_markdown(row.workload), row.label, "-", "-", "-",
                 f"⚠️ {escape_markdown(row.note or '')}"]
    else:
        v = row.verdict
        verdict = render_row_verdict(row) + (f" ({escape_markdown(row.note)})" if row.note
                                             else "")
        change = render_accuracy_change(v) if row.metric == ACCURACY else render_change(v)
        cells = [escape_markdown(row.workload), row.label, render_value(v.base_value, row.unit),
                 render_value(v.head_value, row.unit), change, verdict]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def render_gate_markdown(result: GateResult, bisect: BisectResult | None = None,
                         warnings: Mapping[int, Sequence[str]] | None = None) -> str:
    """The PR comment. ``warnings`` holds the runs' server-check warnings by run id
    (``tracker.store.runs.fetch_run_warnings``)."""
    order = "interleaved base/head" if result.interleaved else "stored runs"
    runs = (f"base runs {', '.join(map(str, result.base_run_ids))} · head runs "
            f"{', '.join(map(str, result.head_run_ids))} ({order})")
    rounds = render_rounds(result)
    lines = [
        f"## tracker gate: {HEADLINES[result.outcome]}",
        "",
        f"**base** {escape_markdown(result.base_label)} · **head** "
        f"{escape_markdown(result.head_label)}  ",
        f"suite {escape_markdown(result.suite)} · {runs}" + (" · simulated" if result.simulated
                                                             else "")
        + ("  " if rounds else ""),
        *([f"**rounds** {rounds}"] if rounds else []),  # our own words, no outside text
        "",
        "### Config diff",
        "",
        render_diff_markdown(result.config_changes),
        "",
        "### Results",
        "",
        "| workload | metric | base | head | change [interval] | verdict |",
        "|---|---|---|---|---|---|",
        *(_table_row(row) for row in result.rows),
        "",
    ]
    for extra in (render_speculative_line(result), render_memory_line(result)):
        if extra is not None:
            lines += [extra, ""]
    client = render_client_line(result)
    if client is not None:
        lines += [client, ""]
    checks = render_warnings_line(result, warnings)
    if checks is not None:
        lines += [checks, ""]
    if result.quality is not None:
        lines += render_quality_markdown(result.quality)
    if result.problems:
        lines += ["**Could not measure:**", "", *(f"- {escape_markdown(p)}" for p in result.problems),
                  ""]
    if bisect is not None:
        lines += [render_bisect_markdown(bisect)]
    lines += [_legend(result), ""]
    return "\n".join(lines)


def _legend(result: GateResult) -> str:
    family = (f"One false-alarm budget of {result.family_alpha:.0%} for the whole gate (Holm "
              "over its rows).")
    if result.quality is not None:
        family = ("Accuracy is judged once, paired item by item (exact McNemar; its minimum "
                  "effect in points, absolute). " + family)
    intervals = ("each interval at the level its row was decided at (its reason names it: Holm "
                 "spends the budget over every row's two directions), so an outcome never "
                 "contradicts its interval; a client-bound run counts with its timing "
                 "error inside the interval, and a change only that error stands in the way of "
                 "could not be measured (exit 3)")
    if result.rounds is not None and result.rounds.sequential:
        return ("<sub>change = head vs base with its confidence sequence (valid at every "
                "round): a group-sequential t-test over the rounds of each run's statistic (the "
                "run is the unit: run-to-run drift is the noise, pooled with the base's earlier "
                f"runs where the store holds 3 or more); {intervals}. A regression is "
                "significant and at least the metric's minimum effect; the gate stops once a row "
                "regressed and no row with a large change is undecided, or once every row rules "
                "one out or would likely not show one in the rounds left. " + family + "</sub>")
    return ("<sub>change = head vs base: a t-test over the runs of each run's statistic (the "
            "run is the unit), the noise pooled with the base's earlier runs in the store; one "
            "run a side without them: the request-level test, its spread widened for run-to-"
            f"run noise; {intervals}. A regression is significant and at least the metric's "
            "minimum effect; ❔ needs about the runs shown per side to decide. "
            + family + "</sub>")


def render_gate_junit(result: GateResult) -> str:
    suite = ET.Element("testsuite", name="tracker gate", tests=str(len(result.rows)))
    failures = skipped = 0
    for row in result.rows:
        case = ET.SubElement(suite, "testcase", classname=f"tracker.gate.gating.{row.workload}",
                             name=row.metric)
        if row.verdict is None:
            ET.SubElement(case, "skipped", message=row.note or "not measured")
            skipped += 1
            continue
        if row.regressed:
            failure = ET.SubElement(case, "failure", message=row.verdict.reason, type="regression")
            failure.text = f"{row.label}: {render_change(row.verdict)}"
            failures += 1
        elif row.verdict.outcome is Outcome.INCONCLUSIVE:
            ET.SubElement(case, "skipped", message=row.verdict.reason)
            skipped += 1
        ET.SubElement(case, "system-out").text = row.verdict.reason
    if result.problems:
        errors = ET.SubElement(suite, "system-err")
        errors.text = "\n".join(result.problems)
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "1" if result.outcome is GateOutcome.NOT_MEASURED else "0")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    return {
        "outcome": verdict.outcome.value,
        "regressed": verdict.regressed,
        "improved": verdict.improved,
        "statistic": verdict.statistic,
        "lower_is_better": verdict.lower_is_better,
        "base": verdict.base_value,
        "head": verdict.head_value,
        "rel_change": verdict.rel_change,
        "ci": list(verdict.ci) if verdict.ci is not None else None,
        "confidence": verdict.confidence,
        "p_value": verdict.p_value,
        "min_effect": verdict.min_effect,
        "base_count": verdict.base_count,
        "head_count": verdict.head_count,
        "base_runs": verdict.base_runs,
        "head_runs": verdict.head_runs,
        "runs_needed": verdict.runs_needed,
        "method": verdict.method,
        "reason": verdict.reason,
    }


def render_gate_json(result: GateResult, bisect: BisectResult | None = None,
                     warnings: Mapping[int, Sequence[str]] | None = None) -> dict[str, Any]:
    """The JSON verdict, with values in the metric's SI unit (seconds, req/s, tokens/s).

    With a bisection, its culprits are under ``bisect``. ``warnings`` holds each run's
    server-check warnings by run id (``run_warnings``)."""
    verdict = {
        "schema": JSON_SCHEMA,
        "outcome": result.outcome.value,
        "exit_code": result.exit_code,
        "base": {"label": result.base_label, "run_ids": list(result.base_run_ids)},
        "head": {"label": result.head_label, "run_ids": list(result.head_run_ids)},
        "suite": result.suite,
        "simulated": result.simulated,
        "interleaved": result.interleaved,
        "rounds": None if result.rounds is None else {
            "rounds": result.rounds.rounds, "max_rounds": result.rounds.max_rounds,
            "sequential": result.rounds.sequential, "stop_reason": result.rounds.stop_reason,
            "noise_runs": result.rounds.noise_runs},
        "family_alpha": result.family_alpha,
        "config_diff": [{"path": c.path, "old": c.old, "new": c.new}
                        for c in result.config_changes],
        "problems": list(result.problems),
        "run_warnings": {str(run_id): list(found) for run_id, found in (warnings or {}).items()},
        "quality": render_quality_json(result.quality),
        "speculative_decoding": render_speculative_json(result),
        "rows": [{"workload": row.workload, "metric": row.metric, "unit": row.unit,
                  "note": row.note, "client_note": row.client_note, "regressed": row.regressed,
                  "adjusted_p_value": row.adjusted_p_value,
                  "as_configured": row.as_configured,
                  "within_timing_error": row.within_timing_error,
                  "verdict": None if row.verdict is None else _verdict_json(row.verdict)}
                 for row in result.rows],
    }
    if bisect is not None:
        verdict["bisect"] = render_bisect_json(bisect)
    return verdict


_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!~:$>])")  # not "\|": it keeps a table cell whole
_TAGS = re.compile(r"</?(?:sub|details|summary)>")


def render_terminal_text(markdown: str) -> str:
    """The Markdown report as a person reads it in a terminal: the escapes that keep outside text
    literal in a PR comment (``sim\\-default\\.yaml``, ``&gt;=``) and the HTML tags taken out.
    Only for a terminal: a piped or redirected stdout gets the Markdown itself."""
    return html.unescape(_TAGS.sub("", _ESCAPED.sub(r"\1", markdown)))
