"""One false-alarm budget per gate: a row worse on its own but not for the family is shown as
such and fails nothing; a row the family keeps is the gate's regression."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np

from tracker.analysis import compare_samples
from tracker.gate.gating import GateOutcome, GateResult, GateRow, decide_gate
from tracker.gate.rows import judge_gate_rows
from tracker.metrics import get_metric
from tracker.reports.gate_report import render_gate_junit, render_gate_markdown

TTFT = get_metric("ttft_median_s")


def _row(workload: str, shift: float, seed: int) -> GateRow:
    rng = np.random.default_rng(seed)
    base = (0.1 * np.exp(0.2 * rng.standard_normal(400))).tolist()
    head = (0.1 * (1.0 + shift) * np.exp(0.2 * rng.standard_normal(400))).tolist()
    return GateRow(workload, TTFT.name, "TTFT median", "s", compare_samples(base, head, TTFT))


def _result(rows: list[GateRow]) -> GateResult:
    outcome, code = decide_gate(rows, [])
    return GateResult(outcome, code, "base", "head", "s@1", (1,), (2,), True, (), tuple(rows),
                      (), False)


def test_a_clear_regression_stays_one_for_the_whole_gate() -> None:
    rows = judge_gate_rows([_row("a", 0.5, 1), _row("b", 0.0, 2), _row("c", 0.0, 3)], 0.05)
    assert [row.regressed for row in rows] == [True, False, False]
    assert rows[0].adjusted_p_value is not None and rows[0].adjusted_p_value < 0.001
    result = _result(rows)
    assert (result.outcome, result.exit_code) == (GateOutcome.REGRESSION, 1)


def test_a_row_worse_alone_but_not_for_the_family_passes_and_says_so() -> None:
    alone = _row("a", 0.5, 1)
    assert alone.verdict is not None and alone.verdict.regressed
    row = replace(alone, regressed=False, adjusted_p_value=0.12)  # as Holm over many rows left it
    result = _result([row])
    assert (result.outcome, result.exit_code) == (GateOutcome.PASS, 0)
    line = next(line for line in render_gate_markdown(result).splitlines()
                if line.startswith("| a |"))
    assert "❔ worse, not significant for the whole gate (Holm, p=0.12)" in line
    suite = ET.fromstring(render_gate_junit(result).split("\n", 1)[1]).find("testsuite")
    assert suite is not None and suite.get("failures") == "0"
