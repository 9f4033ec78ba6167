"""The prefix-cache hit rate is a tracked metric: measured from the simulator's real /metrics over
a workload with a shared system prompt, in the registry, and judged per run like throughput."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sqlalchemy import Engine

from tests.telemetry.fake_nvml import FakeNvml
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.metrics import (
    REGISTRY,
    SERVER_METRICS,
    Direction,
    compute_samples,
    compute_workload_metrics,
)
from tracker.pipeline.execute import execute_suite
from tracker.reports.run_report import render_run_text
from tracker.results import RunResult, ServerTelemetry
from tracker.telemetry import TelemetrySettings

CONFIG = """\
name: hit-rate-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {{seed: 2, prefill_s_per_token: 0.00001, decode_base_s: 0.001, decode_per_seq_s: 0.0}}
engine:
  max_num_seqs: 8
  block_size: 16
  enable_prefix_caching: {caching}
"""

SUITE = """\
name: shared-system-prompt
seed: 9
telemetry: {server_scrape_interval_s: 0.05}
workloads:
  - name: shared
    prompts: {source: synthetic, system_prompt_tokens: 256, input_tokens: 16}
    max_tokens: 4
    ignore_eos: true
    concurrency: 2
    num_requests: 10
  - name: distinct
    prompts: {source: synthetic, input_tokens: 64}
    max_tokens: 4
    ignore_eos: true
    concurrency: 2
    num_requests: 6
"""
HIT_RATE = REGISTRY["prefix_cache_hit_rate"]


def _run(tmp_path: Path, store: Engine, *, caching: bool) -> RunResult:
    config, suite = tmp_path / f"sim-{caching}.yaml", tmp_path / "suite.yaml"
    config.write_text(CONFIG.format(caching=str(caching).lower()), encoding="utf-8")
    suite.write_text(SUITE, encoding="utf-8")
    run = execute_suite(store, load_config(config), load_suite(suite),
                        telemetry=TelemetrySettings(nvml=FakeNvml(fail_init=True)))
    assert run.status.value == "completed"
    return run


def test_a_shared_system_prompt_with_prefix_caching_on_reports_a_hit_rate(
        tmp_path: Path, store: Engine) -> None:
    run = _run(tmp_path, store, caching=True)
    shared, distinct = run.workloads
    rate = compute_workload_metrics(shared)["prefix_cache_hit_rate"]
    # 16 of the 17 blocks of each request are the shared system prompt; the first ones miss
    assert 0.5 < rate < 1.0
    assert compute_samples(HIT_RATE, shared) == [rate]  # judged per run, like throughput
    assert compute_workload_metrics(distinct).get("prefix_cache_hit_rate", 0.0) < rate
    assert f"shared {rate * 100:.1f}%" in render_run_text(run)  # each workload's, in the text
    unmeasured = replace(shared, server=ServerTelemetry(False, "no server metrics: HTTP 404"))
    by_requests = compute_workload_metrics(unmeasured)["prefix_cache_hit_rate"]
    assert 0.5 < by_requests < 1.0  # no counters: the requests' cached tokens say it
    unmeasured = replace(unmeasured, records=())
    assert "prefix_cache_hit_rate" not in compute_workload_metrics(unmeasured)
    assert compute_samples(HIT_RATE, unmeasured) == []  # not measured: nothing to judge, not 0
    assert compute_samples(HIT_RATE, replace(shared, server=None, records=())) == []


def test_with_prefix_caching_off_the_hit_rate_is_zero_or_not_measured(
        tmp_path: Path, store: Engine) -> None:
    run = _run(tmp_path, store, caching=False)
    for workload in run.workloads:
        assert workload.server is not None and workload.server.measured
        assert compute_workload_metrics(workload).get("prefix_cache_hit_rate", 0.0) == 0.0


def test_the_hit_rate_is_a_registry_metric_read_from_the_server() -> None:
    assert HIT_RATE.direction is Direction.HIGHER_IS_BETTER and HIT_RATE.unit == "fraction"
    assert HIT_RATE.latency is None and "prefix_cache_hit_rate" in SERVER_METRICS
