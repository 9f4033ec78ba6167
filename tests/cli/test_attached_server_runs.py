"""``tracker run`` against an attached server that contradicts its config (the simulator in a
thread, behind a ``kind: vllm`` config): the warning on stderr, in the run JSON, in ``tracker
show`` and in the gate report; a model it does not serve is exit 2 before any request; the
workload's server counters leave the warm-up out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tracker.cli.main import main
from tracker.inputs.configs import ServingConfig
from tracker.sim.server import ThreadedSimServer

SERVED = "sim/served-model"
SERVER = f"""\
name: served
target:
  kind: sim
  model: {SERVED}
  simulator: {{seed: 1, prefill_s_per_token: 0.00001, decode_base_s: 0.001, decode_per_seq_s: 0.0}}
engine:
  max_num_seqs: 8
  block_size: 32
"""
SUITE = """\
name: attached-small
seed: 3
telemetry: {server_scrape_interval_s: 0.05}
workloads:
  - name: two-users
    prompts: {source: synthetic, input_tokens: 16}
    max_tokens: 8
    ignore_eos: true
    concurrency: 2
    num_requests: 8
    warmup_requests: 3
"""
WARNING = "engine.block_size: the config says 16, the server reports 32"


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with ThreadedSimServer(ServingConfig.model_validate(yaml.safe_load(SERVER))) as server:
        yield server.base_url


def write_files(tmp_path: Path, base_url: str, model: str = SERVED) -> tuple[Path, Path]:
    config, suite = tmp_path / "attached.yaml", tmp_path / "suite.yaml"
    config.write_text(f"name: attached\ntarget:\n  kind: vllm\n  base_url: {base_url}\n"
                      f"  model: {model}\nengine:\n  block_size: 16\n", encoding="utf-8")
    suite.write_text(SUITE, encoding="utf-8")
    return config, suite


def run(tmp_path: Path, config: Path, suite: Path, name: str) -> int:
    return main(["run", "--db", f"sqlite:///{tmp_path / 'runs.db'}", "--config", str(config),
                 "--suite", str(suite), "--json", str(tmp_path / name)])


def test_a_contradicting_server_is_warned_about_in_the_run_show_and_gate(
        sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, suite = write_files(tmp_path, sim_url)
    assert run(tmp_path, config, suite, "first.json") == 0
    printed = capsys.readouterr()
    assert f"warning: {WARNING}" in printed.err  # before the workloads, on stderr
    assert f"  warning: {WARNING}" in printed.out  # and in the run's table
    data = json.loads((tmp_path / "first.json").read_text(encoding="utf-8"))
    assert data["simulated"] is True  # its /version says it is the tracker's simulator
    [warning] = data["warnings"]
    assert warning.startswith(WARNING) and "--block-size 16" in warning
    assert data["environment"]["server_check"]["cache_config"]["block_size"] == "32"
    assert data["environment"]["engine"].startswith("tracker-sim ")

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["show", str(data["run_id"]), "--db", db]) == 0
    assert f"  warning: {WARNING}" in capsys.readouterr().out

    assert run(tmp_path, config, suite, "second.json") == 0
    capsys.readouterr()
    report = tmp_path / "gate.md"
    main(["gate", "--db", db, "--base-run", "1", "--head-run", "2", "--markdown", str(report),
          "--json", str(tmp_path / "gate.json")])
    markdown = report.read_text(encoding="utf-8")
    assert "**Server checks**" in markdown and "(runs base 1, head 2)" in markdown
    assert "engine\\.block\\_size\\: the config says 16" in markdown  # escaped: outside text
    gate = json.loads((tmp_path / "gate.json").read_text(encoding="utf-8"))
    assert gate["run_warnings"]["1"] == [warning]


def test_the_workloads_server_counters_leave_the_warm_up_out(
        sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, suite = write_files(tmp_path, sim_url)
    assert run(tmp_path, config, suite, "run.json") == 0
    capsys.readouterr()
    [workload] = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))["workloads"]
    server = workload["telemetry"]["server"]
    assert server["measured"] is True
    # 8 measured requests of 8 tokens; the 3 warm-up requests before them are not counted
    assert (server["request_success"], server["generation_tokens"]) == (8.0, 64.0)
    assert server["prompt_tokens"] == workload["total_input_tokens"]


def test_a_model_the_server_does_not_serve_is_exit_2_naming_the_served_one(
        sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, suite = write_files(tmp_path, sim_url, model="meta-llama/Meta-Llama-3-8B-Instruct")
    assert run(tmp_path, config, suite, "run.json") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "does not serve 'meta-llama/Meta-Llama-3-8B-Instruct'" in err
    assert f"its /v1/models lists: {SERVED}" in err
