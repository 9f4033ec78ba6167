"""Summary fields the load generator adds: scheduled latency, token-count mismatches, metrics."""

from __future__ import annotations

import pytest

from tracker.load.slo import Slo
from tracker.load.summary import compute_workload_summary
from tracker.metrics import REGISTRY, compute_summary_metrics
from tracker.results import RequestRecord, TokenSource


def rec(i: int, *, scheduled: float | None = None, chunks: int = 10, out: int = 10,
        source: TokenSource = TokenSource.USAGE) -> RequestRecord:
    return RequestRecord(i, 1.0, 0.1, 0.5, (0.04,) * 9, out, source, 5, TokenSource.USAGE,
                         scheduled_start_s=scheduled, output_chunks=chunks)


def test_scheduled_latency_is_only_measured_in_open_loop() -> None:
    closed = compute_workload_summary([rec(0), rec(1)], 1.0)
    assert closed.scheduled_ttft is None and closed.scheduled_e2el is None
    opened = compute_workload_summary([rec(0, scheduled=0.8), rec(1, scheduled=0.6)], 1.0)
    assert opened.scheduled_ttft is not None and opened.scheduled_e2el is not None
    assert opened.scheduled_ttft.mean_s == pytest.approx(0.1 + 0.3)
    assert opened.scheduled_e2el.mean_s == pytest.approx(0.5 + 0.3)


def test_fewer_chunks_than_usage_tokens_is_not_a_mismatch_but_more_chunks_is() -> None:
    # vLLM puts several tokens in one chunk when the client falls behind: 13 chunks, 16 tokens
    records = [rec(0), rec(1, chunks=13, out=16), rec(2, chunks=12, out=10),
               rec(3, chunks=7, source=TokenSource.CHUNKS, out=7)]
    assert compute_workload_summary(records, 1.0).token_count_mismatches == 1
    no_usage = [rec(0, source=TokenSource.CHUNKS)]
    assert compute_workload_summary(no_usage, 1.0).token_count_mismatches is None


def test_new_metrics_are_registered_and_flattened() -> None:
    summary = compute_workload_summary([rec(0, scheduled=0.9), rec(1, scheduled=0.97)], 2.0,
                                       slo=Slo(ttft_s=0.15))
    metrics = compute_summary_metrics(summary)
    assert set(metrics) <= set(REGISTRY)
    assert metrics["scheduled_ttft_p99_s"] > metrics["ttft_p99_s"]
    assert metrics["slo_attainment"] == 0.5 and metrics["goodput_req_per_s"] == 0.5
    assert "capacity_at_slo_req_per_s" not in metrics  # not a sweep: not measured
