"""The gate's quality section: accuracy base → head with the paired interval, the exact McNemar
p-value, the drift, the smallest drop the set can detect, and a few flipped items with both
answers. The answers are outside text: redacted and escaped (``tracker.redaction``), never
rendered as Markdown."""

from __future__ import annotations

from typing import Any

from tracker.analysis import Verdict
from tracker.gate.quality_check import QualityComparison
from tracker.redaction import escape_markdown, redact_one_line

ANSWER_LIMIT = 80


def render_accuracy_change(verdict: Verdict) -> str:
    """``-6.1 pts [-7.6, -4.8]``: the paired difference in points (the verdict keeps it relative
    to the base accuracy, like every other row)."""
    if verdict.base_value is None or verdict.head_value is None or verdict.ci is None:
        return "-"
    base = verdict.base_value
    low, high = (end * base * 100 for end in verdict.ci)
    return f"{(verdict.head_value - base) * 100:+.1f} pts [{low:+.1f}, {high:+.1f}]"


def _answer(text: str | None) -> str:
    if text is None:
        return "(no answer)"
    return escape_markdown(redact_one_line(text, ANSWER_LIMIT))  # pipes escaped too


def _runs(quality: QualityComparison) -> str:
    def one(side: str, run: int | None, asked: int | None) -> str:
        reused = "" if asked is None else f" (reused from run {asked})"
        return f"{side} answers: run {run}{reused}"

    return (one("base", quality.base_run_id, quality.base_asked_by) + " · "
            + one("head", quality.head_run_id, quality.head_asked_by))


def render_quality_markdown(quality: QualityComparison) -> list[str]:
    lines = ["### Quality", ""]
    name = escape_markdown(quality.set_name)
    paired = quality.paired
    if paired is None:
        return [*lines, f"set {name}: not compared: {escape_markdown(quality.note or '')}", ""]
    table, verdict = paired.table, paired.verdict
    low, high = (end * 100 for end in paired.ci)
    lines += [
        f"set {name} · {table.pairs} items answered on both sides · {_runs(quality)}  ",
        f"**accuracy** {paired.base_accuracy:.1%} → {paired.head_accuracy:.1%}: "
        f"{paired.difference * 100:+.1f} points [{low:+.1f}, {high:+.1f}] "
        f"({verdict.confidence:.0%} one-sided bounds each, Newcombe paired score interval)  ",
        f"exact McNemar: {table.base_only} items right on base and wrong on head, "
        f"{table.head_only} the reverse, p = {paired.p_two_sided:.3g} (two-sided; "
        f"p(worse) = {verdict.p_value:.3g})  ",
        f"drift: {paired.changed} of {table.pairs} answers changed text  ",
        f"this set detects a drop of **{paired.detectable_drop * 100:.1f} points** at 80% power "
        f"(one-sided {1 - verdict.confidence:.0%}, {table.pairs} items, the discordance seen)",
    ]
    if quality.note:
        lines += ["", f"_{escape_markdown(quality.note)}_"]
    lines.append("")
    if quality.examples:
        lines += [f"Flipped items ({len(paired.flipped_worse)} worse, "
                  f"{len(paired.flipped_better)} better); the first {len(quality.examples)}:", "",
                  "| item | flip | base answer | head answer |", "|---|---|---|---|"]
        for item in quality.examples:
            flip = "✅ → ❌" if item.base_right else "❌ → ✅"
            lines.append(f"| {_answer(item.item_id)} | {flip} | {_answer(item.base_answer)} | "
                         f"{_answer(item.head_answer)} |")
        lines.append("")
    return lines


def render_quality_json(quality: QualityComparison | None) -> dict[str, Any] | None:
    if quality is None:
        return None
    block: dict[str, Any] = {"set": quality.set_name, "base_run_id": quality.base_run_id,
                             "head_run_id": quality.head_run_id,
                             "base_reused_from_run_id": quality.base_asked_by,
                             "head_reused_from_run_id": quality.head_asked_by,
                             "note": quality.note, "compared": quality.paired is not None}
    paired = quality.paired
    if paired is None:
        return block
    table = paired.table
    block.update({
        "items": table.pairs, "base_accuracy": paired.base_accuracy,
        "head_accuracy": paired.head_accuracy, "difference": paired.difference,
        "ci": list(paired.ci), "p_value_two_sided": paired.p_two_sided,
        "p_value_worse": paired.verdict.p_value, "both_right": table.both_right,
        "right_on_base_only": table.base_only, "right_on_head_only": table.head_only,
        "both_wrong": table.both_wrong, "changed_answers": paired.changed,
        "detectable_drop": paired.detectable_drop, "outcome": paired.verdict.outcome.value,
        "flipped_worse": list(paired.flipped_worse), "flipped_better": list(paired.flipped_better),
        "examples": [{"item_id": e.item_id, "base_right": e.base_right,
                      "base_answer": None if e.base_answer is None
                      else redact_one_line(e.base_answer, ANSWER_LIMIT),
                      "head_answer": None if e.head_answer is None
                      else redact_one_line(e.head_answer, ANSWER_LIMIT)}
                     for e in quality.examples],
    })
    return block
