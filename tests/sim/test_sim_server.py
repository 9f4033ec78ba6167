"""The simulator's HTTP surface against a real server on an ephemeral port."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import tracker
from tests.sim.conftest import ServerFactory
from tests.sim.sim_support import (
    MODEL,
    chat_body,
    fetch_metrics,
    make_config,
    stream_request,
    wait_for_metric,
    wait_for_metrics,
)
from tracker.errors import MeasurementError
from tracker.inputs.word_tokenizer import count_tokens
from tracker.sim import SimServer, ThreadedSimServer


async def post(
    client: aiohttp.ClientSession, url: str, body: Any
) -> tuple[int, dict[str, Any], str | None]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    async with client.post(url, data=data, headers=headers) as response:
        return response.status, await response.json(), response.headers.get("x-tracker-simulated")


async def test_models_lists_the_configured_model(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config({"max_model_len": 2048}))
    async with client.get(server.base_url + "/v1/models") as response:
        body = await response.json()
        assert response.headers["x-tracker-simulated"] == "true"
    assert body["object"] == "list"
    [card] = body["data"]
    assert (card["id"], card["object"], card["owned_by"]) == (MODEL, "model", "tracker-sim")
    assert card["max_model_len"] == 2048
    assert server.base_url.startswith("http://127.0.0.1:")
    assert not server.base_url.endswith("/")


async def test_streamed_chat_sends_role_chunk_then_one_chunk_per_token(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config())
    result = await stream_request(client, server.base_url, chat_body("hello there", 8))
    assert result.status == 200
    first = result.chunks[0]
    assert first["object"] == "chat.completion.chunk"
    assert first["model"] == MODEL
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = result.content_chunks
    assert len(content) == len(result.chunks) - 1 == 8
    assert [c["choices"][0]["finish_reason"] for c in content] == [None] * 7 + ["length"]
    assert count_tokens(result.text) == 8
    assert all("usage" not in chunk for chunk in result.chunks)  # not asked for
    assert len({chunk["id"] for chunk in result.chunks}) == 1
    assert result.done


async def test_usage_chunk_comes_last_when_requested(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config())
    body = {"messages": [{"role": "system", "content": "be brief"},
                         {"role": "user", "content": "one two three, four"}],
            "max_tokens": 5, "ignore_eos": True, "stream_options": {"include_usage": True}}
    result = await stream_request(client, server.base_url, body)
    usage_chunk = result.chunks[-1]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 2 + 5, "completion_tokens": 5,
                                    "total_tokens": 12}
    assert len(result.content_chunks) == 5
    assert result.done


SYSTEM_64 = " ".join(f"w{i}" for i in range(64))  # 64 tokens: four full blocks of 16


@pytest.mark.parametrize("caching", [True, False])
async def test_a_repeated_system_prompt_is_reported_as_cached_tokens(
    start_server: ServerFactory, client: aiohttp.ClientSession, caching: bool
) -> None:
    server = await start_server(make_config({"enable_prefix_caching": caching,
                                             "block_size": 16}))
    usages = []
    for question in ("what is a river", "and a bridge over it"):
        body = {"messages": [{"role": "system", "content": SYSTEM_64},
                             {"role": "user", "content": question}],
                "max_tokens": 3, "ignore_eos": True, "stream_options": {"include_usage": True}}
        usages.append((await stream_request(client, server.base_url, body)).chunks[-1]["usage"])
    status, whole, _ = await post(client, server.base_url + "/v1/chat/completions", {
        "model": MODEL, "messages": [{"role": "system", "content": SYSTEM_64},
                                     {"role": "user", "content": "a third one"}],
        "max_tokens": 2, "ignore_eos": True})
    assert status == 200
    details = [u.get("prompt_tokens_details") for u in (*usages, whole["usage"])]
    # as vLLM with --enable-prompt-tokens-details: no details when nothing was cached
    assert details == ([None, {"cached_tokens": 64}, {"cached_tokens": 64}] if caching
                       else [None, None, None])
    assert [u["prompt_tokens"] for u in usages] == [64 + 4, 64 + 5]
    if caching:  # the counters /metrics exports agree with the usage
        metrics = await fetch_metrics(client, server.base_url)
        assert metrics["vllm:prefix_cache_hits_total"] == 128.0


async def test_completions_stream_text_chunks(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config())
    body = {"prompt": "the river and the bridge", "max_tokens": 6, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    result = await stream_request(client, server.base_url, body, chat=False)
    assert result.chunks[0]["object"] == "text_completion"
    assert "delta" not in result.chunks[0]["choices"][0]  # no role chunk: text from the start
    assert len(result.content_chunks) == 6
    assert result.content_chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert result.chunks[-1]["usage"]["prompt_tokens"] == 5
    assert result.done


async def test_non_streaming_bodies_carry_text_and_usage(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config())
    status, chat, header = await post(
        client, server.base_url + "/v1/chat/completions",
        {"model": MODEL, **chat_body("a b c", 4)},
    )
    assert (status, header) == (200, "true")
    assert chat["object"] == "chat.completion"
    message = chat["choices"][0]["message"]
    assert message["role"] == "assistant"
    assert count_tokens(message["content"]) == 4
    assert chat["choices"][0]["finish_reason"] == "length"
    assert chat["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    status, completion, _ = await post(
        client, server.base_url + "/v1/completions",
        {"model": MODEL, "prompt": "x y", "max_tokens": 3, "ignore_eos": True},
    )
    assert status == 200
    assert count_tokens(completion["choices"][0]["text"]) == 3
    assert completion["usage"]["completion_tokens"] == 3


async def test_ignore_eos_gives_exactly_max_tokens_and_eos_a_natural_length(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config())
    url = server.base_url + "/v1/chat/completions"
    exact, natural = [], []
    for index in range(12):
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"question {index}"}],
                "max_tokens": 20}
        _, reply, _ = await post(client, url, {**body, "ignore_eos": True})
        exact.append(reply["usage"]["completion_tokens"])
        _, reply, _ = await post(client, url, body)
        natural.append((reply["usage"]["completion_tokens"], reply["choices"][0]["finish_reason"]))
    assert exact == [20] * 12
    assert all(10 <= tokens <= 20 for tokens, _ in natural)
    assert any(tokens < 20 for tokens, _ in natural)
    assert all((reason == "length") == (tokens == 20) for tokens, reason in natural)


async def test_temperature_zero_repeats_the_output_and_temperature_varies_it(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config())
    url = server.base_url + "/v1/completions"

    async def texts(temperature: float) -> set[str]:
        body = {"model": MODEL, "prompt": "same prompt", "max_tokens": 12,
                "temperature": temperature}
        replies = [await post(client, url, body) for _ in range(4)]
        return {reply["choices"][0]["text"] for _, reply, _ in replies}

    assert len(await texts(0.0)) == 1
    assert len(await texts(0.8)) > 1


@pytest.mark.parametrize(
    ("body", "status", "code", "fragment"),
    [
        ({"model": "other", "messages": [{"role": "user", "content": "hi"}]}, 404,
         "model_not_found", "The model `other` does not exist."),
        ({"model": MODEL, "messages": [{"role": "user", "content": "word " * 4000}],
          "max_tokens": 200}, 400, "context_length_exceeded",
         "maximum context length is 4096 tokens. However, you requested 4200 tokens"),
        (b"{not json", 400, None, "not valid JSON"),
        (b'{"max_tokens": ' + b"9" * 5000 + b"}", 400, None, "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, 400, None, "nests too deeply"),
        ({"model": MODEL}, 400, None, "messages: required"),
        ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0},
         400, None, "max_tokens must be an integer of at least 1, got 0"),
        ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
          "max_completion_tokens": "ten"}, 400, None, "max_completion_tokens must be"),
    ],
    ids=["unknown-model", "too-long", "invalid-json", "huge-integer", "deep-nesting",
         "no-messages", "zero-max-tokens",
         "string-max-completion-tokens"],
)
async def test_bad_requests_get_openai_error_bodies(
    start_server: ServerFactory, client: aiohttp.ClientSession,
    body: Any, status: int, code: str | None, fragment: str,
) -> None:
    server = await start_server(make_config())
    got_status, reply, header = await post(client, server.base_url + "/v1/chat/completions", body)
    assert (got_status, header) == (status, "true")
    error = reply["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code
    assert fragment in error["message"]
    metrics = await fetch_metrics(client, server.base_url)
    assert metrics["vllm:prompt_tokens_total"] == 0  # nothing reached the engine


async def test_unknown_routes_and_methods_answer_like_aiohttp(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config())
    async with client.get(server.base_url + "/v1/nothing") as response:
        assert response.status == 404
        assert response.headers["x-tracker-simulated"] == "true"
    async with client.get(server.base_url + "/v1/chat/completions") as response:
        assert response.status == 405


async def test_health_and_version(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config())
    async with client.get(server.base_url + "/health") as response:
        assert response.status == 200
        assert await response.read() == b""
    async with client.get(server.base_url + "/version") as response:
        assert await response.json() == {"version": f"tracker-sim {tracker.__version__}"}


async def test_metrics_count_tokens_and_requests(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config())
    async with client.get(server.base_url + "/metrics") as response:
        assert response.content_type == "text/plain"
        text = await response.text()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
                 "vllm:request_success_total", "vllm:prefix_cache_queries_total",
                 "vllm:prefix_cache_hits_total"):
        assert f"{name}{{" in text
        assert f'model_name="{MODEL}"' in text
    for _ in range(3):
        await stream_request(client, server.base_url, chat_body("four words right here", 7))
    metrics = await fetch_metrics(client, server.base_url)
    assert metrics["vllm:prompt_tokens_total"] == 12
    assert metrics["vllm:generation_tokens_total"] == 21
    assert metrics['vllm:request_success_total{finished_reason="length"}'] == 3
    assert metrics["vllm:num_requests_running"] == 0
    assert metrics["vllm:kv_cache_usage_perc"] == 0.0
    assert metrics["vllm:num_preemptions_total"] == 0


async def test_kv_cache_usage_is_a_fraction_while_requests_run(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config(decode_base_s=0.01))
    task = asyncio.create_task(
        stream_request(client, server.base_url, chat_body("word " * 3000, 30))
    )
    metrics = await wait_for_metric(client, server.base_url, "vllm:num_requests_running", 1)
    assert metrics["vllm:num_requests_running"] == 1
    assert 0.0 < metrics["vllm:kv_cache_usage_perc"] < 0.05  # ~190 of 28672 blocks
    assert len((await task).content_chunks) == 30
    metrics = await fetch_metrics(client, server.base_url)
    assert metrics["vllm:kv_cache_usage_perc"] == 0.0


async def test_client_disconnect_mid_stream_frees_the_engine(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config(decode_base_s=0.002))
    url = server.base_url + "/v1/chat/completions"
    async with client.post(url, json={"model": MODEL, "stream": True,
                                      **chat_body("go on", 2000)}) as response:
        for _ in range(4):
            await response.content.readline()
        response.close()  # drop the connection mid-stream
    metrics = await wait_for_metric(client, server.base_url, "vllm:num_requests_running", 0)
    assert metrics["vllm:num_requests_running"] == 0
    assert metrics["vllm:generation_tokens_total"] < 2000
    assert metrics['vllm:request_success_total{finished_reason="length"}'] == 0
    result = await stream_request(client, server.base_url, chat_body("again", 5))
    assert len(result.content_chunks) == 5
    assert result.done


async def test_a_client_that_gives_up_on_a_whole_response_frees_the_engine(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config(decode_base_s=0.002))
    with pytest.raises(asyncio.TimeoutError):
        await client.post(server.base_url + "/v1/chat/completions",
                          json={"model": MODEL, **chat_body("go on", 2000)},
                          timeout=aiohttp.ClientTimeout(total=0.05))
    metrics = await wait_for_metric(client, server.base_url, "vllm:num_requests_running", 0)
    assert metrics["vllm:num_requests_running"] == 0
    assert metrics["vllm:generation_tokens_total"] < 200


async def test_a_queued_client_that_disconnects_leaves_the_queue(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config({"max_num_seqs": 1}, decode_base_s=0.002))
    running = asyncio.create_task(stream_request(client, server.base_url, chat_body("a", 300)))
    queued = asyncio.create_task(stream_request(client, server.base_url, chat_body("b", 300)))
    metrics = await wait_for_metric(client, server.base_url, "vllm:num_requests_waiting", 1)
    assert metrics["vllm:num_requests_waiting"] == 1
    queued.cancel()  # closes its connection while it waits for a slot
    metrics = await wait_for_metric(client, server.base_url, "vllm:num_requests_waiting", 0)
    assert not running.done()  # the queue emptied long before the slot would have freed
    assert metrics["vllm:num_requests_waiting"] == 0
    assert metrics["vllm:num_requests_running"] == 1
    assert len((await running).content_chunks) == 300
    metrics = await wait_for_metrics(  # idle: the dropped request is neither queued nor running
        client, server.base_url,
        lambda m: m["vllm:num_requests_running"] == m["vllm:num_requests_waiting"] == 0,
        "the engine to be idle")
    assert metrics["vllm:generation_tokens_total"] == 300  # the dropped request never ran


async def test_sim_server_is_an_async_context_manager() -> None:
    async with SimServer(make_config()) as server, aiohttp.ClientSession() as client:
        async with client.get(server.base_url + "/health") as response:
            assert response.status == 200
        base_url = server.base_url
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.base_url
    async with aiohttp.ClientSession() as client:
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.get(base_url + "/health")


async def test_stop_ends_in_flight_streams_promptly(client: aiohttp.ClientSession) -> None:
    server = SimServer(make_config(decode_base_s=0.01))
    await server.start()
    stream = asyncio.create_task(stream_request(client, server.base_url, chat_body("x", 1000)))
    await wait_for_metrics(client, server.base_url,
                           lambda m: m["vllm:generation_tokens_total"] >= 5, "tokens streaming")
    loop = asyncio.get_running_loop()
    started_s = loop.time()
    await server.stop()
    assert loop.time() - started_s < 1.0
    result = await stream
    assert 0 < len(result.content_chunks) < 1000
    assert not result.done  # cut short, so no [DONE]
    await server.stop()  # idempotent


async def test_threaded_server_serves_from_its_own_thread_and_stops() -> None:
    server = ThreadedSimServer(make_config())
    with server:
        base_url = server.base_url
        async with aiohttp.ClientSession() as client:
            result = await stream_request(client, base_url, chat_body("hi", 3))
        assert len(result.content_chunks) == 3
    server.stop()  # idempotent
    async with aiohttp.ClientSession() as client:
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.get(base_url + "/health")


def test_threaded_server_reports_a_port_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(MeasurementError, match=f"cannot listen on 127.0.0.1:{port}"):
            ThreadedSimServer(make_config(), port=port).start()


def test_threaded_server_refuses_a_config_vllm_could_not_start() -> None:
    config = make_config({"gpu_memory_utilization": 0.1})
    with pytest.raises(MeasurementError, match="raise gpu_memory_utilization"):
        ThreadedSimServer(config).start()


def test_serve_forever_stops_cleanly_on_sigterm() -> None:
    script = textwrap.dedent("""
        from tests.sim.sim_support import make_config
        from tracker.sim import serve_forever
        serve_forever(make_config(), "127.0.0.1", 0, on_ready=lambda url: print(url, flush=True))
        print("stopped", flush=True)
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                          cwd=Path(__file__).parents[2]) as process:
        try:
            assert process.stdout is not None
            base_url = process.stdout.readline().strip()
            assert base_url.startswith("http://127.0.0.1:")
            with socket.create_connection(("127.0.0.1", int(base_url.rsplit(":", 1)[1])), 5):
                pass
            process.send_signal(signal.SIGTERM)
            assert process.wait(10) == 0
            assert process.stdout.read().strip() == "stopped"
        finally:
            if process.poll() is None:
                process.kill()
