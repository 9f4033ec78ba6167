"""A priced config gives every stored workload its cost per token: the simulator, real SQLite
and PostgreSQL through ``db_url``, the value checked against the stored duration and tokens."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from tests.telemetry.fake_nvml import FakeNvml
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.metrics import REGISTRY, Direction, compute_workload_metrics
from tracker.pipeline.execute import execute_suite
from tracker.reports.run_report import render_run_json, render_run_text
from tracker.store.models import WorkloadMetricModel, WorkloadResultModel
from tracker.telemetry import TelemetrySettings

CONFIG = """\
name: priced-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {seed: 1, prefill_s_per_token: 0.00001, decode_base_s: 0.002, decode_per_seq_s: 0.0}
engine: {max_num_seqs: 8}
"""
LOCAL = "cost: {usd_per_gpu_hour: 2.75, gpus: 2}\n"
GATEWAY = "cost: {usd_per_1m_input_tokens: 0.15, usd_per_1m_output_tokens: 0.6}\n"
SUITE = """\
name: priced-small
seed: 5
workloads:
  - name: only
    prompts: {source: synthetic, input_tokens: 24}
    max_tokens: 12
    ignore_eos: true
    concurrency: 4
    num_requests: 12
"""
NO_GPU = TelemetrySettings(nvml=FakeNvml(fail_init=True))


def _run(tmp_path: Path, store: Engine, cost: str) -> tuple[int, list[tuple[float, int, int]],
                                                             dict[str, float]]:
    config, suite = tmp_path / "sim.yaml", tmp_path / "suite.yaml"
    config.write_text(CONFIG + cost, encoding="utf-8")
    suite.write_text(SUITE, encoding="utf-8")
    run = execute_suite(store, load_config(config), load_suite(suite), telemetry=NO_GPU)
    with Session(store) as session:
        rows = session.execute(
            select(WorkloadResultModel.duration_s, WorkloadResultModel.total_input_tokens,
                   WorkloadResultModel.total_output_tokens)
            .where(WorkloadResultModel.run_id == run.run_id)).all()
        stored = {metric: value for metric, value in session.execute(
            select(WorkloadMetricModel.metric, WorkloadMetricModel.value)
            .join(WorkloadResultModel)
            .where(WorkloadResultModel.run_id == run.run_id))}
    return run.run_id, [(row[0], row[1], row[2]) for row in rows], stored


def test_a_gpu_hour_price_gives_the_stored_cost_per_million_tokens(
        tmp_path: Path, store: Engine) -> None:
    _, rows, stored = _run(tmp_path, store, LOCAL)
    ((duration_s, input_tokens, output_tokens),) = rows
    assert output_tokens == 12 * 12
    usd = 2.75 * 2 * (duration_s / 3600)
    assert stored["usd_per_1m_output_tokens"] == usd / output_tokens * 1e6
    assert stored["usd_per_1m_tokens"] == usd / (input_tokens + output_tokens) * 1e6


def test_gateway_prices_give_the_cost_from_the_token_counts(
        tmp_path: Path, store: Engine) -> None:
    _, rows, stored = _run(tmp_path, store, GATEWAY)
    ((_, input_tokens, output_tokens),) = rows
    usd = (input_tokens * 0.15 + output_tokens * 0.6) / 1e6
    assert stored["usd_per_1m_output_tokens"] == pytest.approx(usd / output_tokens * 1e6)
    assert stored["usd_per_1m_tokens"] == pytest.approx(usd / (input_tokens + output_tokens) * 1e6)


def test_without_a_price_there_is_no_cost_metric(tmp_path: Path, store: Engine) -> None:
    _, _, stored = _run(tmp_path, store, "")
    assert "output_throughput_tokens_per_s" in stored
    assert not {"usd_per_1m_output_tokens", "usd_per_1m_tokens"} & set(stored)


def test_the_run_report_and_json_show_the_cost(tmp_path: Path, store: Engine) -> None:
    config, suite = tmp_path / "sim.yaml", tmp_path / "suite.yaml"
    config.write_text(CONFIG + LOCAL, encoding="utf-8")
    suite.write_text(SUITE, encoding="utf-8")
    run = execute_suite(store, load_config(config), load_suite(suite), telemetry=NO_GPU)
    workload = run.workloads[0]
    assert workload.params["cost"] == {"usd_per_gpu_hour": 2.75, "gpus": 2}
    expected = compute_workload_metrics(workload)["usd_per_1m_output_tokens"]
    body = render_run_json(run)["workloads"][0]
    assert body["cost"]["usd_per_1m_output_tokens"] == pytest.approx(expected)
    assert f"${expected:.4g}/1M output tokens" in render_run_text(run)
    assert body["energy"] == {"measured": False, "reason": run.workloads[0].gpu.reason
                              if run.workloads[0].gpu is not None else None}
    assert "NVML Shared Library Not Found" in body["energy"]["reason"]


def test_a_turn_split_gets_a_cost_only_from_per_token_prices(
        tmp_path: Path, store: Engine) -> None:
    """A split shares its workload's GPU hours with the other split: no GPU-hour cost."""
    config, suite = tmp_path / "sim.yaml", tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    turns = {"of": "only", "first": 1, "last": 1}
    for cost, priced in ((LOCAL, False), (GATEWAY, True)):
        config.write_text(CONFIG + cost, encoding="utf-8")
        run = execute_suite(store, load_config(config), load_suite(suite), telemetry=NO_GPU)
        workload = run.workloads[0]
        split = replace(workload, params={**workload.params, "turns": turns})
        assert ("usd_per_1m_output_tokens" in compute_workload_metrics(split)) is priced
        assert "usd_per_1m_output_tokens" in compute_workload_metrics(workload)


def test_cost_metrics_are_registered_lower_is_better() -> None:
    for name in ("usd_per_1m_output_tokens", "usd_per_1m_tokens"):
        assert REGISTRY[name].unit == "usd_per_1m_tokens"
        assert REGISTRY[name].direction is Direction.LOWER_IS_BETTER
