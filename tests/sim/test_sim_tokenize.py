"""The simulator's vLLM-style /tokenize and /detokenize, over its word tokenizer."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.sim.conftest import ServerFactory
from tests.sim.sim_support import MODEL, make_config
from tracker.inputs.word_tokenizer import count_tokens


async def post(client: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with client.post(url, data=json.dumps(body).encode(),
                           headers={"Content-Type": "application/json"}) as response:
        return response.status, await response.json()


async def test_tokenize_counts_as_the_completions_usage_does_and_detokenize_inverts_it(
        start_server: ServerFactory, client: aiohttp.ClientSession) -> None:
    server = await start_server(make_config({"max_model_len": 4096}))
    text = "the kernel, the cache and 42 blocks"
    status, body = await post(client, server.base_url + "/tokenize",
                              {"model": MODEL, "prompt": text})
    assert status == 200
    assert body["count"] == len(body["tokens"]) == count_tokens(text) == 8
    assert body["max_model_len"] == 4096
    assert body["tokens"][0] == body["tokens"][3]  # "the" is one id wherever it occurs
    status, back = await post(client, server.base_url + "/detokenize",
                              {"model": MODEL, "tokens": body["tokens"][:4]})
    assert (status, back) == (200, {"prompt": "the kernel , the"})


async def test_tokenize_counts_the_contents_of_chat_messages(
        start_server: ServerFactory, client: aiohttp.ClientSession) -> None:
    server = await start_server(make_config())
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "what is a cache"}]
    status, body = await post(client, server.base_url + "/tokenize",
                              {"model": MODEL, "messages": messages})
    assert (status, body["count"]) == (200, 6)


async def test_tokenize_refuses_bad_bodies_with_openai_errors(
        start_server: ServerFactory, client: aiohttp.ClientSession) -> None:
    server = await start_server(make_config())
    status, body = await post(client, server.base_url + "/tokenize", {"model": MODEL})
    assert status == 400 and body["error"]["param"] == "prompt"
    status, body = await post(client, server.base_url + "/tokenize",
                              {"model": "other", "prompt": "x"})
    assert status == 404 and body["error"]["code"] == "model_not_found"
    status, body = await post(client, server.base_url + "/detokenize",
                              {"model": MODEL, "tokens": [12345]})
    assert status == 400 and "unknown token id 12345" in body["error"]["message"]
    status, body = await post(client, server.base_url + "/detokenize",
                              {"model": MODEL, "tokens": "1 2"})
    assert status == 400 and body["error"]["param"] == "tokens"
