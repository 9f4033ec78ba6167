"""A server checked against its config before the first request: the simulator and the scripted
OpenAI-style server on real ports, and literal facts for the comparisons."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scripted_server import scripted_servers, token_stream
from tests.sim.sim_support import MODEL, make_config
from tracker.errors import ConfigError
from tracker.inputs.configs import EngineArgs, LoadedConfig, ServingConfig, build_loaded_config
from tracker.load.generator import Endpoint
from tracker.sim import SimServer
from tracker.targets.resolve import open_target
from tracker.targets.server_check import (
    ServedModel,
    ServerFacts,
    compute_engine_warnings,
    compute_server_check,
    parse_cache_config,
    parse_served_models,
    run_server_check,
    run_server_facts,
)

VLLM_CACHE_CONFIG = (
    '# TYPE vllm:cache_config_info gauge\n'
    'vllm:cache_config_info{block_size="128",cache_dtype="auto",enable_prefix_caching="True",'
    'gpu_memory_utilization="0.9",kv_cache_memory_bytes="1073741824",'
    'kv_cache_size_tokens="1048576"} 1.0\n')
VLLM = ServerFacts("0.32.0", (ServedModel("tracker-random-vllm", 2048),),
                   parse_cache_config(VLLM_CACHE_CONFIG))


def attached(base_url: str, *, kind: str = "vllm", model: str = MODEL,
             engine: dict[str, Any] | None = None) -> LoadedConfig:
    body = {"name": "attached", "target": {"kind": kind, "base_url": base_url, "model": model},
            "engine": engine or {}}
    return build_loaded_config(ServingConfig.model_validate(body), "configs/attached.yaml")


def test_the_cache_config_labels_and_the_served_models_are_read() -> None:
    assert VLLM.cache_config is not None
    assert (VLLM.cache_config["block_size"], VLLM.cache_config["enable_prefix_caching"]) == \
        ("128", "True")
    assert parse_cache_config("vllm:num_requests_running 0.0\n") is None
    assert parse_served_models({"data": [{"id": "a", "max_model_len": 4096}, {"id": "b"}, 7]}) \
        == (ServedModel("a", 4096), ServedModel("b", None))
    assert parse_served_models({"detail": "Not Found"}) is None
    assert (VLLM.engine, VLLM.simulated, VLLM.routes_by_model) == ("vllm 0.32.0", False, True)


def test_each_engine_field_the_server_runs_otherwise_is_one_warning_with_the_fix() -> None:
    engine = EngineArgs(block_size=32, enable_prefix_caching=False, max_model_len=4096,
                        gpu_memory_utilization=0.9, kv_cache_dtype="auto", max_num_seqs=4)
    warnings = compute_engine_warnings(VLLM, engine, "tracker-random-vllm")
    assert warnings == [
        "engine.block_size: the config says 32, the server reports 128 "
        "(vllm:cache_config_info); this run measures the server as it runs: set "
        "engine.block_size: 128 to describe it, or serve it with --block-size 32",
        "engine.enable_prefix_caching: the config says false, the server reports true "
        "(vllm:cache_config_info); this run measures the server as it runs: set "
        "engine.enable_prefix_caching: true to describe it, or serve it with "
        "--no-enable-prefix-caching",
        "engine.max_model_len: the config says 4096, the server reports 2048 (/v1/models for "
        "tracker-random-vllm); this run measures the server as it runs: set "
        "engine.max_model_len: 2048 to describe it, or serve it with --max-model-len 4096"]


def test_fields_the_config_leaves_to_the_engine_or_the_server_does_not_report_are_not_compared(
) -> None:
    assert compute_engine_warnings(VLLM, EngineArgs(max_num_seqs=4), "tracker-random-vllm") == []
    silent = ServerFacts(None, None, None)  # a gateway: no /version, /v1/models or /metrics
    assert compute_engine_warnings(silent, EngineArgs(block_size=16), "m") == []


def test_a_model_vllm_does_not_serve_is_a_config_error_naming_the_served_ones() -> None:
    wrong = attached("http://127.0.0.1:8000", model="meta-llama/Meta-Llama-3-8B-Instruct")
    with pytest.raises(ConfigError) as caught:
        compute_server_check(VLLM, wrong, "http://127.0.0.1:8000")
    message = str(caught.value)
    assert message.startswith("configs/attached.yaml: target.model: the server at "
                              "http://127.0.0.1:8000 (vllm 0.32.0) does not serve "
                              "'meta-llama/Meta-Llama-3-8B-Instruct'")
    assert "lists: tracker-random-vllm" in message and "--served-model-name" in message


async def test_the_simulator_behind_a_vllm_config_is_simulated_and_its_block_size_checked(
) -> None:
    async with SimServer(make_config({"block_size": 32, "max_model_len": 4096})) as sim:
        loaded = attached(sim.base_url, engine={"block_size": 16, "max_model_len": 4096})
        async with open_target(loaded) as handle:
            assert handle.simulated and handle.engine is not None
            assert handle.engine.startswith("tracker-sim ")
            [warning] = handle.warnings
            assert warning.startswith("engine.block_size: the config says 16, the server "
                                      "reports 32")
            facts = handle.environment_facts()["server_check"]
            assert isinstance(facts, dict) and facts["warnings"] == [warning]
            assert facts["served_models"] == [{"name": MODEL, "max_model_len": 4096}]


async def test_a_wrong_model_name_fails_before_any_request_reaches_the_simulator() -> None:
    async with SimServer(make_config()) as sim:
        with pytest.raises(ConfigError, match=f"its /v1/models lists: {MODEL}"):
            async with open_target(attached(sim.base_url, model="meta-llama/Llama-3-8B")):
                pytest.fail("the target must not open")
        facts = await run_server_facts(Endpoint(sim.base_url))
        assert [m.name for m in facts.models or ()] == [MODEL]


async def test_a_server_that_does_not_say_what_it_is_is_warned_about_an_unlisted_model() -> None:
    async with scripted_servers() as make:
        server = await make(lambda _i, _body: token_stream(4, ttft_s=0.0, itl_s=0.0))
        check = await run_server_check(Endpoint(server.url),
                                       attached(server.url, model="other", engine={
                                           "block_size": 16}))
    assert (check.facts.version, check.facts.cache_config) == (None, None)  # 404s: not said
    assert check.warnings == ("target.model: 'other' is not in the server's /v1/models (m); "
                              "requests name it anyway (some servers ignore the name, others "
                              "answer 404)",)
    assert server.served == []  # nothing was sent


async def test_a_remote_gateway_is_not_asked() -> None:
    async with scripted_servers() as make:
        server = await make(lambda _i, _body: token_stream(4, ttft_s=0.0, itl_s=0.0))
        async with open_target(attached(server.url, kind="openai", model="other")) as handle:
            assert handle.server_check is None and handle.warnings == ()
            assert not handle.simulated
