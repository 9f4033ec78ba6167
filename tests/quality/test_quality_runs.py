"""Quality in whole runs: the simulator's real HTTP API, the real store (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.telemetry.fake_nvml import FakeNvml
from tracker.cli.main import main
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.pipeline.execute import execute_suite
from tracker.reports.run_report import render_run_json, render_run_text
from tracker.results import RunResult
from tracker.store.quality import save_quality
from tracker.store.runs import fetch_run
from tracker.telemetry import TelemetrySettings

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_SET = ROOT / "baselines" / "quality" / "basic.jsonl"
NO_GPU = TelemetrySettings(nvml=FakeNvml(fail_init=True))


def _config(tmp_path: Path, seed: int, engine: str = "") -> Path:
    path = tmp_path / f"sim-{seed}-{len(engine)}.yaml"
    path.write_text(f"""\
name: quality-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {{seed: {seed}, prefill_s_per_token: 0.00001, decode_base_s: 0.001,
              decode_per_seq_s: 0.0}}
engine:
  max_num_seqs: 16
{engine}""", encoding="utf-8")
    return path


def _suite(tmp_path: Path) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(f"""\
name: quality-suite
seed: 3
quality: {{path: {SHIPPED_SET}, max_tokens: 32, concurrency: 16, when: every_run}}
workloads:
  - name: tiny
    prompts: {{source: synthetic, input_tokens: 8}}
    max_tokens: 4
    ignore_eos: true
    concurrency: 2
    num_requests: 2
""", encoding="utf-8")
    return path


def _run(store: Engine, config: Path, suite: Path) -> RunResult:
    return execute_suite(store, load_config(config), load_suite(suite), telemetry=NO_GPU)


def test_a_run_stores_every_answer_with_accuracy_and_interval(tmp_path: Path, store: Engine) -> None:
    run = _run(store, _config(tmp_path, 1), _suite(tmp_path))
    quality = run.quality
    assert quality is not None and quality.set_name == "basic" and len(quality.items) == 40
    assert quality.answered == 40 and all(i.output for i in quality.items)
    assert quality.correct == sum(1 for i in quality.items if i.score == 1.0)
    assert quality.accuracy == pytest.approx(quality.correct / 40)
    assert quality.accuracy_ci_low is not None and quality.accuracy_ci_high is not None
    assert quality.accuracy_ci_low < quality.accuracy <= quality.accuracy_ci_high
    assert quality.drift is None  # the first run of this suite and config
    body = render_run_json(run)["quality"]
    assert body["accuracy"] == quality.accuracy and len(body["accuracy_ci"]) == 2
    assert body["drift"] is None and len(body["items"]) == 40
    assert {"id", "output", "score", "changed"} <= set(body["items"][0])
    assert "quality (basic): accuracy" in render_run_text(run)


def test_drift_is_measured_against_the_previous_completed_run(tmp_path: Path, store: Engine) -> None:
    suite = _suite(tmp_path)
    first = _run(store, _config(tmp_path, 1), suite)
    again = _run(store, _config(tmp_path, 1), suite)
    assert again.quality is not None and again.quality.drift == 0.0
    assert again.quality.drift_baseline_run_id == first.run_id
    fp8 = _run(store, _config(tmp_path, 1, "  kv_cache_dtype: fp8\n  quantization: awq\n"), suite)
    assert fp8.quality is not None and fp8.quality.drift_baseline_run_id == again.run_id
    assert fp8.quality.drift is not None and fp8.quality.drift > 0
    changed = [i for i in fp8.quality.items if i.changed]
    assert len(changed) == round(fp8.quality.drift * fp8.quality.drift_compared)
    with Session(store) as session:
        stored = fetch_run(session, fp8.run_id)
    assert stored.quality == fp8.quality


def test_a_designated_baseline_overrides_the_previous_run(tmp_path: Path, store: Engine) -> None:
    suite = _suite(tmp_path)
    base = _run(store, _config(tmp_path, 2), suite)
    awq = _run(store, _config(tmp_path, 2, "  quantization: awq\n"), suite)
    awq_again = _run(store, _config(tmp_path, 2, "  quantization: awq\n"), suite)
    assert base.quality is not None and awq.quality is not None and awq_again.quality is not None
    assert awq_again.quality.drift == 0.0  # against the previous run: awq itself
    plain = tmp_path / "plain.yaml"
    plain.write_text(suite.read_text(encoding="utf-8").replace("quality:", "# quality:"),
                     encoding="utf-8")
    target = _run(store, _config(tmp_path, 2), plain)
    assert target.quality is None
    undrifted = replace(awq_again.quality, drift=None, drift_baseline_run_id=None,
                        drift_compared=0)
    with Session(store) as session, session.begin():
        stored = save_quality(session, target.run_id, undrifted, baseline_run_id=base.run_id)
    assert stored.drift_baseline_run_id == base.run_id
    assert stored.drift == awq.quality.drift and stored.drift is not None and stored.drift > 0


def test_awq_loses_accuracy_and_drifts_against_the_same_config_without_it(
        tmp_path: Path, store: Engine) -> None:
    suite = _suite(tmp_path)
    base_accuracy, awq_accuracy, awq_drift = [], [], []
    for seed in (11, 12, 13):
        base = _run(store, _config(tmp_path, seed), suite)
        awq = _run(store, _config(tmp_path, seed, "  quantization: awq\n"), suite)
        assert base.quality is not None and awq.quality is not None
        assert awq.quality.drift_baseline_run_id == base.run_id
        base_accuracy.append(base.quality.accuracy)
        awq_accuracy.append(awq.quality.accuracy)
        awq_drift.append(awq.quality.drift)
    assert statistics.mean(awq_accuracy) < statistics.mean(base_accuracy)
    assert all(d is not None and d > 0 for d in awq_drift)


def test_the_demo_suite_runs_its_quality_set_through_the_cli(
        tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "chat-short.yaml"
    text = (ROOT / "baselines" / "chat-short.yaml").read_text(encoding="utf-8")
    text = text.replace("path: quality/mixed-1k.jsonl", f"path: {SHIPPED_SET.parent}/mixed-1k.jsonl")
    text = text.replace("num_requests: 16", "num_requests: 2").replace("num_requests: 48",
                                                                      "num_requests: 4")
    suite.write_text(text, encoding="utf-8")
    out = tmp_path / "run.json"
    code = main(["run", "--config", str(_config(tmp_path, 7)), "--suite", str(suite), "--db", db_url,
                 "--json", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    body = json.loads(out.read_text(encoding="utf-8"))
    # a run asks the suite's seeded sample of the 1,000 items (a gate asks them all)
    assert body["quality"]["set"]["name"] == "mixed-1k" and body["quality"]["answered"] == 200
    assert 0.5 < body["quality"]["accuracy"] <= 1.0
