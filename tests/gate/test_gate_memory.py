"""`tracker gate` catches a head that holds more GPU memory for the same load (the simulator's
KV pool grows with gpu_memory_utilization, as vLLM's does) and passes the same config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracker.cli.main import main
from tracker.metrics import GIB

REPO = Path(__file__).resolve().parents[2]
WALK = REPO / "configs" / "walk" / "2-continuous-batching.yaml"
SUITE = """\
name: gate-memory
seed: 5
workloads:
  - name: chat
    prompts: {source: synthetic, input_tokens: 64}
    max_tokens: 16
    ignore_eos: true
    concurrency: 2
    num_requests: 12
    warmup_requests: 2
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    walk = WALK.read_text(encoding="utf-8")
    more_kv = walk.replace("gpu_memory_utilization: 0.9", "gpu_memory_utilization: 0.95")
    assert more_kv != walk
    paths = {"base": WALK, "head": tmp_path / "more-kv.yaml", "suite": tmp_path / "suite.yaml",
             "db": tmp_path / "gate.db", "json": tmp_path / "gate.json"}
    paths["head"].write_text(more_kv, encoding="utf-8")
    paths["suite"].write_text(SUITE, encoding="utf-8")
    return paths


def _gate(files: dict[str, Path], head: Path) -> int:
    return main(["gate", "--base", str(files["base"]), "--head", str(head), "--suite",
                 str(files["suite"]), "--db", str(files["db"]), "--quiet",
                 "--json", str(files["json"])])


def _memory_rows(files: dict[str, Path]) -> list[dict[str, object]]:
    verdict = json.loads(files["json"].read_text(encoding="utf-8"))
    return [row for row in verdict["rows"] if row["metric"] == "gpu_memory_peak_bytes"]


def test_gate_fails_when_the_head_holds_more_kv_memory_for_the_same_load(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _gate(files, files["head"]) == 1
    markdown = capsys.readouterr().out
    row = next(line for line in markdown.splitlines() if "| GPU memory peak |" in line)
    assert "72.00 GiB | 76.00 GiB" in row and "❌ regression" in row
    assert "simulator's own account" in row
    assert "**GPU memory** (peak per GPU" in markdown and "+4,096 MiB" in markdown
    assert "compared exactly, tolerance 0" in markdown
    assert "decided after 1 of 6 rounds: chat's GPU memory peak regressed" in markdown
    (memory,) = _memory_rows(files)
    verdict = memory["verdict"]
    assert isinstance(verdict, dict) and memory["regressed"] is True
    assert verdict["base"] == 0.9 * 80 * GIB and verdict["head"] == 0.95 * 80 * GIB
    assert verdict["method"].startswith("exact")


def test_gate_passes_the_same_config_with_its_memory_unchanged(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _gate(files, files["base"]) == 0
    markdown = capsys.readouterr().out
    row = next(line for line in markdown.splitlines() if "| GPU memory peak |" in line)
    assert "72.00 GiB | 72.00 GiB" in row and "🟰 no change" in row
    (memory,) = _memory_rows(files)
    assert memory["regressed"] is False


def test_a_stated_memory_tolerance_lets_a_wanted_growth_pass(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    head = files["head"]
    code = main(["gate", "--base", str(files["base"]), "--head", str(head), "--suite",
                 str(files["suite"]), "--db", str(files["db"]), "--quiet", "--json",
                 str(files["json"]), "--min-effect", "gpu_memory_peak_bytes=0.1"])
    markdown = capsys.readouterr().out
    (memory,) = _memory_rows(files)
    verdict = memory["verdict"]
    assert isinstance(verdict, dict) and verdict["outcome"] == "no_change"  # +5.6 % <= 10 %
    assert verdict["min_effect"] == 0.1 and "tolerance 0.1" in markdown
    assert memory["regressed"] is False and code == 0
