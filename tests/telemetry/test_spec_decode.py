"""Speculative decoding read from a server's /metrics: vLLM's spec_decode counters (summed over
engines, the per-position one kept by position), their deltas from the end of the warm-up, and
the acceptance rate, mean acceptance length and per-position rates by vLLM's own formulas."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tracker.load.summary import compute_workload_summary
from tracker.metrics import REGISTRY, SERVER_METRICS, Direction, compute_workload_metrics
from tracker.results import ServerTelemetry, WorkloadResult
from tracker.telemetry.server_metrics import (
    compute_server_values,
    merge_summaries,
    parse_prometheus_text,
)
from tracker.telemetry.spec_decode import compute_position_rates

# As vLLM 0.32 exposes them: prometheus_client adds _total; two engines (data parallel)
BEFORE = """\
# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 10.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 30.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 20.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 20.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 9.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 9.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 7.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 7.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 4.0
"""
# 100 more drafts of 3 tokens, 150 accepted: 80 at position 0, 50 at 1, 20 at 2
AFTER = (BEFORE.replace(" 10.0", " 60.0").replace(" 30.0", " 180.0").replace(" 20.0", " 95.0")
         .replace('position="0"} 9.0', 'position="0"} 49.0')
         .replace('position="1"} 7.0', 'position="1"} 32.0')
         .replace('position="2"} 4.0', 'position="2"} 14.0'))


def test_acceptance_comes_from_the_counters_deltas_by_vllms_formulas() -> None:
    values = compute_server_values(parse_prometheus_text(BEFORE), [],
                                   parse_prometheus_text(AFTER))
    assert (values["spec_decode_drafts"], values["spec_decode_draft_tokens"],
            values["spec_decode_accepted_tokens"]) == (100.0, 300.0, 150.0)
    assert values["spec_decode_acceptance_rate"] == pytest.approx(150 / 300)
    assert values["spec_decode_mean_acceptance_length"] == pytest.approx(1 + 150 / 100)
    assert compute_position_rates(values) == pytest.approx([0.8, 0.5, 0.2])


def test_a_server_that_does_not_speculate_has_no_acceptance_not_zero() -> None:
    plain = parse_prometheus_text("vllm:num_preemptions_total 0\n")
    values = compute_server_values(plain, [], plain)
    assert not any(key.startswith("spec_decode") for key in values)
    idle = parse_prometheus_text(BEFORE)  # speculating, but nothing drafted in the workload
    values = compute_server_values(idle, [], idle)
    assert values["spec_decode_drafts"] == 0.0 and "spec_decode_acceptance_rate" not in values


def test_counters_without_total_and_a_position_that_first_appears_count_from_zero() -> None:
    before = parse_prometheus_text("vllm_spec_decode_num_drafts 4\n"
                                   "vllm_spec_decode_num_draft_tokens 8\n"
                                   "vllm_spec_decode_num_accepted_tokens 2\n")
    after = parse_prometheus_text(
        "vllm_spec_decode_num_drafts 14\nvllm_spec_decode_num_draft_tokens 28\n"
        "vllm_spec_decode_num_accepted_tokens 7\n"
        'vllm_spec_decode_num_accepted_tokens_per_pos{position="0"} 5\n'
        'vllm_spec_decode_num_accepted_tokens_per_pos{position="x"} 9\n')
    values = compute_server_values(before, [], after)
    assert values["spec_decode_acceptance_rate"] == pytest.approx(5 / 20)
    assert compute_position_rates(values) == [0.5]  # position "x" is not a position


def test_a_run_pools_its_workloads_counters() -> None:
    first = compute_server_values(parse_prometheus_text(BEFORE), [],
                                  parse_prometheus_text(AFTER))
    second = {"spec_decode_drafts": 100.0, "spec_decode_draft_tokens": 300.0,
              "spec_decode_accepted_tokens": 30.0, "spec_decode_accepted_tokens_pos_0": 30.0}
    merged = merge_summaries([ServerTelemetry(True, scrapes=2, values=first),
                              ServerTelemetry(True, scrapes=2, values=second)])
    assert merged["spec_decode_acceptance_rate"] == pytest.approx(180 / 600)
    assert merged["spec_decode_mean_acceptance_length"] == pytest.approx(1 + 180 / 200)
    assert compute_position_rates(merged)[0] == pytest.approx(110 / 200)


def test_acceptance_is_a_registry_metric_where_higher_is_better() -> None:
    for name in ("spec_decode_acceptance_rate", "spec_decode_mean_acceptance_length"):
        assert name in SERVER_METRICS
        assert REGISTRY[name].direction is Direction.HIGHER_IS_BETTER
    values = compute_server_values(parse_prometheus_text(BEFORE), [],
                                   parse_prometheus_text(AFTER))
    now = datetime.now(UTC)
    workload = WorkloadResult("decode", 4, 0, 0, {}, now, now, (),
                              compute_workload_summary((), 1.0),
                              server=ServerTelemetry(True, scrapes=2, values=values))
    metrics = compute_workload_metrics(workload)
    assert metrics["spec_decode_acceptance_rate"] == pytest.approx(0.5)
    assert metrics["spec_decode_mean_acceptance_length"] == pytest.approx(2.5)
