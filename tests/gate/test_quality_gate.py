"""The gate catches the fp8 change that costs five points: `tracker gate` on the simulator with
the shipped walk config and the shipped chat-short suite (its 1,000-item quality set, asked
whole by the gate, once per side), base against the same config with ``kv_cache_dtype: fp8``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracker.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "configs" / "walk" / "2-continuous-batching.yaml"
SUITE = ROOT / "baselines" / "chat-short.yaml"


def _gate(tmp_path: Path, head: Path) -> tuple[int, dict[str, object]]:
    out = tmp_path / "gate.json"
    code = main(["gate", "--base", str(BASE), "--head", str(head), "--suite", str(SUITE),
                 "--db", str(tmp_path / "gate.db"), "--quiet", "--json", str(out)])
    return code, json.loads(out.read_text(encoding="utf-8"))


def _accuracy_row(markdown: str) -> str:
    return next(line for line in markdown.splitlines() if "| accuracy |" in line)


def test_gate_fails_when_an_fp8_kv_cache_costs_five_points_of_accuracy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = tmp_path / "fp8.yaml"
    head.write_text(BASE.read_text(encoding="utf-8").replace(
        "  max_num_seqs: 256\n", "  max_num_seqs: 256\n  kv_cache_dtype: fp8\n"),
        encoding="utf-8")
    code, verdict = _gate(tmp_path, head)
    markdown = capsys.readouterr().out
    assert code == 1
    row = _accuracy_row(markdown)
    assert "| quality\\: mixed\\-1k | accuracy |" in row and "❌ regression" in row
    quality = verdict["quality"]
    assert isinstance(quality, dict) and quality["items"] == 1000
    assert 0.03 <= -quality["difference"] <= 0.08  # the simulator's five-point penalty
    assert quality["right_on_head_only"] == 0 and quality["p_value_two_sided"] < 1e-6
    assert quality["detectable_drop"] < 0.03
    assert "### Quality" in markdown and "detects a drop of" in markdown
    assert "Flipped items" in markdown and "✅ → ❌" in markdown
    accuracy_rows = [r for r in verdict["rows"] if r["metric"] == "accuracy"]  # type: ignore[index, union-attr]
    assert len(accuracy_rows) == 1 and accuracy_rows[0]["regressed"]
    # the latency and throughput rows do not regress: only the accuracy does
    assert not any(r["regressed"] for r in verdict["rows"]  # type: ignore[union-attr]
                   if r["metric"] != "accuracy")


def test_gate_passes_the_same_config_against_itself(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict = _gate(tmp_path, BASE)
    markdown = capsys.readouterr().out
    assert code == 0, markdown
    assert "🟰 no change" in _accuracy_row(markdown)
    quality = verdict["quality"]
    assert isinstance(quality, dict) and quality["difference"] == 0.0
    assert quality["head_reused_from_run_id"] == quality["base_run_id"]  # asked once a night


TINY_SUITE = """\
name: gate-quality-sample
seed: 3
quality: {{path: {path}, concurrency: 16, sample: 10, seed: 2}}
workloads:
  - name: busy
    prompts: {{source: synthetic, input_tokens: 32}}
    max_tokens: 8
    ignore_eos: true
    concurrency: 4
    num_requests: 16
"""
TINY_CONFIG = """\
name: gate-quality-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {seed: 1, prefill_s_per_token: 0.0001, decode_base_s: 0.002, run_noise: 0.0}
engine:
  max_num_seqs: 16
"""


@pytest.mark.parametrize(("flags", "items"), [([], 40), (["--quality-sample"], 10)])
def test_the_gate_asks_the_whole_set_unless_told_to_ask_the_sample(
        tmp_path: Path, flags: list[str], items: int) -> None:
    suite, config = tmp_path / "suite.yaml", tmp_path / "config.yaml"
    suite.write_text(TINY_SUITE.format(path=ROOT / "baselines" / "quality" / "basic.jsonl"),
                     encoding="utf-8")
    config.write_text(TINY_CONFIG, encoding="utf-8")
    out = tmp_path / "gate.json"
    code = main(["gate", "--base", str(config), "--head", str(config), "--suite", str(suite),
                 "--repeats", "1", "--db", str(tmp_path / "gate.db"), "--quiet",
                 "--json", str(out), *flags])
    verdict = json.loads(out.read_text(encoding="utf-8"))
    quality = verdict["quality"]
    assert code in (0, 3) and quality["items"] == items  # one round: latency may be unjudged
    assert quality["difference"] == 0.0 and quality["head_reused_from_run_id"] is not None
    # the same answers, but so few items cannot rule out a one-point change: inconclusive,
    # with the drop they could detect (more for fewer items)
    assert quality["outcome"] == "inconclusive"
    assert quality["detectable_drop"] > (0.3 if items == 10 else 0.1)
    (row,) = [r for r in verdict["rows"] if r["metric"] == "accuracy"]
    assert row["note"] == (f"this set detects a drop of {quality['detectable_drop'] * 100:.1f} "
                           "points at 80% power")


def test_stored_runs_are_judged_on_their_stored_answers(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    suite, plain, fp8 = tmp_path / "suite.yaml", tmp_path / "plain.yaml", tmp_path / "fp8.yaml"
    suite.write_text(TINY_SUITE.replace(", sample: 10, seed: 2", "").format(
        path=ROOT / "baselines" / "quality" / "mixed-1k.jsonl"), encoding="utf-8")
    plain.write_text(TINY_CONFIG, encoding="utf-8")
    fp8.write_text(TINY_CONFIG + "  kv_cache_dtype: fp8\n", encoding="utf-8")
    db = str(tmp_path / "stored.db")
    for config in (plain, fp8):
        assert main(["run", "--config", str(config), "--suite", str(suite), "--db", db,
                     "--quiet"]) == 0
    capsys.readouterr()
    out = tmp_path / "gate.json"
    code = main(["gate", "--base-run", "1", "--head-run", "2", "--db", db, "--json", str(out)])
    assert code == 1
    assert "❌ regression" in _accuracy_row(capsys.readouterr().out)
    quality = json.loads(out.read_text(encoding="utf-8"))["quality"]
    assert (quality["base_run_id"], quality["head_run_id"], quality["items"]) == (1, 2, 1000)
