"""The simulator's time model seen from a real client: prefill, batching, queueing, caching.

Timings are small (milliseconds) and noise-free, and margins generous: these tests check that
each mechanism moves latency the right way by about the modelled amount, not benchmark speed.
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from tests.sim.conftest import ServerFactory
from tests.sim.sim_support import (
    chat_body,
    fetch_metrics,
    make_config,
    stream_request,
    wait_for_metric,
)


async def test_ttft_grows_with_input_tokens(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config(prefill_s_per_token=2e-5, decode_base_s=0.002))
    short = await stream_request(client, server.base_url, chat_body("word " * 100, 2))
    long = await stream_request(client, server.base_url, chat_body("word " * 3000, 2))
    # modelled: 2.9e3 tokens x 2e-5 s = 58 ms more prefill
    assert 0.035 < long.ttft_s - short.ttft_s < 0.2
    assert short.ttft_s < 0.03


async def test_decode_step_time_grows_with_batch_size(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    config = make_config(decode_base_s=0.002, decode_per_seq_s=0.0005)
    server = await start_server(config)
    alone = await stream_request(client, server.base_url, chat_body("hi", 30))
    batch = await asyncio.gather(
        *(stream_request(client, server.base_url, chat_body(f"hi {i}", 30)) for i in range(32))
    )
    mean_batch_itl_s = sum(r.mean_itl_s for r in batch) / len(batch)
    assert alone.mean_itl_s == pytest.approx(0.0025, rel=0.4)  # 2 ms + 1 x 0.5 ms
    assert mean_batch_itl_s == pytest.approx(0.018, rel=0.3)  # 2 ms + 32 x 0.5 ms
    assert mean_batch_itl_s > 3 * alone.mean_itl_s


async def test_steps_run_on_absolute_times_so_lateness_does_not_accumulate(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config(decode_base_s=0.002))
    result = await stream_request(client, server.base_url, chat_body("hi", 200))
    # 200 steps of 2 ms; a sleep per step that overshoots by ~1 ms would take 0.6 s
    assert result.content_times_s[-1] - result.sent_s == pytest.approx(0.4, rel=0.1)


async def test_requests_beyond_max_num_seqs_wait_for_a_free_slot(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config({"max_num_seqs": 2}, decode_base_s=0.005))
    tasks = [asyncio.create_task(stream_request(client, server.base_url, chat_body(f"q{i}", 10)))
             for i in range(4)]
    metrics = await wait_for_metric(client, server.base_url, "vllm:num_requests_waiting", 2)
    results = sorted(await asyncio.gather(*tasks), key=lambda r: r.content_times_s[0])
    assert (metrics["vllm:num_requests_running"], metrics["vllm:num_requests_waiting"]) == (2, 2)
    first_pair_end_s = max(r.content_times_s[-1] for r in results[:2])
    second_pair_start_s = min(r.content_times_s[0] for r in results[2:])
    assert second_pair_start_s > first_pair_end_s
    assert min(r.ttft_s for r in results[2:]) > 0.045  # waited ~10 steps of 5 ms
    # ... beyond the first pair's own wait (which a loaded machine stretches for both pairs)
    assert min(r.ttft_s for r in results[2:]) - max(r.ttft_s for r in results[:2]) > 0.03


@pytest.mark.parametrize("caching", [True, False])
async def test_prefix_caching_lowers_ttft_of_a_repeated_system_prompt(
    start_server: ServerFactory, client: aiohttp.ClientSession, caching: bool
) -> None:
    config = make_config({"enable_prefix_caching": caching}, prefill_s_per_token=2e-5,
                         decode_base_s=0.002)
    server = await start_server(config)
    system = {"role": "system", "content": "steady " * 2000}

    def body(question: str) -> dict[str, object]:
        return {"messages": [system, {"role": "user", "content": question}], "max_tokens": 2,
                "ignore_eos": True}

    first = await stream_request(client, server.base_url, body("what is a cache"))
    second = await stream_request(client, server.base_url, body("why is the sky blue"))
    metrics = await fetch_metrics(client, server.base_url)
    if caching:
        assert second.ttft_s < first.ttft_s / 3  # 40 ms of prefill saved
        assert metrics["vllm:prefix_cache_hits_total"] == 2000  # the 125 full system blocks
        assert metrics["vllm:prefix_cache_queries_total"] == 2004 + 2005
    else:
        assert second.ttft_s > first.ttft_s * 0.6
        assert metrics["vllm:prefix_cache_hits_total"] == 0
