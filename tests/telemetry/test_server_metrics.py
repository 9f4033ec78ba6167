"""Scraping Prometheus /metrics: vLLM's names and their variants, and the simulator's real endpoint."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from tracker.inputs.configs import ServingConfig
from tracker.load.generator import Endpoint
from tracker.results import ServerTelemetry
from tracker.sim import SimServer
from tracker.telemetry.server_metrics import (
    ServerScraper,
    compute_server_values,
    merge_summaries,
    parse_prometheus_text,
)

VLLM_V1 = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
vllm:num_preemptions_total{model_name="m"} 4.0
vllm:prefix_cache_queries_total{model_name="m"} 1000.0
vllm:prefix_cache_hits_total{model_name="m"} 250.0
vllm:request_success_total{finished_reason="stop",model_name="m"} 10.0
vllm:request_success_total{finished_reason="length",model_name="m"} 5.0
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 7.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 1.5
vllm:time_to_first_token_seconds_count{model_name="m"} 15.0
vllm:num_requests_waiting{model_name="m, with } and spaces"} 1.0
process_cpu_seconds_total 123.0
vllm:weird NaN
"""


def test_parser_keeps_vllm_names_summed_over_labels_and_drops_the_rest() -> None:
    values = parse_prometheus_text(VLLM_V1)
    assert values["num_requests_running"] == 5.0
    assert values["kv_cache_usage_perc"] == 0.5  # a fraction: the max over engines, not the sum
    assert values["request_success_total"] == 15.0
    assert values["num_requests_waiting"] == 1.0  # a label value with '}' and spaces
    assert values["time_to_first_token_seconds_sum"] == 1.5
    assert not any(name.endswith("_bucket") for name in values)
    assert "weird" not in values and "process_cpu_seconds_total" not in values


def test_underscore_prefix_and_deprecated_gpu_cache_name_are_read() -> None:
    before = parse_prometheus_text("vllm_gpu_cache_usage_perc 0.1\nvllm_num_preemptions_total 2\n"
                                   "vllm_gpu_prefix_cache_queries_total 100\n"
                                   "vllm_gpu_prefix_cache_hits_total 10\n")
    after = parse_prometheus_text("vllm_gpu_cache_usage_perc 0.3\nvllm_num_preemptions_total 5\n"
                                  "vllm_gpu_prefix_cache_queries_total 300\n"
                                  "vllm_gpu_prefix_cache_hits_total 110\n")
    values = compute_server_values(before, [], after)
    assert values["kv_cache_usage_peak"] == 0.3
    assert values["num_preemptions"] == 3.0
    assert values["prefix_cache_hit_rate"] == pytest.approx(100 / 200)


def test_gauges_peak_and_mean_counters_delta_histograms_mean() -> None:
    before = {"kv_cache_usage_perc": 0.0, "num_preemptions_total": 1.0,
              "time_to_first_token_seconds_sum": 1.0, "time_to_first_token_seconds_count": 10.0}
    during = [{"kv_cache_usage_perc": 0.2}, {"kv_cache_usage_perc": 0.6}]
    after = {"kv_cache_usage_perc": 0.1, "num_preemptions_total": 1.0,
             "time_to_first_token_seconds_sum": 4.0, "time_to_first_token_seconds_count": 20.0}
    values = compute_server_values(before, during, after)
    assert values["kv_cache_usage_peak"] == 0.6
    assert values["kv_cache_usage_mean"] == pytest.approx(0.3)
    assert values["num_preemptions"] == 0.0
    assert values["server_ttft_mean_s"] == pytest.approx(0.3)
    assert "prefix_cache_hit_rate" not in values  # never exposed: absent, not 0


def test_a_counter_that_went_backwards_is_not_a_delta() -> None:
    values = compute_server_values({"num_preemptions_total": 9.0}, [], {"num_preemptions_total": 2.0})
    assert "num_preemptions" not in values


def test_run_summary_takes_peaks_sums_counters_and_pools_the_hit_rate() -> None:
    a = ServerTelemetry(True, None, 3, {"kv_cache_usage_peak": 0.2, "num_preemptions": 1.0,
                                        "prefix_cache_queries": 100.0, "prefix_cache_hits": 90.0})
    b = ServerTelemetry(True, None, 3, {"kv_cache_usage_peak": 0.7, "num_preemptions": 2.0,
                                        "prefix_cache_queries": 300.0, "prefix_cache_hits": 10.0})
    skipped = ServerTelemetry(False, "no server metrics")
    merged = merge_summaries([a, b, skipped])
    assert merged["kv_cache_usage_peak"] == 0.7 and merged["num_preemptions"] == 3.0
    assert merged["prefix_cache_hit_rate"] == pytest.approx(100 / 400)


def _sim_config() -> ServingConfig:
    return ServingConfig.model_validate({
        "name": "sim-telemetry",
        "target": {"kind": "sim", "model": "sim-model",
                   "simulator": {"seed": 3, "prefill_s_per_token": 0.0, "decode_base_s": 0.002,
                                 "decode_per_seq_s": 0.0, "noise": 0.0}},
        "engine": {"max_num_seqs": 16, "enable_prefix_caching": True},
    })


@pytest_asyncio.fixture
async def sim() -> AsyncIterator[SimServer]:
    server = SimServer(_sim_config())
    await server.start()
    yield server
    await server.stop()


async def _chat(session: aiohttp.ClientSession, base_url: str, text: str, tokens: int) -> None:
    body = {"model": "sim-model", "messages": [{"role": "user", "content": text}],
            "max_tokens": tokens, "ignore_eos": True}
    async with session.post(base_url + "/v1/chat/completions", data=json.dumps(body)) as response:
        assert response.status == 200
        await response.read()


async def test_scraper_measures_the_simulators_real_metrics(sim: SimServer) -> None:
    scraper = ServerScraper(Endpoint(sim.base_url), interval_s=0.02)
    await scraper.start()
    shared = " ".join(["alpha"] * 64)
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(_chat(session, sim.base_url, f"{shared} {i}", 40) for i in range(8)))
        await _chat(session, sim.base_url, f"{shared} 0", 40)  # the same prompt: a prefix hit
    telemetry = await scraper.stop()
    assert telemetry.measured and telemetry.reason is None and telemetry.scrapes >= 3
    values = telemetry.values
    assert values["generation_tokens"] == 9 * 40
    assert values["request_success"] == 9
    assert values["num_preemptions"] == 0
    assert 0 < values["kv_cache_usage_peak"] <= 1
    assert values["num_requests_running_peak"] >= 2
    assert values["prefix_cache_queries"] > 0
    assert 0 < values["prefix_cache_hit_rate"] <= 1


async def test_a_target_without_metrics_is_not_measured() -> None:
    async def health(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/health", health)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        scraper = ServerScraper(Endpoint(f"http://127.0.0.1:{port}"), interval_s=0.05)
        await scraper.start()
        telemetry = await scraper.stop()
    finally:
        await runner.cleanup()
    assert not telemetry.measured
    assert telemetry.reason is not None and "HTTP 404" in telemetry.reason


async def test_a_target_that_is_down_is_not_measured() -> None:
    scraper = ServerScraper(Endpoint("http://127.0.0.1:9"), interval_s=0.05)
    await scraper.start()
    telemetry = await scraper.stop()
    assert not telemetry.measured and telemetry.reason is not None
    assert telemetry.reason.startswith("no server metrics: ")
