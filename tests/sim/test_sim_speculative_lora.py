"""Speculative decoding and LoRA adapters in the simulator: drafts accepted by method and depth,
counted as vLLM counts them, several tokens a step when they are accepted and a dearer step for
about one token when they are not; adapters served under their names, at most ``max_loras`` in
a batch, loaded into a slot when not resident and evicted least recently used."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from tests.sim.conftest import ServerFactory
from tests.sim.sim_support import MODEL, chat_body, fetch_metrics, make_config, stream_request
from tracker.inputs.configs import EngineArgs, SimulatorSettings
from tracker.inputs.speculative import SpeculativeConfig
from tracker.sim.batching import Scheduler, SimRequest
from tracker.sim.kvcache import KvCacheSpec
from tracker.sim.lora import LoraSlots
from tracker.sim.sampling import plan_output
from tracker.sim.speculative import METHODS, Speculator
from tracker.sim.standalone import parse_serving_config

EAGLE3 = {"method": "eagle3", "model": "draft/eagle3", "num_speculative_tokens": 4}
NGRAM = {"method": "ngram", "num_speculative_tokens": 4}
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def speculator(spec: dict[str, object], **settings: object) -> Speculator:
    return Speculator(SpeculativeConfig.model_validate(spec),
                      SimulatorSettings.model_validate(settings))


def test_acceptance_falls_with_depth_and_is_the_methods() -> None:
    eagle3, ngram = speculator(EAGLE3), speculator(NGRAM)
    assert eagle3.chances[0] == METHODS["eagle3"].acceptance
    assert list(eagle3.chances) == sorted(eagle3.chances, reverse=True)
    assert eagle3.expected_tokens_per_step() > 3.0 > 1.5 > ngram.expected_tokens_per_step()
    poor = speculator(EAGLE3, spec_acceptance=0.1)  # the simulator's own override
    assert poor.chances[0] == 0.1 and poor.expected_tokens_per_step() < 1.2


def test_drafts_are_counted_as_vllm_counts_them() -> None:
    drafter = speculator(EAGLE3, seed=3)
    accepted = [drafter.draw_accepted() for _ in range(4000)]
    counters = drafter.counters
    assert (counters.drafts, counters.draft_tokens) == (4000, 16000)
    assert counters.accepted_tokens == sum(accepted)
    per_position = counters.accepted_per_position or []
    assert per_position[0] == sum(1 for a in accepted if a >= 1)
    assert per_position[3] == sum(1 for a in accepted if a == 4)
    mean_length = 1 + counters.accepted_tokens / counters.drafts
    assert mean_length == pytest.approx(drafter.expected_tokens_per_step(), rel=0.03)


def test_rejected_drafts_cost_more_per_token_than_no_drafts() -> None:
    """Per output token at a batch of 8: EAGLE-3 well below no speculation, n-gram drafts that
    are mostly rejected above it (a dearer step for about one token)."""
    settings = SimulatorSettings(decode_base_s=0.008, decode_per_seq_s=0.0002)
    plain = settings.decode_base_s + 8 * settings.decode_per_seq_s
    def per_token(drafter: Speculator) -> float:
        return (plain + drafter.compute_step_s(settings, 8)) / drafter.expected_tokens_per_step()
    assert per_token(speculator(EAGLE3)) < 0.6 * plain
    assert per_token(speculator(NGRAM, spec_acceptance=0.05)) > plain


async def test_the_simulator_counts_drafts_and_streams_several_tokens_a_step(
        start_server: ServerFactory, client: aiohttp.ClientSession) -> None:
    server = await start_server(make_config({"speculative_config": EAGLE3}))
    results = await asyncio.gather(*(stream_request(client, server.base_url,
                                                     chat_body(f"q {i}", 40))
                                     for i in range(4)))
    assert all(len(r.text.split()) == 40 for r in results)
    metrics = await fetch_metrics(client, server.base_url)
    drafts = metrics["vllm:spec_decode_num_drafts_total"]
    accepted = metrics["vllm:spec_decode_num_accepted_tokens_total"]
    assert metrics["vllm:spec_decode_num_draft_tokens_total"] == 4 * drafts
    assert 0.4 < accepted / (4 * drafts) < 0.9  # the acceptance rate
    assert drafts < 4 * 39 / 2  # far fewer steps than tokens: each yields 1 + accepted
    positions = [metrics[f'{PER_POS}{{model_name="{MODEL}",position="{i}"}}'] for i in range(4)]
    assert positions == sorted(positions, reverse=True) and sum(positions) == accepted


async def test_no_speculative_counters_without_speculative_decoding(
        start_server: ServerFactory, client: aiohttp.ClientSession) -> None:
    server = await start_server(make_config())
    await stream_request(client, server.base_url, chat_body("q", 8))
    assert not any("spec_decode" in name
                   for name in await fetch_metrics(client, server.base_url))


LORA = {"enable_lora": True, "max_loras": 1,
        "lora_modules": {"sql": "/adapters/sql", "chat": "/adapters/chat"}}


async def test_adapters_are_served_under_their_names_and_others_are_vllms_404(
        start_server: ServerFactory, client: aiohttp.ClientSession) -> None:
    server = await start_server(make_config(LORA))
    async with client.get(server.base_url + "/v1/models") as response:
        cards = (await response.json())["data"]
    assert [(c["id"], c["parent"]) for c in cards] == [(MODEL, None), ("chat", MODEL),
                                                       ("sql", MODEL)]
    body = {**chat_body("q", 4), "model": "sql", "stream": False}
    async with client.post(server.base_url + "/v1/chat/completions", json=body) as response:
        answer = await response.json()
    assert response.status == 200 and answer["model"] == "sql"
    body["model"] = "nope"
    async with client.post(server.base_url + "/v1/chat/completions", json=body) as response:
        error = await response.json()
    assert response.status == 404
    assert error["error"]["message"] == "The model `nope` does not exist."


async def test_one_slot_for_two_adapters_loads_them_again_and_again(
        start_server: ServerFactory, client: aiohttp.ClientSession) -> None:
    """Requests for sql and chat in turn: with two slots each adapter is loaded once and stays;
    with one, each request evicts the other adapter and loads its own."""
    for slots, loads in ((2, 2.0), (1, 8.0)):
        server = await start_server(make_config({**LORA, "max_loras": slots}))
        for i in range(8):
            body = {**chat_body(f"q {i}", 4), "model": ("sql", "chat")[i % 2]}
            async with client.post(server.base_url + "/v1/chat/completions",
                                   json=body) as response:
                assert response.status == 200
                await response.read()
        metrics = await fetch_metrics(client, server.base_url)
        assert metrics["tracker_sim:lora_loads_total"] == loads


def lora_request(adapter: str) -> SimRequest:
    _, words = plan_output(0, "p", 3, True, None)
    return SimRequest(4, (), 3, 3, words, adapter)


def test_a_request_whose_adapter_has_no_slot_waits_and_the_ones_behind_it_run() -> None:
    cache = KvCacheSpec(block_size=4, num_blocks=100, kv_bytes_per_token=1, weights_bytes=0,
                        usable_bytes=400)
    slots = LoraSlots(1, SimulatorSettings(lora_load_s=0.5, lora_s_per_adapter=0.0))
    scheduler = Scheduler(cache, max_num_seqs=8, max_num_batched_tokens=None,
                          prefix_cache=None, lora=slots)
    first, other, same = lora_request("a"), lora_request("b"), lora_request("a")
    for request in (first, other, same):
        scheduler.add(request)
    scheduler.schedule()
    assert scheduler.running == [first, same] and list(scheduler.waiting) == [other]
    assert scheduler.compute_features_step_s(SimulatorSettings()) == 0.5  # "a" loaded
    for _ in range(3):
        scheduler.finish_step()
        scheduler.schedule()
    assert scheduler.running == [other] and slots.resident == ("b",)  # "a" evicted
    assert slots.loads == 2


def test_vllms_flags_for_both_features_give_the_simulator_the_same_engine_args() -> None:
    """The launch path: a config's flags, as `vllm serve` gets them, read back by
    `python -m tracker.sim` (JSON objects for --lora-modules too, as vLLM takes them)."""
    engine = EngineArgs.model_validate({"speculative_config": EAGLE3, **LORA, "max_lora_rank": 8})
    config, _, _, unmodelled = parse_serving_config(["m", *engine.as_flags()])
    assert config.engine == engine and unmodelled == []
    as_json = ['{"name": "sql", "path": "/adapters/sql"}', "chat=/adapters/chat"]
    config, _, _, _ = parse_serving_config(["m", "--enable-lora", "--lora-modules", *as_json])
    assert config.engine.lora_modules == {"sql": "/adapters/sql", "chat": "/adapters/chat"}
