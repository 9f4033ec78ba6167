"""`tracker gate` on GPU memory: more memory that a changed gpu_memory_utilization asks for (the
simulator's KV pool grows with it, as vLLM's does) is shown "as configured" and fails nothing; more
memory no changed field asks for fails the gate, exactly; the same config passes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracker.cli.main import main
from tracker.gate.gating import GateOptions, build_gate_result
from tracker.inputs.config_diff import compute_config_diff
from tracker.load.summary import compute_workload_summary
from tracker.metrics import GIB, SIM_MEMORY_GAUGE
from tracker.results import (
    RequestRecord,
    RunResult,
    RunStatus,
    ServerTelemetry,
    TokenSource,
    VersionRef,
    WorkloadResult,
)

T0 = datetime(2026, 11, 1, tzinfo=UTC)

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


def test_more_memory_that_gpu_memory_utilization_asks_for_is_as_configured_and_passes(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert _gate(files, files["head"]) == 0
    markdown = capsys.readouterr().out
    row = next(line for line in markdown.splitlines() if "| GPU memory peak |" in line)
    assert "72.00 GiB | 76.00 GiB" in row and "❌" not in row
    assert "as configured (engine\\.gpu\\_memory\\_utilization\\: 0\\.9 → 0\\.95)" in row
    assert "simulator's own account" in row
    assert "**GPU memory** (peak per GPU" in markdown and "+4,096 MiB" in markdown
    assert "GPU memory peak regressed" not in markdown  # the gate did not stop on it
    (memory,) = _memory_rows(files)
    verdict = memory["verdict"]
    assert isinstance(verdict, dict) and memory["regressed"] is False
    assert memory["as_configured"] == "engine.gpu_memory_utilization: 0.9 → 0.95"
    assert verdict["base"] == 0.9 * 80 * GIB and verdict["head"] == 0.95 * 80 * GIB
    assert verdict["method"].startswith("exact") and verdict["outcome"] == "regression"


def test_more_memory_no_changed_field_asks_for_fails_the_gate_exactly() -> None:
    def run(run_id: int, memory_gib: float) -> RunResult:
        records = tuple(RequestRecord(i, i * 0.01, 0.05, 0.5, (0.01,) * 9, 10, TokenSource.USAGE,
                                      32, TokenSource.USAGE) for i in range(50))
        server = ServerTelemetry(True, values={f"{SIM_MEMORY_GAUGE}_peak": memory_gib * GIB,
                                               f"{SIM_MEMORY_GAUGE}_mean": memory_gib * GIB})
        workload = WorkloadResult("chat", 2, 50, 0, {}, T0, T0, records,
                                  compute_workload_summary(records, 2.0), server=server)
        return RunResult(run_id, RunStatus.COMPLETED, True, VersionRef("c", "a" * 64),
                         VersionRef("s", "b" * 64), T0, T0, "h", "0", {}, (workload,))

    changes = compute_config_diff({"engine": {"enforce_eager": False}},
                                  {"engine": {"enforce_eager": True}})
    result = build_gate_result([run(1, 72.0), run(3, 72.0)], [run(2, 76.0), run(4, 76.0)],
                               ("base", "head"), changes, GateOptions(), interleaved=False)
    memory = next(row for row in result.rows if row.metric == "gpu_memory_peak_bytes")
    assert memory.regressed and memory.as_configured is None and result.exit_code == 1
    assert memory.verdict is not None and memory.verdict.method.startswith("exact")


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
