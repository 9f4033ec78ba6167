"""The simulator's answer model, and its answers over the simulator's real HTTP API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tracker.inputs.configs import EngineArgs, ServingConfig
from tracker.quality import load_quality_set, score_output
from tracker.sim import SimServer
from tracker.sim.answers import (
    BASE_ERROR_RATE,
    AnswerModel,
    compute_error_rate,
    compute_rephrase_rate,
    load_answer_key,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = load_quality_set(ROOT / "baselines" / "quality" / "basic.jsonl")


def _config(seed: int = 7, **engine: Any) -> ServingConfig:
    return ServingConfig.model_validate({
        "name": "answers", "engine": engine,
        "target": {"kind": "sim", "model": "m",
                   "simulator": {"seed": seed, "prefill_s_per_token": 0.0, "decode_base_s": 0.001,
                                 "decode_per_seq_s": 0.0, "noise": 0.0}}})


def test_error_rate_grows_with_quantization_and_an_fp8_kv_cache() -> None:
    base = compute_error_rate(EngineArgs())
    assert base == BASE_ERROR_RATE
    fp8_kv = compute_error_rate(EngineArgs(kv_cache_dtype="fp8"))
    int8 = compute_error_rate(EngineArgs(quantization="fp8"))
    awq = compute_error_rate(EngineArgs(quantization="awq"))
    both = compute_error_rate(EngineArgs(quantization="awq", kv_cache_dtype="fp8_e5m2"))
    assert base < int8 < awq < both and base < fp8_kv < both
    assert compute_rephrase_rate(EngineArgs()) == 0.0
    assert compute_rephrase_rate(EngineArgs(quantization="awq")) > 0.0


def test_an_error_free_model_answers_every_shipped_item_right() -> None:
    model = AnswerModel(3, 0.0, 0.0, load_answer_key())
    for item in SHIPPED.items:
        answer = model.answer(item.prompt)
        assert answer is not None and score_output(item, answer) == 1.0, item.id


def test_a_model_that_is_always_wrong_is_wrong_on_every_item() -> None:
    model = AnswerModel(3, 1.0, 0.0, load_answer_key())
    for item in SHIPPED.items:
        answer = model.answer(item.prompt)
        assert answer is not None and score_output(item, answer) == 0.0, (item.id, answer)


def test_the_items_a_degraded_config_misses_include_every_item_the_base_misses() -> None:
    for seed in range(5):
        base = AnswerModel.from_config(_config(seed))
        awq = AnswerModel.from_config(_config(seed, quantization="awq"))
        missed = {i.id for i in SHIPPED.items if score_output(i, base.answer(i.prompt) or "") == 0}
        missed_awq = {i.id for i in SHIPPED.items
                      if score_output(i, awq.answer(i.prompt) or "") == 0}
        assert missed <= missed_awq


def test_unknown_prompts_and_ignore_eos_requests_are_left_to_the_word_model() -> None:
    model = AnswerModel.from_config(_config())
    assert model.answer("What is the airspeed of a swallow?") is None
    assert model.plan([SHIPPED.items[0].prompt], 8, True, None) is None
    planned = model.plan(["system text", SHIPPED.items[0].prompt], 8, False, None)
    assert planned is not None and planned[0] >= 1


async def _ask(session: aiohttp.ClientSession, base_url: str, prompt: str,
               stream: bool = False, max_tokens: int = 32) -> str:
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    async with session.post(base_url + "/v1/chat/completions", data=json.dumps(body)) as response:
        assert response.status == 200
        if not stream:
            return str((await response.json())["choices"][0]["message"]["content"])
        text = ""
        async for line in response.content:
            data = line.decode().strip().removeprefix("data:").strip()
            if data and data != "[DONE]":
                for choice in json.loads(data).get("choices", []):
                    text += choice.get("delta", {}).get("content") or ""
        return text


async def test_the_simulator_answers_quality_prompts_over_http() -> None:
    json_item = next(i for i in SHIPPED.items if i.scorer == "json")
    async with SimServer(_config(seed=11)) as server, aiohttp.ClientSession() as session:
        model = AnswerModel.from_config(_config(seed=11))
        for item in (SHIPPED.items[0], json_item):
            whole = await _ask(session, server.base_url, item.prompt)
            streamed = await _ask(session, server.base_url, item.prompt, stream=True)
            assert whole == streamed == model.answer(item.prompt)
        truncated = await _ask(session, server.base_url, json_item.prompt, max_tokens=1)
        assert score_output(json_item, truncated) == 0.0  # cut by max_tokens, as a real model
        other = await _ask(session, server.base_url, "Tell me about caches.", max_tokens=5)
        assert 1 <= len(other.split()) <= 5  # the usual vocabulary words, not an answer
        assert model.answer("Tell me about caches.") is None


@pytest.mark.parametrize("seed", [0, 1])
def test_answers_at_temperature_zero_repeat_exactly(seed: int) -> None:
    a = AnswerModel.from_config(_config(seed, quantization="awq"))
    b = AnswerModel.from_config(_config(seed, quantization="awq"))
    assert [a.answer(i.prompt) for i in SHIPPED.items] == [b.answer(i.prompt) for i in SHIPPED.items]
