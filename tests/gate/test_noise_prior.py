"""The gate's noise prior from earlier base runs: per workload and metric, client-bound runs
counted (a busy night is part of the history's noise), none under three runs."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from tracker.analysis.sequential import SequentialRow
from tracker.gate.rounds import compute_noise_prior
from tracker.load.summary import compute_workload_summary
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
MEDIAN = SequentialRow("w/ttft_median_s", "median", True, 0.02)
THROUGHPUT = SequentialRow("w/request_throughput_per_s", "mean", False, 0.02)


def _run(run_id: int, ttft_s: float, *, client_bound: bool = False) -> RunResult:
    records = tuple(RequestRecord(i, i * 0.01, ttft_s, 0.5, (0.01,) * 9, 10, TokenSource.USAGE,
                                  32, TokenSource.USAGE) for i in range(40))
    summary = compute_workload_summary(records, 5.0)
    if client_bound:
        summary = replace(summary, client=ClientHealth(0.99, 0.05, 0.08, 0.02, 0.03, 0.04,
                                                       client_bound=True, reason="send lag"))
    workload = WorkloadResult("w", 4, 40, 0, {}, T0, T0, records, summary)
    return RunResult(run_id, RunStatus.COMPLETED, True, VersionRef("c", "a" * 64),
                     VersionRef("s", "b" * 64), T0, T0, "h", "0", {}, (workload,))


def test_the_prior_is_the_variance_of_the_earlier_runs_log_median() -> None:
    earlier = [_run(1, 0.1), _run(2, 0.1 * math.e), _run(3, 0.1 * math.e ** 2)]
    prior = compute_noise_prior(earlier, [MEDIAN, THROUGHPUT])
    assert prior[MEDIAN.key].df == 2 and prior[MEDIAN.key].variance == pytest.approx(1.0)
    assert prior[THROUGHPUT.key].variance == pytest.approx(0.0)  # the same duration each run


def test_client_bound_runs_count_and_fewer_than_three_give_no_prior() -> None:
    earlier = [_run(1, 0.1), _run(2, 0.2)]
    assert compute_noise_prior(earlier, [MEDIAN]) == {}
    quiet = compute_noise_prior([*earlier, _run(4, 0.3)], [MEDIAN])[MEDIAN.key]
    busy = compute_noise_prior([*earlier, _run(3, 0.5, client_bound=True)], [MEDIAN])[MEDIAN.key]
    assert quiet.df == busy.df == 2
    assert busy.variance > quiet.variance  # the busy night widens what a run may vary


def test_a_row_not_in_the_family_gets_no_prior() -> None:
    earlier = [_run(n, 0.1 * n) for n in range(1, 5)]
    assert set(compute_noise_prior(earlier, [THROUGHPUT])) == {THROUGHPUT.key}
