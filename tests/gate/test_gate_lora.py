"""LoRA adapters on the simulator: a workload shared over four adapters gets a result per
adapter in the run JSON, and a head whose ``max_loras`` (1) is below the adapters in use
regresses throughput in the gate (a batch holds one adapter at a time, and adapters are loaded
again and again)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.simconfigs import gate_sim
from tracker.cli.main import main

FOUR_SLOTS = gate_sim("lora-sim", """\
  enable_lora: true
  max_loras: 4
  max_lora_rank: 16
  lora_modules: {sql: /adapters/sql, chat: /adapters/chat, code: /adapters/code,
                 math: /adapters/math}
""")
ONE_SLOT = FOUR_SLOTS.replace("max_loras: 4", "max_loras: 1")
SUITE = """\
name: lora-mix
seed: 3
workloads:
  - name: mixed
    prompts: {source: synthetic, input_tokens: 32}
    max_tokens: 32
    ignore_eos: true
    concurrency: 16
    num_requests: 64
    warmup_requests: 8
    adapters: {shares: {sql: 1, chat: 1, code: 1, math: 1}}
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {"db": tmp_path / "gate.db"}
    for name, text in (("four", FOUR_SLOTS), ("one", ONE_SLOT), ("suite", SUITE)):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(text, encoding="utf-8")
    return paths


def test_each_adapter_has_its_own_result_in_the_run_json(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--config", str(files["four"]), "--suite", str(files["suite"]),
                 "--db", str(files["db"]), "--quiet", "--json", "-"]) == 0
    run = json.loads(capsys.readouterr().out)
    workloads = {w["name"]: w for w in run["workloads"]}
    names = [f"mixed/adapter-{a}" for a in ("chat", "code", "math", "sql")]
    assert list(workloads) == ["mixed", *names]
    assert sum(workloads[name]["completed"] for name in names) == workloads["mixed"]["completed"]
    for name in names:
        split = workloads[name]
        assert split["completed"] == 16 and split["failed"] == 0
        assert split["params"]["adapter"] == {"of": "mixed", "name": name.rsplit("-", 1)[1]}
        assert split["request_throughput"] == pytest.approx(
            workloads["mixed"]["request_throughput"] / 4, rel=0.01)


def test_max_loras_below_the_adapters_in_use_regresses_throughput(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # sequential: the per-adapter results are rows of the gate's family too (Holm over all of
    # them), so on a busy host two runs a side may leave the throughput undecided; rounds go on
    # until it is
    code = main(["gate", "--base", str(files["four"]), "--head", str(files["one"]), "--suite",
                 str(files["suite"]), "--max-rounds", "6", "--db", str(files["db"]), "--quiet",
                 "--json", "-"])
    verdict = json.loads(capsys.readouterr().out)
    assert code == 1, verdict
    assert verdict["config_diff"] == [{"path": "engine.max_loras", "old": 4, "new": 1}]
    rows = {(row["workload"], row["metric"]): row for row in verdict["rows"]}
    throughput = rows[("mixed", "request_throughput_per_s")]
    assert throughput["regressed"] and throughput["verdict"]["rel_change"] < -0.3
    for adapter in ("chat", "code", "math", "sql"):  # each adapter's share slows with it
        assert (f"mixed/adapter-{adapter}", "request_throughput_per_s") in rows
