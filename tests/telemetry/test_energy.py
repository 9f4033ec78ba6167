"""GPU energy per workload: NVML's energy counter (the fake's, the only fake), the sampled power
where the counter is missing, the validity notes, and joules per token through a stored run."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from tests.telemetry.fake_nvml import FakeNvml, FakeNvmlWithoutEnergy
from tests.telemetry.test_runs import CONFIG, SUITE
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.metrics import compute_workload_metrics
from tracker.pipeline.execute import execute_suite
from tracker.reports.run_report import render_run_json, render_run_text
from tracker.results import GpuSample
from tracker.store.models import WorkloadMetricModel, WorkloadResultModel
from tracker.telemetry import TelemetrySettings
from tracker.telemetry.energy import compute_energy_note, compute_sampled_energy_j
from tracker.telemetry.gpu import GpuSampler


def _sample(sampler: GpuSampler, count: int, at_least_s: float = 0.0) -> None:
    start = time.monotonic()
    deadline = start + 10.0
    while time.monotonic() < deadline and (
            len(sampler.samples) < count or time.monotonic() - start < at_least_s):
        time.sleep(0.005)


def _power(gpu_index: int, t_s: float, power_w: float | None) -> GpuSample:
    return GpuSample(gpu_index, t_s, None, None, None, power_w, None, None, None)


def test_the_energy_counter_gives_each_gpus_joules_and_the_mean_power() -> None:
    fake = FakeNvml(count=2)
    sampler = GpuSampler(200.0, nvml=fake)
    sampler.start()
    _sample(sampler, 6)
    telemetry = sampler.stop()
    assert fake.energy_reads == {0: 2, 1: 2}  # once at the start, once at the end
    assert [(d.energy_j, d.energy_source) for d in telemetry.devices] == [
        (150.0, "counter"), (151.0, "counter")]
    assert telemetry.energy_j == 301.0 and telemetry.energy_source == "counter"
    assert telemetry.duration_s is not None and telemetry.duration_s > 0
    assert telemetry.energy_mean_w == 301.0 / telemetry.duration_s


@pytest.mark.parametrize("fake", [FakeNvml(count=1, unsupported=frozenset({"energy"})),
                                  FakeNvmlWithoutEnergy(count=1)],
                         ids=["not-supported", "no-function"])
def test_without_the_counter_the_sampled_power_is_integrated(fake: FakeNvml) -> None:
    sampler = GpuSampler(200.0, nvml=fake)
    sampler.start()
    _sample(sampler, 5)
    telemetry = sampler.stop()
    (device,) = telemetry.devices
    own = [(s.t_s, s.power_w) for s in telemetry.samples if s.power_w is not None]
    expected = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(own))
    assert device.energy_source == "sampled power" and telemetry.energy_source == "sampled power"
    assert device.energy_j == pytest.approx(expected) and expected > 0


def test_sampled_power_integrates_a_literal_series() -> None:
    samples = [_power(0, 0.0, 100.0), _power(1, 0.0, 900.0), _power(0, 1.0, 200.0),
               _power(0, 1.5, None), _power(0, 2.0, 300.0)]
    assert compute_sampled_energy_j(0, samples) == 150.0 + 250.0
    assert compute_sampled_energy_j(1, samples) is None  # one reading spans no time


def test_no_power_and_no_counter_is_not_measured_energy() -> None:
    fake = FakeNvml(count=1, unsupported=frozenset({"energy", "power"}))
    sampler = GpuSampler(200.0, nvml=fake)
    sampler.start()
    _sample(sampler, 3)
    telemetry = sampler.stop()
    assert telemetry.measured and telemetry.devices[0].energy_j is None
    assert telemetry.energy_j is None and telemetry.energy_source is None


def test_a_short_workload_and_a_shared_gpu_get_a_note() -> None:
    fake = FakeNvml(count=2, processes={1: [4100, 4222], 0: [4100]})
    sampler = GpuSampler(200.0, nvml=fake)
    sampler.start()
    _sample(sampler, 2)
    note = sampler.stop().energy_note
    assert note is not None and "under the 1 s" in note
    assert "GPU 1 ran 2 compute processes (pids 4100, 4222)" in note and "GPU 0" not in note
    assert compute_energy_note(2.0, {}) is None


def test_joules_per_token_come_from_the_counter_and_are_stored(
        tmp_path: Path, store: Engine) -> None:
    config, suite = tmp_path / "sim.yaml", tmp_path / "suite.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    suite.write_text(SUITE, encoding="utf-8")
    run = execute_suite(store, load_config(config), load_suite(suite),
                        telemetry=TelemetrySettings(nvml=FakeNvml(count=2)))
    energy_j = (FakeNvml.energy_step_mj(0) + FakeNvml.energy_step_mj(1)) / 1000
    with Session(store) as session:
        stored = {(name, metric): value for name, metric, value in session.execute(
            select(WorkloadResultModel.name, WorkloadMetricModel.metric, WorkloadMetricModel.value)
            .join(WorkloadResultModel)
            .where(WorkloadResultModel.run_id == run.run_id))}
    for workload in run.workloads:
        s = workload.summary
        assert workload.gpu is not None and workload.gpu.energy_j == energy_j
        assert workload.gpu.energy_source == "counter"
        assert stored[(workload.name, "joules_per_output_token")] == \
            energy_j / s.total_output_tokens
        assert stored[(workload.name, "joules_per_token")] == \
            energy_j / (s.total_input_tokens + s.total_output_tokens)
        assert compute_workload_metrics(workload)["joules_per_output_token"] == \
            energy_j / s.total_output_tokens
    body = render_run_json(run)["workloads"][0]["energy"]
    assert body["measured"] is True and body["joules"] == energy_j and body["source"] == "counter"
    assert body["joules_per_output_token"] == energy_j / run.workloads[0].summary.total_output_tokens
    assert "J/output token (counter, " in render_run_text(run)


def test_the_run_text_notes_a_short_workloads_energy(tmp_path: Path, store: Engine) -> None:
    config, suite = tmp_path / "sim.yaml", tmp_path / "suite.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    suite.write_text(SUITE, encoding="utf-8")
    run = execute_suite(store, load_config(config), load_suite(suite),
                        telemetry=TelemetrySettings(nvml=FakeNvml(count=1)))
    text = render_run_text(run)
    assert f"energy {150 * len(run.workloads)} J" in text  # 150 J a workload; the run: the sum
    short = [w for w in run.workloads if w.gpu is not None and w.gpu.duration_s is not None
             and w.gpu.duration_s < 1.0]
    assert short, "the test suite's workloads last well under a second"
    assert f"note: energy of {short[0].name}: the workload lasted" in text
    body = render_run_json(run)["workloads"][0]["telemetry"]["gpu"]
    assert body["energy_j"] == 150.0 and body["devices"][0]["energy_source"] == "counter"
