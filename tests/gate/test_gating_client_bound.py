"""A client-bound workload measured the load generator, not the server: never compared or trended."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime

from tracker.dashboard.verdicts import compute_verdicts
from tracker.gate.gating import GateOptions, build_gate_result, compute_gate_rows
from tracker.load.summary import compute_workload_summary
from tracker.reports.gate_report import render_gate_markdown
from tracker.results import (
    ClientHealth,
    RequestRecord,
    RunResult,
    RunStatus,
    TokenSource,
    VersionRef,
    WorkloadResult,
)

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _run(run_id: int, ttft_s: float, *, client_bound: bool) -> RunResult:
    rng = random.Random(run_id)
    records = tuple(RequestRecord(i, i * 0.01, ttft_s * rng.uniform(0.9, 1.1), 0.5, (0.01,) * 9,
                                  10, TokenSource.USAGE, 32, TokenSource.USAGE) for i in range(200))
    summary = compute_workload_summary(records, 5.0)
    if client_bound:
        summary = replace(summary, client=ClientHealth(0.99, 0.05, 0.08, 0.02, 0.03, 0.04,
                                                       client_bound=True,
                                                       reason="send lag p99 30 ms"))
    workload = WorkloadResult("w", 4, 200, 0, {}, T0, T0, records, summary)
    return RunResult(run_id, RunStatus.COMPLETED, True, VersionRef("c", "a" * 64),
                     VersionRef("s", "b" * 64), T0, T0, "h", "0", {}, (workload,))


def test_a_client_bound_head_is_not_compared_and_the_gate_cannot_measure() -> None:
    base, head = _run(1, 0.100, client_bound=False), _run(2, 0.200, client_bound=True)
    rows = compute_gate_rows([base], [head], GateOptions())
    assert rows and all(row.verdict is None for row in rows)
    assert all("client-bound in the head run(s) (send lag p99 30 ms)" in (row.note or "")
               for row in rows)
    result = build_gate_result([base], [head], ("base", "head"), (), GateOptions(),
                               interleaved=False)
    assert result.exit_code == 3  # could not measure, never "regression" from the client's numbers


def test_the_same_slowdown_without_client_bound_is_a_regression() -> None:
    base, head = _run(1, 0.100, client_bound=False), _run(2, 0.200, client_bound=False)
    result = build_gate_result([base], [head], ("base", "head"), (), GateOptions(),
                               interleaved=False)
    assert result.exit_code == 1


def test_the_dashboard_does_not_compare_a_client_bound_workload() -> None:
    base = _run(1, 0.100, client_bound=False)
    assert len(compute_verdicts(base, _run(2, 0.200, client_bound=False))) > 0
    assert compute_verdicts(base, _run(3, 0.200, client_bound=True)).empty


def test_the_gate_and_the_dashboard_judge_the_same_metrics_the_same_way() -> None:
    base, head = _run(1, 0.100, client_bound=False), _run(2, 0.200, client_bound=False)
    rows = compute_gate_rows([base], [head], GateOptions())
    verdicts = compute_verdicts(base, head)
    assert [row.metric for row in rows] == list(verdicts["metric"]) == [
        "ttft_median_s", "ttft_p99_s", "tpot_median_s", "tpot_p99_s", "e2el_median_s",
        "e2el_p99_s", "request_throughput_per_s", "output_throughput_tokens_per_s"]
    by_metric = dict(zip(verdicts["metric"], verdicts["outcome"], strict=True))
    assert by_metric["ttft_median_s"] == "regression"  # twice the TTFT, on both faces
    assert all(row.verdict is not None and row.verdict.outcome.value == by_metric[row.metric]
               for row in rows if row.metric.endswith("_median_s"))


def test_a_client_bound_run_among_several_is_left_out_and_the_rest_compared() -> None:
    """One run of three on a busy client does not cost the verdict: the other two are compared."""
    base = [_run(i, 0.100, client_bound=False) for i in (1, 2, 3)]
    head = [_run(4, 0.200, client_bound=True), _run(5, 0.200, client_bound=False),
            _run(6, 0.200, client_bound=False)]
    rows = compute_gate_rows(base, head, GateOptions())
    assert rows and all(row.verdict is not None for row in rows)
    assert all(row.note == "1 of 3 head runs left out (client-bound)" for row in rows)
    assert all(row.verdict.head_runs == 2 for row in rows if row.verdict is not None)
    result = build_gate_result(base, head, ("base", "head"), (), GateOptions(),
                               interleaved=False)
    assert result.exit_code == 1  # the two measured head runs show the regression
    markdown = render_gate_markdown(result)
    assert "1 of 3 head runs left out \\(client\\-bound\\)" in markdown  # escaped Markdown
