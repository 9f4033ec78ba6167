"""Where quality is asked: once per config version and suite a night by default (later runs copy
those answers and say whose), in every run with ``when: every_run``; a run asks the suite's
seeded sample, a gate the whole set. The simulator's real HTTP API and a real SQLite store."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, text

from tests.telemetry.fake_nvml import FakeNvml
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.pipeline.execute import execute_suite
from tracker.reports.run_report import render_run_json, render_run_text
from tracker.results import RunResult
from tracker.telemetry import TelemetrySettings

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "baselines" / "quality" / "basic.jsonl"
NO_GPU = TelemetrySettings(nvml=FakeNvml(fail_init=True))


def _config(tmp_path: Path, engine: str = "") -> Path:
    path = tmp_path / f"sim-{len(engine)}.yaml"
    path.write_text(f"""\
name: reuse-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {{seed: 5, prefill_s_per_token: 0.00001, decode_base_s: 0.001, decode_per_seq_s: 0.0}}
engine:
  max_num_seqs: 16
{engine}""", encoding="utf-8")
    return path


def _suite(tmp_path: Path, quality: str = "") -> Path:
    path = tmp_path / f"suite-{len(quality)}.yaml"
    path.write_text(f"""\
name: reuse-suite
quality: {{path: {SET}, concurrency: 16{quality}}}
workloads:
  - name: tiny
    prompts: {{source: synthetic, input_tokens: 8}}
    max_tokens: 4
    ignore_eos: true
    concurrency: 2
    num_requests: 2
""", encoding="utf-8")
    return path


def _run(store: Engine, config: Path, suite: Path, *, whole: bool = False) -> RunResult:
    return execute_suite(store, load_config(config), load_suite(suite), telemetry=NO_GPU,
                         quality_whole=whole)


def test_a_second_run_of_the_night_copies_the_first_runs_answers_and_says_so(
        tmp_path: Path, store: Engine) -> None:
    config, suite = _config(tmp_path), _suite(tmp_path)
    first, second, third = (_run(store, config, suite) for _ in range(3))
    assert first.quality is not None and first.quality.reused_from_run_id is None
    for later in (second, third):
        assert later.quality is not None
        assert later.quality.reused_from_run_id == first.run_id  # the run that asked them
        assert later.quality.items == first.quality.items
        assert later.quality.accuracy == first.quality.accuracy
    assert f"answers reused from run {first.run_id}" in render_run_text(second)
    assert render_run_json(second)["quality"]["reused_from_run_id"] == first.run_id


def test_answers_with_a_failed_request_are_not_copied(tmp_path: Path, store: Engine) -> None:
    """A first run whose quality lost an item (a request failed) is asked again, not copied."""
    config, suite = _config(tmp_path), _suite(tmp_path)
    first = _run(store, config, suite)
    with store.begin() as connection:  # as stored when one item's request failed
        connection.execute(text("UPDATE quality_summaries SET answered = answered - 1 "
                                "WHERE run_id = :run"), {"run": first.run_id})
    second, third = _run(store, config, suite), _run(store, config, suite)
    assert second.quality is not None and second.quality.reused_from_run_id is None
    assert third.quality is not None and third.quality.reused_from_run_id == second.run_id


def test_another_config_version_asks_the_set_itself(tmp_path: Path, store: Engine) -> None:
    suite = _suite(tmp_path)
    _run(store, _config(tmp_path), suite)
    fp8 = _run(store, _config(tmp_path, "  kv_cache_dtype: fp8\n"), suite)
    assert fp8.quality is not None and fp8.quality.reused_from_run_id is None


def test_every_run_asks_again(tmp_path: Path, store: Engine) -> None:
    config, suite = _config(tmp_path), _suite(tmp_path, ", when: every_run")
    first, second = _run(store, config, suite), _run(store, config, suite)
    assert second.quality is not None and second.quality.reused_from_run_id is None
    assert second.quality.drift_baseline_run_id == first.run_id  # asked, so compared


def test_when_is_not_part_of_the_suite_version_but_the_sample_is(tmp_path: Path) -> None:
    plain = load_suite(_suite(tmp_path)).version
    assert load_suite(_suite(tmp_path, ", when: every_run")).version == plain
    assert load_suite(_suite(tmp_path, ", sample: 10")).version != plain


def test_a_run_asks_the_seeded_sample_and_a_gate_the_whole_set(tmp_path: Path,
                                                               store: Engine) -> None:
    config, suite = _config(tmp_path), _suite(tmp_path, ", sample: 10, seed: 4")
    sampled, again = _run(store, config, suite), _run(store, config, suite)
    assert sampled.quality is not None and len(sampled.quality.items) == 10
    assert again.quality is not None and again.quality.reused_from_run_id == sampled.run_id
    whole = _run(store, config, suite, whole=True)  # other items: asked, not copied
    assert whole.quality is not None and len(whole.quality.items) == 40
    assert whole.quality.reused_from_run_id is None
    assert {i.item_id for i in sampled.quality.items} < {i.item_id for i in whole.quality.items}
