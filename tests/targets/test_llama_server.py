"""Exact prompt lengths against a real llama.cpp llama-server (built by bench/llama_server.py,
serving a random-weights model): what the server counts in ``usage.prompt_tokens``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bench.llama_server import (
    BUILD_COMMAND,
    MODEL_ALIAS,
    build_vocabulary,
    find_server,
    measure_workload,
    running_server,
    write_random_model,
)
from tracker.cli.bench_command import BenchArgs, build_workload
from tracker.cli.main import main
from tracker.inputs.package_data import shipped_baselines
from tracker.inputs.suites import LoadedSuite, Suite, build_loaded_suite, load_suite
from tracker.load.generator import Endpoint
from tracker.results import TokenSource
from tracker.targets.exact_prompts import TokenizedTraffic, adapt_suite_traffic
from tracker.targets.model_tokenizer import open_tokenizer

pytest.importorskip("gguf", reason="writing the model needs gguf: pip install 'tracker[tokenizer]'")
needs_server = pytest.mark.skipif(
    find_server() is None,
    reason=f"llama-server is not built; build it (about 10 minutes on 2 CPUs) with: {BUILD_COMMAND}")


@pytest.fixture(scope="module")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(tmp_path_factory.mktemp("llama") / "llama-server.log") as url:
        yield url


async def exact_traffic(url: str, suite: LoadedSuite) -> TokenizedTraffic:
    async with open_tokenizer(Endpoint(url), MODEL_ALIAS) as tokenizer:
        return await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)


def bench_suite(url: str, prompts: int = 24) -> LoadedSuite:
    """What `tracker bench --endpoint-type completions --random-input-len 256` sends."""
    workload = build_workload(BenchArgs(url, endpoint_type="completions", random_input_len=256,
                                        random_output_len=16, num_prompts=prompts,
                                        max_concurrency=4, ignore_eos=True))
    return build_loaded_suite(Suite(name="bench", workloads=[workload]), "-")


@needs_server
async def test_random_input_len_256_on_completions_is_256_prompt_tokens_on_every_request(
        llama_url: str) -> None:
    suite = bench_suite(llama_url)
    exact = await exact_traffic(llama_url, suite)
    assert (exact.tokenizer, exact.special_tokens, exact.fallback) == \
        ("llama.cpp /tokenize", 1, None)
    [workload] = suite.suite.workloads
    records = await measure_workload(llama_url, workload, exact.traffic["bench"], MODEL_ALIAS)
    assert len(records) == 24 and all(r.ok for r in records)
    assert {(r.input_tokens, r.input_tokens_source) for r in records} == \
        {(256, TokenSource.USAGE)}  # the BOS included, as vllm bench's random dataset counts


@needs_server
async def test_word_prompts_are_not_256_tokens_in_the_models_vocabulary(llama_url: str) -> None:
    suite = bench_suite(llama_url, prompts=4)
    [workload] = suite.suite.workloads
    records = await measure_workload(llama_url, workload, suite.traffic["bench"], MODEL_ALIAS)
    assert all(r.ok and r.input_tokens is not None and r.input_tokens > 400 for r in records)


@needs_server
async def test_chat_short_completes_with_exact_prompts_and_no_context_overflow(
        llama_url: str) -> None:
    suite = load_suite(shipped_baselines() / "chat-short.yaml")
    exact = await exact_traffic(llama_url, suite)
    assert exact.tokenizer == "llama.cpp /tokenize"
    counts: set[int | None] = set()
    for workload in suite.suite.workloads:
        records = await measure_workload(llama_url, workload, exact.traffic[workload.name],
                                         MODEL_ALIAS)
        assert len(records) == workload.num_requests
        assert [r.error for r in records if not r.ok] == []
        counts |= {r.input_tokens for r in records}
    # 512 + 128 content tokens exactly, plus the chat template's (chatml, plain text in this
    # vocabulary): 60 or 61, as the first word of a message merges with the template or not
    assert all(count is not None and 640 < count <= 640 + 64 for count in counts)
    assert max(c for c in counts if c) - min(c for c in counts if c) <= 1


@needs_server
def test_tracker_bench_sends_256_prompt_tokens_to_llama_cpp_and_says_which_tokenizer(
        llama_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, requests = tmp_path / "b.json", tmp_path / "r.jsonl"
    code = main(["bench", "--base-url", llama_url, "--endpoint-type", "completions",
                 "--random-input-len", "256", "--random-output-len", "8", "--ignore-eos",
                 "--num-prompts", "16", "--max-concurrency", "4", "--json", str(out),
                 "--save-requests", str(requests), "--quiet"])
    assert code == 0, capsys.readouterr().err
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["environment"]["tokenizer"] == "llama.cpp /tokenize"
    assert data["environment"]["tokenizer_fallback"] is None
    lines = [json.loads(line) for line in requests.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 16
    assert {(line["input_tokens"], line["requested_input_tokens"]) for line in lines} == \
        {(256, 256)}
    assert data["workloads"][0]["input_token_count_mismatches"] == 0


@needs_server
def test_tracker_run_of_chat_short_against_llama_cpp_completes_with_no_failed_request(
        llama_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "llama.yaml"
    config.write_text(f"name: llama-cpp\ntarget:\n  kind: openai\n  base_url: {llama_url}\n"
                      f"  model: {MODEL_ALIAS}\n", encoding="utf-8")
    out = tmp_path / "run.json"
    code = main(["run", "--db", f"sqlite:///{tmp_path / 'r.db'}", "--config", str(config),
                 "--suite", str(shipped_baselines() / "chat-short.yaml"), "--json", str(out),
                 "--quiet"])
    assert code == 0, capsys.readouterr().err
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["status"] == "completed"
    assert data["environment"]["tokenizer"] == "llama.cpp /tokenize"
    assert all(w["failed"] == 0 and w["completed"] == w["num_requests"] for w in data["workloads"])


@needs_server
async def test_chat_short_in_words_overflows_the_shared_context(llama_url: str) -> None:
    """The failure the exact prompts remove: four users' word prompts exceed 8,192 tokens."""
    suite = load_suite(shipped_baselines() / "chat-short.yaml")
    four = next(w for w in suite.suite.workloads if w.concurrency == 4)
    traffic = suite.traffic[four.name]
    first_four = replace(traffic, requests=traffic.requests[:4])  # once, all four at a time
    workload = four.model_copy(update={"num_requests": 4, "warmup_requests": 0})
    records = await measure_workload(llama_url, workload, first_four, MODEL_ALIAS)
    assert any(not r.ok and "Context size has been exceeded" in (r.error or "") for r in records)



def test_the_random_model_is_a_llama_gguf_with_a_sentencepiece_vocabulary(tmp_path: Path) -> None:
    import gguf

    path = write_random_model(tmp_path / "m.gguf", vocab_size=1024)
    assert write_random_model(path) == path  # written once: a second call keeps the file
    reader = gguf.GGUFReader(path)
    fields = {name: field.contents() for name, field in reader.fields.items()
              if not name.startswith("tokenizer.ggml.tokens")}
    assert fields["general.architecture"] == "llama"
    assert (fields["llama.block_count"], fields["llama.embedding_length"]) == (4, 128)
    assert fields["tokenizer.ggml.model"] == "llama"
    assert reader.fields["tokenizer.ggml.tokens"].contents()[:3] == ["<unk>", "<s>", "</s>"]
    assert {t.name for t in reader.tensors} >= {"token_embd.weight", "blk.3.ffn_down.weight"}
    pieces = build_vocabulary()
    assert len(pieces) == len(set(pieces)) == 4096
    assert all(len(p) == 1 or p[:-1] in pieces or p.startswith("<") for p in pieces[259:])
