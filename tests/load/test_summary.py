"""Summaries against hand-computed values (numpy's linear percentiles, population std)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tracker.load.summary import (
    compute_input_token_overhead,
    compute_workload_summary,
)
from tracker.metrics import REGISTRY, Direction, compute_summary_metrics
from tracker.results import RequestRecord, TokenSource, compute_latency_stats


def ok(index: int, ttft: float, e2el: float, out: int, itl: tuple[float, ...] = (),
       source: TokenSource = TokenSource.USAGE) -> RequestRecord:
    return RequestRecord(index, float(index), ttft, e2el, itl, out, source, 100, TokenSource.USAGE)


def failed(index: int) -> RequestRecord:
    return RequestRecord(index, 0.0, None, None, (), None, None, None, None, "http_500", "boom")


def test_latency_percentiles_interpolate_linearly() -> None:
    stats = compute_latency_stats([4.0, 2.0, 1.0, 3.0])
    assert stats is not None
    assert (stats.median_s, stats.p90_s, stats.p99_s) == pytest.approx((2.5, 3.7, 3.97))
    one = compute_latency_stats([5.0])
    assert one is not None and one.p99_s == 5.0


def test_latency_stats_use_population_std() -> None:
    stats = compute_latency_stats([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0])
    assert stats is not None
    assert stats.mean_s == 5.0 and stats.std_s == 2.0 and stats.median_s == 4.5
    assert compute_latency_stats([]) is None


def test_summary_counts_only_successful_requests() -> None:
    records = [ok(0, 0.1, 1.1, 11, (0.1,) * 10), ok(1, 0.3, 2.3, 21, (0.1,) * 20), failed(2)]
    summary = compute_workload_summary(records, duration_s=4.0)
    assert (summary.completed, summary.failed) == (2, 1)
    assert summary.total_output_tokens == 32 and summary.total_input_tokens == 200
    assert summary.request_throughput_per_s == 0.5
    assert summary.output_throughput_tokens_per_s == 8.0
    assert summary.total_token_throughput_tokens_per_s == 58.0
    assert summary.ttft is not None and summary.ttft.mean_s == pytest.approx(0.2)
    assert summary.tpot is not None and summary.tpot.mean_s == pytest.approx(0.1)
    assert summary.itl is not None and summary.itl.count == 30
    assert summary.errors == {"http_500": 1}
    assert summary.output_tokens_source is TokenSource.USAGE


def test_mixed_token_sources_are_reported_as_mixed() -> None:
    records = [ok(0, 0.1, 1.0, 5), ok(1, 0.1, 1.0, 5, source=TokenSource.CHUNKS)]
    assert compute_workload_summary(records, 1.0).output_tokens_source is TokenSource.MIXED


def test_a_single_token_answer_has_no_tpot() -> None:
    summary = compute_workload_summary([ok(0, 0.1, 0.1, 1)], 1.0)
    assert summary.tpot is None and summary.ttft is not None


def test_all_failed_means_nothing_measured_not_zero() -> None:
    summary = compute_workload_summary([failed(0), failed(1)], 1.0)
    assert summary.ttft is None and summary.e2el is None
    assert summary.completed == 0 and summary.request_throughput_per_s == 0.0
    metrics = compute_summary_metrics(summary)
    assert "ttft_p99_s" not in metrics


def test_every_flattened_metric_is_registered_with_a_direction() -> None:
    records = [ok(i, 0.1 * i + 0.1, 1.0 + i, 10, (0.01,) * 9) for i in range(5)]
    metrics = compute_summary_metrics(compute_workload_summary(records, 2.0))
    assert set(metrics) <= set(REGISTRY)
    assert REGISTRY["ttft_p99_s"].direction is Direction.LOWER_IS_BETTER
    assert REGISTRY["output_throughput_tokens_per_s"].direction is Direction.HIGHER_IS_BETTER
    assert all(math.isfinite(v) for v in metrics.values())


def test_input_mismatches_count_server_usage_against_the_requested_length() -> None:
    asked = [replace(ok(0, 0.1, 0.2, 4), requested_input_tokens=100),
             replace(ok(1, 0.1, 0.2, 4), requested_input_tokens=99),
             replace(ok(2, 0.1, 0.2, 4), requested_input_tokens=99,
                     input_tokens_source=TokenSource.CLIENT),  # no usage: not compared
             replace(failed(3), requested_input_tokens=5)]
    assert compute_workload_summary(asked, 1.0).input_token_count_mismatches == 1
    assert compute_workload_summary([ok(0, 0.1, 0.2, 4)], 1.0) \
        .input_token_count_mismatches is None  # nothing asked


def test_a_chat_templates_tokens_are_the_overhead_not_a_mismatch() -> None:
    def asked(index: int, requested: int, counted: int) -> RequestRecord:
        return replace(ok(index, 0.1, 0.2, 4), requested_input_tokens=requested,
                       input_tokens=counted)

    # 640 content tokens asked; the template adds 61 (60 where a word merges with it); one
    # prompt counted far longer (words in another tokenizer) is the one mismatch
    records = [asked(0, 640, 701), asked(1, 640, 700), asked(2, 640, 701), asked(3, 640, 1500)]
    assert compute_input_token_overhead(records) == 61
    assert compute_workload_summary(records, 1.0).input_token_count_mismatches == 1
    exact = [asked(0, 256, 256), asked(1, 256, 256), asked(2, 256, 257)]
    assert compute_input_token_overhead(exact) == 0
    assert compute_workload_summary(exact, 1.0).input_token_count_mismatches == 1  # exact: exact
    assert compute_input_token_overhead([ok(0, 0.1, 0.2, 4)]) is None
