"""A whole run stores its telemetry: fake NVML (the only fake), the simulator's real /metrics,
real SQLite and PostgreSQL through ``db_url``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.telemetry.fake_nvml import FakeNvml
from tracker.cli.main import main
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.pipeline.execute import execute_suite
from tracker.reports.run_report import render_run_json, render_run_text
from tracker.telemetry import TelemetrySettings

CONFIG = """\
name: telemetry-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {seed: 1, prefill_s_per_token: 0.00001, decode_base_s: 0.002, decode_per_seq_s: 0.0}
engine:
  max_num_seqs: 8
  block_size: 16
"""

SUITE = """\
name: telemetry-small
seed: 5
telemetry: {gpu_sample_hz: 200, server_scrape_interval_s: 0.02}
workloads:
  - name: first
    prompts: {source: synthetic, input_tokens: 32}
    max_tokens: 16
    ignore_eos: true
    concurrency: 4
    num_requests: 12
  - name: second
    prompts: {source: synthetic, input_tokens: 16}
    max_tokens: 8
    ignore_eos: true
    concurrency: 2
    num_requests: 6
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    config, suite = tmp_path / "sim.yaml", tmp_path / "suite.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    suite.write_text(SUITE, encoding="utf-8")
    return config, suite


def test_a_run_stores_gpu_and_server_telemetry_and_its_timeline(
        files: tuple[Path, Path], store: Engine) -> None:
    config, suite = load_config(files[0]), load_suite(files[1])
    run = execute_suite(store, config, suite, telemetry=TelemetrySettings(nvml=FakeNvml(count=2)))
    assert run.status.value == "completed"
    for workload in run.workloads:
        assert workload.gpu is not None and workload.gpu.measured and workload.gpu.sample_hz == 200
        assert [d.gpu_index for d in workload.gpu.devices] == [0, 1]
        assert workload.gpu.samples, "the stored run carries its samples"
        assert workload.server is not None and workload.server.measured
        assert workload.server.values["generation_tokens"] == \
            workload.summary.total_output_tokens
    assert [w.name for w in run.workloads] == ["first", "second"]
    for workload in run.workloads:  # the stored timeline, in time order, of each GPU used
        assert workload.gpu is not None
        times = [s.t_s for s in workload.gpu.samples]
        assert times == sorted(times) and {s.gpu_index for s in workload.gpu.samples} == {0, 1}
    body = render_run_json(run)
    gpu = body["telemetry"]["gpu"]
    assert gpu["measured"] is True and gpu["gpu_memory_peak_bytes"] == max(
        w.gpu.memory_peak_bytes or 0 for w in run.workloads if w.gpu is not None)
    assert gpu["devices"] == [{"index": 0, "name": "NVIDIA H200"}, {"index": 1, "name": "NVIDIA H200"}]
    server = body["telemetry"]["server"]
    assert server["measured"] is True and server["num_preemptions"] == 0
    assert server["generation_tokens"] == sum(w.summary.total_output_tokens for w in run.workloads)
    assert "kv_cache_usage_peak" in server
    assert body["workloads"][0]["telemetry"]["gpu"]["measured"] is True
    assert run.environment["gpu_model"] == "NVIDIA H200" and run.environment["gpu_count"] == 2
    assert run.environment["cuda_driver_version"] == "12.8"
    assert "gpu: NVIDIA H200" in render_run_text(run)


def test_without_a_driver_the_run_completes_and_says_why(
        files: tuple[Path, Path], store: Engine) -> None:
    config, suite = load_config(files[0]), load_suite(files[1])
    run = execute_suite(store, config, suite,
                        telemetry=TelemetrySettings(nvml=FakeNvml(fail_init=True)))
    assert run.status.value == "completed"
    body = render_run_json(run)
    assert body["telemetry"]["gpu"]["measured"] is False
    assert "NVML Shared Library Not Found" in body["telemetry"]["gpu"]["reason"]
    assert body["telemetry"]["server"]["measured"] is True
    assert "gpu: not measured (NVML unavailable: NVML Shared Library Not Found" in render_run_text(run)
    assert "NVML Shared Library Not Found" in run.environment["gpu_reason"]


def test_cli_run_on_this_host_says_why_gpu_metrics_are_missing(
        files: tuple[Path, Path], db_url: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The real pynvml: on a host without a driver (CI, here) the run still completes."""
    out = tmp_path / "run.json"
    code = main(["run", "--config", str(files[0]), "--suite", str(files[1]), "--db", db_url,
                 "--json", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    body = json.loads(out.read_text(encoding="utf-8"))
    gpu = body["telemetry"]["gpu"]
    if gpu["measured"]:
        pytest.skip("this host has a GPU driver; the fake-NVML tests cover the measured case")
    assert gpu["reason"].startswith("NVML unavailable: ")
    assert "gpu: not measured (NVML unavailable" in capsys.readouterr().out


def test_fingerprint_has_the_config_commit_and_never_the_environment(
        tmp_path: Path, files: tuple[Path, Path], store: Engine,
        monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    config_path = repo / "sim.yaml"
    config_path.write_text(CONFIG, encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "sim.yaml"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "config"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    monkeypatch.setenv("TRACKER_TEST_SECRET_VALUE", "sk-should-never-be-stored-0123456789")
    settings = TelemetrySettings(nvml=FakeNvml(count=1))
    clean = execute_suite(store, load_config(config_path), load_suite(files[1]), telemetry=settings)
    assert clean.environment["config_git_commit"] == head
    assert clean.environment["config_git_dirty"] is False
    assert "sk-should-never" not in json.dumps(render_run_json(clean))
    config_path.write_text(CONFIG + "# edited\n", encoding="utf-8")
    dirty = execute_suite(store, load_config(config_path), load_suite(files[1]), telemetry=settings)
    assert dirty.environment["config_git_dirty"] is True
    outside = execute_suite(store, load_config(files[0]), load_suite(files[1]), telemetry=settings)
    if "config_git_commit" not in outside.environment:  # tmp_path is not inside a repository
        assert "config_git_dirty" not in outside.environment


def test_only_the_gpus_the_target_uses_are_sampled(files: tuple[Path, Path], store: Engine) -> None:
    settings = TelemetrySettings(nvml=FakeNvml(count=4), gpu_indices=(2,))
    run = execute_suite(store, load_config(files[0]), load_suite(files[1]), telemetry=settings)
    for workload in run.workloads:
        assert workload.gpu is not None and [d.gpu_index for d in workload.gpu.devices] == [2]
        assert {s.gpu_index for s in workload.gpu.samples} == {2}
    assert run.environment["gpu_count"] == 4  # the fingerprint describes the whole host
