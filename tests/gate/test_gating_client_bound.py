"""A client-bound run is evidence with an error bar, not a hole: it counts, with its client's lag
as a bound on what it measured. A change far outside the bound is decided; one that only the
bound stands in the way of could not be measured (exit 3), never a pass; the note says whether
the client was overloaded (more workers) or starved (pin the server and the client apart)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime

from tracker.analysis import Outcome
from tracker.dashboard.verdicts import compute_verdicts
from tracker.gate.gating import GateOptions, build_gate_result, compute_gate_rows
from tracker.load.summary import compute_workload_summary
from tracker.reports.gate_report import render_gate_markdown
from tracker.results import (
    ClientHealth,
    RequestRecord,
    RunResult,
    RunStatus,
    ServerTelemetry,
    TokenSource,
    VersionRef,
    WorkloadResult,
)

T0 = datetime(2026, 11, 1, tzinfo=UTC)
OVERLOADED = ClientHealth(0.99, 0.05, 0.08, 0.02, 0.03, 0.04, client_bound=True,
                          reason="the client's event-loop thread was busy 99% of the time")
STARVED = ClientHealth(0.03, 0.10, 0.30, 0.01, 0.02, 0.03, client_bound=True,
                       reason="the client's event loop lagged 100.0 ms (p99)")


def _run(run_id: int, ttft_s: float, client: ClientHealth | None = None) -> RunResult:
    rng = random.Random(run_id)
    records = tuple(RequestRecord(i, i * 0.01, ttft_s * rng.uniform(0.9, 1.1), 0.5, (0.01,) * 9,
                                  10, TokenSource.USAGE, 32, TokenSource.USAGE) for i in range(200))
    summary = compute_workload_summary(records, 5.0)
    if client is not None:
        summary = replace(summary, client=client)
    workload = WorkloadResult("w", 4, 200, 0, {}, T0, T0, records, summary)
    return RunResult(run_id, RunStatus.COMPLETED, True, VersionRef("c", "a" * 64),
                     VersionRef("s", "b" * 64), T0, T0, "h", "0", {}, (workload,))


def _gate(base: list[RunResult], head: list[RunResult]) -> tuple[int, str]:
    result = build_gate_result(base, head, ("base", "head"), (), GateOptions(),
                               interleaved=False)
    return result.exit_code, render_gate_markdown(result)


def test_a_change_the_client_lag_could_explain_is_could_not_measure_never_a_pass() -> None:
    # twice the TTFT, but a starved client's 100 ms of lag on each side could explain it all
    code, markdown = _gate([_run(1, 0.100, STARVED)], [_run(2, 0.200, STARVED)])
    assert code == 3
    assert "within the client's timing error" in markdown
    assert "starved" in markdown and "pin the server and the client" in markdown


def test_a_change_far_outside_the_client_lag_is_decided() -> None:
    # 4.8x the TTFT against at most 0.1 s of client error: a regression whatever the error
    code, _ = _gate([_run(1, 0.127, STARVED)], [_run(2, 0.604, STARVED)])
    assert code == 1


def test_the_same_slowdown_without_client_bound_is_a_regression() -> None:
    code, _ = _gate([_run(1, 0.100)], [_run(2, 0.200)])
    assert code == 1


def test_identical_runs_pass_however_busy_the_client_was() -> None:
    code, _ = _gate([_run(1, 0.100, OVERLOADED)], [_run(1, 0.100, OVERLOADED)])
    assert code == 0


def test_an_overloaded_client_is_told_to_add_workers_a_starved_one_to_pin() -> None:
    rows = compute_gate_rows([_run(1, 0.1, OVERLOADED)], [_run(2, 0.1)], GateOptions())
    assert all(row.client_note == "1 of 1 base runs client-bound (overloaded: more load-generator "
               "workers (--workers) or less load)" for row in rows)
    rows = compute_gate_rows([_run(1, 0.1)], [_run(2, 0.1, STARVED)], GateOptions())
    assert all((row.client_note or "").startswith("1 of 1 head runs client-bound (starved: the host's "
                                           "other processes") for row in rows)


def test_the_dashboard_compares_a_client_bound_workload_with_its_bound() -> None:
    base = _run(1, 0.100)
    verdicts = compute_verdicts([base], [_run(3, 0.200, STARVED)])
    assert not verdicts.empty
    ttft = verdicts[verdicts["metric"] == "ttft_median_s"].iloc[0]
    assert ttft["outcome"] == "inconclusive" and "timing error" in ttft["reason"]


def test_the_gate_and_the_dashboard_judge_the_same_metrics_the_same_way() -> None:
    base, head = _run(1, 0.100), _run(2, 0.200)
    result = build_gate_result([base], [head], ("base", "head"), (), GateOptions(),
                               interleaved=False)
    verdicts = compute_verdicts([base], [head])
    assert [row.metric for row in result.rows] == list(verdicts["metric"]) == [
        "ttft_median_s", "ttft_p99_s", "tpot_median_s", "tpot_p99_s", "e2el_median_s",
        "e2el_p99_s", "request_throughput_per_s", "output_throughput_tokens_per_s"]
    by_metric = dict(zip(verdicts["metric"], verdicts["outcome"], strict=True))
    assert by_metric["ttft_median_s"] == "regression"  # twice the TTFT, on both faces
    assert all(row.verdict is not None and row.verdict.outcome.value == by_metric[row.metric]
               for row in result.rows)


def test_a_client_bound_run_among_several_counts_with_its_bound() -> None:
    """One run of three on a busy client still counts: the regression holds with its bound."""
    base = [_run(i, 0.100) for i in (1, 2, 3)]
    head = [_run(4, 0.200, OVERLOADED), _run(5, 0.200), _run(6, 0.200)]
    result = build_gate_result(base, head, ("base", "head"), (), GateOptions(),
                               interleaved=False)
    ttft = next(row for row in result.rows if row.metric == "ttft_median_s")
    assert ttft.verdict is not None and ttft.verdict.head_runs == 3
    assert ttft.client_note is not None and ttft.client_note.startswith("1 of 3 head runs client-bound")
    assert result.exit_code == 1
    assert "1 of 3 head runs client\\-bound" in render_gate_markdown(result)  # escaped Markdown


def test_a_hit_rate_of_zero_on_every_run_of_both_sides_is_no_change() -> None:
    """Fresh servers fed distinct prompts hit their prefix cache 0 % of the time on every run: a
    ratio cannot judge 0 against 0, but nothing changed, and the row says so."""

    def cold(run: RunResult) -> RunResult:
        server = ServerTelemetry(measured=True, scrapes=3, values={"prefix_cache_hit_rate": 0.0})
        return replace(run, workloads=(replace(run.workloads[0], server=server),))

    rows = compute_gate_rows([cold(_run(1, 0.1)), cold(_run(3, 0.1))],
                             [cold(_run(2, 0.1)), cold(_run(4, 0.1))], GateOptions())
    (row,) = [row for row in rows if row.metric == "prefix_cache_hit_rate"]
    assert row.verdict is not None and row.verdict.outcome is Outcome.NO_CHANGE, row
    code, markdown = _gate([cold(_run(1, 0.1))], [cold(_run(2, 0.1))])
    assert "must be finite and &gt; 0" not in markdown and code == 0
