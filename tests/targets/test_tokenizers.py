"""Exact prompt lengths in a model's tokenizer: the target's /tokenize, a local tokenizer.json,
or words with the reason; against real HTTP servers on ephemeral ports and a real BPE file."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.sim.sim_support import MODEL, make_config
from tracker.errors import ConfigError
from tracker.inputs.configs import ServingConfig, build_loaded_config, load_config
from tracker.inputs.package_data import shipped_baselines
from tracker.inputs.prompts import VOCABULARY
from tracker.inputs.suites import LoadedSuite, Suite, build_loaded_suite, load_suite
from tracker.load.bodies import build_body
from tracker.load.generator import Endpoint
from tracker.sim import SimServer
from tracker.targets.exact_prompts import (
    adapt_suite_traffic,
    adapt_traffic,
    fit_text,
)
from tracker.targets.model_tokenizer import (
    LocalTokenizer,
    TokenizerFailed,
    WordTokenizer,
    open_tokenizer,
    resolve_tokenizer_path,
)

tokenizers = pytest.importorskip("tokenizers", reason="pip install 'tracker[tokenizer]'")

BOS = "<s>"


def write_bpe_tokenizer(path: Path, vocab_size: int = 600) -> Path:
    """A byte-level BPE tokenizer.json trained here on the prompt vocabulary (a BOS on every
    encoding with special tokens): most words are several tokens, merges cross cut points."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([" ".join(VOCABULARY)] * 3, trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", special_tokens=[(BOS, tokenizer.token_to_id(BOS))])
    tokenizer.save(str(path))
    return path


@pytest.fixture(scope="module")
def bpe_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_bpe_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer.json")


def chat_short() -> LoadedSuite:
    return load_suite(shipped_baselines() / "chat-short.yaml")


def one_workload_suite(endpoint_type: str, input_tokens: int = 256,
                       system_tokens: int = 0) -> LoadedSuite:
    prompts = {"source": "synthetic", "input_tokens": input_tokens,
               "system_prompt_tokens": system_tokens}
    suite = Suite.model_validate({"name": "s", "seed": 3, "workloads": [{
        "name": "w", "prompts": prompts, "endpoint_type": endpoint_type, "max_tokens": 8,
        "concurrency": 2, "num_requests": 12, "warmup_requests": 2}]})
    return build_loaded_suite(suite, "-")


def sent_text(suite: LoadedSuite, traffic: Any, index: int) -> str:
    workload = suite.suite.workloads[0]
    body = build_body(workload, MODEL, traffic.requests[index].messages, None, False)
    return str(body["prompt"])


# --- a local tokenizer.json ----------------------------------------------------------------

async def test_a_local_tokenizer_makes_completions_prompts_exact_including_the_bos(
        bpe_file: Path) -> None:
    suite = one_workload_suite("completions", input_tokens=256, system_tokens=64)
    tokenizer = LocalTokenizer(bpe_file)
    assert tokenizer.special_tokens == 1
    words = suite.traffic["w"]
    model = tokenizers.Tokenizer.from_file(str(bpe_file))
    assert len(model.encode(sent_text(suite, words, 0)).ids) > 400  # words are not tokens here
    adapted = await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)
    traffic = adapted.traffic["w"]
    assert traffic.tokenizer == adapted.tokenizer == tokenizer.name
    assert tokenizer.name.startswith("tokenizer.json tokenizer.json sha256:")
    counts = {len(model.encode(sent_text(suite, traffic, i)).ids)  # with BOS, as a server counts
              for i in range(len(traffic.requests))}
    assert counts == {256 + 64}
    systems = {r.messages[0].content for r in traffic.requests}
    assert len(systems) == 1 and len(model.encode(systems.pop(), add_special_tokens=False)) == 64
    users = [r.messages[-1].content for r in traffic.requests]
    assert len(set(users)) == len(users)  # still one prompt per request
    assert [r.requested_input_tokens for r in traffic.requests] == [320] * 14
    assert adapted.fallback is None and adapted.prompts_digest != suite.prompts_digest


async def test_a_local_tokenizer_makes_each_chat_message_exact(bpe_file: Path) -> None:
    suite = chat_short()
    tokenizer = LocalTokenizer(bpe_file)
    adapted = await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)
    model = tokenizers.Tokenizer.from_file(str(bpe_file))
    for workload in suite.suite.workloads:
        for request in adapted.traffic[workload.name].requests:
            system, user = request.messages
            assert len(model.encode(system.content, add_special_tokens=False)) == 512
            assert len(model.encode(user.content, add_special_tokens=False)) == 128


async def test_the_same_tokenizer_builds_byte_identical_prompts_twice(bpe_file: Path) -> None:
    suite = chat_short()
    first = await adapt_suite_traffic(suite.traffic, suite.suite.workloads,
                                      LocalTokenizer(bpe_file))
    again = await adapt_suite_traffic(chat_short().traffic, suite.suite.workloads,
                                      LocalTokenizer(bpe_file))
    assert first.prompts_digest == again.prompts_digest
    assert first.traffic == again.traffic


async def test_fit_text_repeats_a_short_source_and_cuts_inside_words(bpe_file: Path) -> None:
    tokenizer = LocalTokenizer(bpe_file)
    for tokens in (1, 2, 3, 7, 50, 333):
        text = await fit_text(tokenizer, "kernel latency bridge", tokens)
        assert len(await tokenizer.encode(text)) == tokens


async def test_a_fixed_prompt_is_sent_as_written(bpe_file: Path) -> None:
    suite = load_suite(shipped_baselines() / "classic-load.yaml")
    adapted = await adapt_suite_traffic(suite.traffic, suite.suite.workloads,
                                        LocalTokenizer(bpe_file))
    assert adapted.traffic == suite.traffic
    assert adapted.prompts_digest == suite.prompts_digest


# --- the config's target.tokenizer -----------------------------------------------------------

def write_config(tmp_path: Path, tokenizer: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(f"name: c\ntarget: {{kind: vllm, model: m, base_url: http://127.0.0.1:9,"
                    f" tokenizer: {tokenizer!r}}}\n")
    return path


def test_target_tokenizer_is_found_relative_to_the_config_file(
        tmp_path: Path, bpe_file: Path) -> None:
    model_dir = tmp_path / "models" / "llama"
    model_dir.mkdir(parents=True)
    (model_dir / "tokenizer.json").write_bytes(bpe_file.read_bytes())
    for named in ("models/llama", "models/llama/tokenizer.json"):
        config = load_config(write_config(tmp_path, named))
        assert resolve_tokenizer_path(config) == model_dir / "tokenizer.json"
    assert resolve_tokenizer_path(build_loaded_config(make_config(), "-")) is None


def test_target_tokenizer_refuses_a_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"c.yaml:2: target.tokenizer: .*not a URL"):
        load_config(write_config(tmp_path, "https://example.org/tokenizer.json"))


def test_a_missing_tokenizer_file_names_the_key_and_the_path(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, "nowhere/tokenizer.json"))
    with pytest.raises(ConfigError, match=r"c.yaml: target.tokenizer: no file at .*nowhere"):
        resolve_tokenizer_path(config)


def test_a_file_that_is_no_tokenizer_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(ConfigError, match=r"target.tokenizer: .*tokenizer.json: not a tokenizer"):
        LocalTokenizer(bad)


def test_the_tokenizer_key_changes_the_config_version() -> None:
    plain = make_config()
    named = ServingConfig.model_validate(
        {**plain.model_dump(), "target": {**plain.target.model_dump(), "tokenizer": "t.json"}})
    assert build_loaded_config(plain, "-").version != build_loaded_config(named, "-").version


# --- the target's endpoint -------------------------------------------------------------------

async def test_the_simulator_tokenizes_in_words_so_the_suite_sends_its_own_bytes() -> None:
    suite = chat_short()
    async with (SimServer(make_config()) as server,
                open_tokenizer(Endpoint(server.base_url + "/v1"), MODEL) as tokenizer):
        adapted = await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)
    assert (adapted.tokenizer, adapted.special_tokens) == ("vllm /tokenize", 0)
    assert adapted.fallback is None
    assert adapted.prompts_digest == suite.prompts_digest  # same bytes as the word prompts
    assert all(a.requests == w.requests for a, w in
               zip(adapted.traffic.values(), suite.traffic.values(), strict=True))


Handler = Callable[[dict[str, Any]], Awaitable[web.Response]]


@pytest.fixture
async def tokenizer_server() -> AsyncIterator[Callable[[dict[str, Handler]], Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(routes: dict[str, Handler]) -> str:
        app = web.Application()
        for path, handler in routes.items():
            async def handle(request: web.Request, handler: Handler = handler) -> web.Response:
                return await handler(await request.json())
            app.router.add_post(path, handle)
        runner = web.AppRunner(app, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


def llama_cpp_routes(bpe_file: Path, calls: list[str]) -> dict[str, Handler]:
    """llama-server's /tokenize and /detokenize shapes over a real BPE tokenizer."""
    model = tokenizers.Tokenizer.from_file(str(bpe_file))

    async def tokenize(body: dict[str, Any]) -> web.Response:
        calls.append("tokenize")
        if "content" not in body:  # what llama-server answers to vLLM's shape
            return web.json_response({"tokens": []})
        ids = model.encode(body["content"], add_special_tokens=bool(body.get("add_special")))
        return web.json_response({"tokens": ids.ids})

    async def detokenize(body: dict[str, Any]) -> web.Response:
        calls.append("detokenize")
        return web.json_response({"content": model.decode(body["tokens"])})

    return {"/tokenize": tokenize, "/detokenize": detokenize}


async def test_a_llama_cpp_endpoint_is_recognised_and_its_bos_counted(
        tokenizer_server: Any, bpe_file: Path) -> None:
    calls: list[str] = []
    url = await tokenizer_server(llama_cpp_routes(bpe_file, calls))
    suite = one_workload_suite("completions")
    async with open_tokenizer(Endpoint(url), "m") as tokenizer:
        assert (tokenizer.name, tokenizer.special_tokens) == ("llama.cpp /tokenize", 1)
        adapted = await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)
    model = tokenizers.Tokenizer.from_file(str(bpe_file))
    traffic = adapted.traffic["w"]
    assert {len(model.encode(sent_text(suite, traffic, i)).ids)
            for i in range(len(traffic.requests))} == {256}
    assert adapted.environment_facts()["tokenizer"] == "llama.cpp /tokenize"


async def test_a_target_without_tokenize_falls_back_to_words_and_says_why(
        tokenizer_server: Any) -> None:
    url = await tokenizer_server({})
    suite = chat_short()
    async with open_tokenizer(Endpoint(url), "m") as tokenizer:
        adapted = await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)
    assert adapted.tokenizer == "words" and adapted.traffic == suite.traffic
    assert adapted.fallback is not None
    assert "no usable tokenizer endpoint" in adapted.fallback and "HTTP 404" in adapted.fallback


async def test_a_tokenizer_that_fails_mid_way_leaves_every_workload_in_words(
        tokenizer_server: Any, bpe_file: Path) -> None:
    calls: list[str] = []
    routes = llama_cpp_routes(bpe_file, calls)
    healthy = routes["/tokenize"]

    async def failing(body: dict[str, Any]) -> web.Response:
        if len(calls) > 60:
            return web.Response(status=500, text="slot unavailable\nat line 2")
        return await healthy(body)

    routes["/tokenize"] = failing
    url = await tokenizer_server(routes)
    suite = chat_short()
    async with open_tokenizer(Endpoint(url), "m") as tokenizer:
        assert tokenizer.name == "llama.cpp /tokenize"
        adapted = await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)
    assert adapted.traffic == suite.traffic and adapted.tokenizer == "words"
    assert adapted.prompts_digest == suite.prompts_digest and adapted.special_tokens == 0
    assert adapted.fallback is not None
    assert adapted.fallback.startswith("llama.cpp /tokenize failed while the prompts were built")
    assert "HTTP 500: slot unavailable" in adapted.fallback and "\n" not in adapted.fallback


async def test_a_tokenizer_that_stops_answering_times_out_into_words(
        tokenizer_server: Any, bpe_file: Path) -> None:
    calls: list[str] = []
    routes = llama_cpp_routes(bpe_file, calls)
    healthy, never = routes["/tokenize"], asyncio.Event()

    async def hanging(body: dict[str, Any]) -> web.Response:
        if len(calls) > 10:
            await never.wait()
        return await healthy(body)

    routes["/tokenize"] = hanging
    url = await tokenizer_server(routes)
    suite = chat_short()
    async with open_tokenizer(Endpoint(url), "m", timeout_s=0.5) as tokenizer:
        assert tokenizer.name == "llama.cpp /tokenize"
        adapted = await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)
    never.set()  # lets the server's hanging handlers end
    assert adapted.tokenizer == "words" and adapted.traffic == suite.traffic
    assert adapted.fallback is not None and "TimeoutError" in adapted.fallback


async def test_a_tokenizer_answering_garbage_is_a_failure_not_a_traceback(
        tokenizer_server: Any) -> None:
    async def tokenize(body: dict[str, Any]) -> web.Response:
        return web.json_response({"tokens": ["a", "b"], "count": 2})

    url = await tokenizer_server({"/tokenize": tokenize})
    async with open_tokenizer(Endpoint(url), "m") as tokenizer:
        assert isinstance(tokenizer, WordTokenizer)
        assert tokenizer.fallback is not None and "integer 'tokens'" in tokenizer.fallback


async def test_the_word_tokenizer_leaves_traffic_as_the_suite_built_it() -> None:
    suite = chat_short()
    workload = suite.suite.workloads[0]
    tokenizer = WordTokenizer()
    assert await adapt_traffic(suite.traffic[workload.name], workload, tokenizer) is \
        suite.traffic[workload.name]
    ids = await tokenizer.encode("the kernel, the cache")
    assert await tokenizer.decode(ids) == "the kernel , the cache"
    with pytest.raises(TokenizerFailed, match="unknown token id"):
        await tokenizer.decode([999])


# --- trace blocks ----------------------------------------------------------------------------

TRACE_SUITE = shipped_baselines() / "trace-replay.yaml"


def common_prefix_chars(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


@pytest.mark.skipif(not TRACE_SUITE.is_file(), reason="no shipped trace-replay suite yet")
async def test_trace_rows_are_exact_and_equal_blocks_stay_byte_identical(bpe_file: Path) -> None:
    suite = load_suite(TRACE_SUITE)
    tokenizer = LocalTokenizer(bpe_file)
    adapted = await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)
    assert adapted.fallback is None
    model = tokenizers.Tokenizer.from_file(str(bpe_file))
    for name, traffic in adapted.traffic.items():
        for request in traffic.requests:
            count = len(model.encode(request.messages[-1].content, add_special_tokens=False))
            assert count == request.requested_input_tokens, name
    words = [r.messages[-1].content.split(" ") for r in suite.traffic["mooncake"].requests]
    texts = [r.messages[-1].content for r in adapted.traffic["mooncake"].requests]
    pairs = [(i, j) for i in range(len(words)) for j in range(i) if len(words[i]) > 512
             and len(words[j]) > 512]
    shared = [(i, j) for i, j in pairs if words[i][:512] == words[j][:512]]
    assert shared and len(shared) < len(pairs)  # the sample has both kinds
    for i, j in pairs:
        common = common_prefix_chars(texts[i], texts[j])
        if (i, j) in shared:
            assert common > 1000, (i, j)  # a whole fitted block of 512 tokens in common
        else:
            assert common < 100, (i, j)
