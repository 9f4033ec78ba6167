"""llama.cpp's and SGLang's /metrics read as vLLM's names, from real local servers serving each
engine's exposition text: llama-server's as its ``to_metrics`` writes it, SGLang's (and vLLM's
``vllm_`` variant) rendered by ``prometheus_client`` as those engines do."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tests.waiting import wait_for_async
from tracker.load.generator import Endpoint
from tracker.results import ServerTelemetry
from tracker.telemetry.server_metrics import ServerScraper, merge_summaries, parse_prometheus_text


class MetricsServer:
    """``/metrics`` answers ``text`` as it is at each request; ``served`` counts the answers."""

    def __init__(self) -> None:
        self.text = ""
        self.served = 0
        self.url = ""

    async def metrics(self, _request: web.Request) -> web.Response:
        self.served += 1
        return web.Response(text=self.text, content_type="text/plain")


@pytest_asyncio.fixture
async def server() -> AsyncIterator[MetricsServer]:
    state = MetricsServer()
    app = web.Application()
    app.router.add_get("/metrics", state.metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state.url = f"http://127.0.0.1:{port}"
    yield state
    await runner.cleanup()


async def scrape_workload(server: MetricsServer, before: str, during: str,
                          after: str) -> ServerTelemetry:
    """A workload as the scraper sees it: ``before`` at start, ``during`` while it runs (two
    scrapes served at least), ``after`` at the final scrape."""
    server.text = before
    scraper = ServerScraper(Endpoint(server.url), interval_s=0.01)
    await scraper.start()
    server.text, seen = during, server.served

    async def two_scrapes() -> bool:
        return server.served >= seen + 2

    await wait_for_async(two_scrapes, 10.0, "two scrapes while the workload ran")
    server.text = after
    return await scraper.stop()


# --- llama.cpp ---------------------------------------------------------------------------------

LLAMACPP_COUNTERS = (
    ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens"),
    ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache"),
    ("prompt_seconds_total", "Total time spent processing prompts"),
    ("tokens_predicted_total", "Number of generation tokens processed"),
    ("tokens_predicted_seconds_total", "Total time spent generating tokens"),
    ("n_decode_total", "Total number of llama_decode() calls"),
)
LLAMACPP_GAUGES = (
    ("prompt_tokens_seconds", "Average prompt throughput in tokens/s"),
    ("predicted_tokens_seconds", "Average generation throughput in tokens/s"),
    ("requests_processing", "Number of requests processing"),
    ("requests_deferred", "Number of requests deferred"),
    ("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call"),
)


def llamacpp_text(values: dict[str, float]) -> str:
    """llama-server's exposition: HELP, TYPE and an unlabelled value per metric, the value as
    C++'s ``ostream << double`` writes it (6 significant digits, so 1234567 is 1.23457e+06)."""
    lines: list[str] = []
    for kind, table in (("counter", LLAMACPP_COUNTERS), ("gauge", LLAMACPP_GAUGES)):
        for name, help_text in table:
            lines += [f"# HELP llamacpp:{name} {help_text}", f"# TYPE llamacpp:{name} {kind}",
                      f"llamacpp:{name} {values.get(name, 0.0):g}"]
    return "\n".join(lines) + "\n"


async def test_llamacpp_metrics_map_to_vllm_names_and_the_hit_rate_counts_cached_tokens(
        server: MetricsServer) -> None:
    before = llamacpp_text({"prompt_tokens_total": 1000, "tokens_predicted_total": 500})
    during = llamacpp_text({"prompt_tokens_total": 1500, "prompt_tokens_cached_total": 2000,
                            "tokens_predicted_total": 800, "requests_processing": 4,
                            "requests_deferred": 2, "prompt_tokens_seconds": 900.5})
    after = llamacpp_text({"prompt_tokens_total": 1800, "prompt_tokens_cached_total": 3200,
                           "tokens_predicted_total": 1140})
    telemetry = await scrape_workload(server, before, during, after)
    assert telemetry.measured, telemetry.reason
    values = telemetry.values
    assert values["num_requests_running_peak"] == 4
    assert values["num_requests_waiting_peak"] == 2
    assert values["generation_tokens"] == 640
    # vLLM's prompt_tokens counts every prompt token; llama.cpp's leaves the cached ones out
    assert values["prompt_tokens"] == (1800 + 3200) - 1000
    assert values["prompt_tokens_cached"] == 3200
    assert values["prefix_cache_hit_rate"] == pytest.approx(3200 / 4000)
    assert "kv_cache_usage_peak" not in values  # llama-server has no KV-usage gauge: not measured
    assert "prefix_cache_queries" not in values and "request_success" not in values


async def test_llamacpp_without_reuse_reports_a_hit_rate_of_zero(server: MetricsServer) -> None:
    before = llamacpp_text({"prompt_tokens_total": 10})
    after = llamacpp_text({"prompt_tokens_total": 2010})
    telemetry = await scrape_workload(server, before, before, after)
    assert telemetry.values["prefix_cache_hit_rate"] == 0.0


def test_llamacpp_values_in_cpp_notation_are_read() -> None:
    values = parse_prometheus_text(llamacpp_text({"prompt_tokens_total": 1234567,
                                                  "prompt_tokens_cached_total": 2.5e7}))
    assert values["prompt_tokens_cached_total"] == 2.5e7
    assert values["prompt_tokens_total"] == pytest.approx(1.23457e6 + 2.5e7)


def test_a_run_pools_llamacpp_counters_into_one_hit_rate() -> None:
    a = ServerTelemetry(True, None, 3, {"prompt_tokens": 1000.0, "prompt_tokens_cached": 900.0,
                                        "prefix_cache_hit_rate": 0.9})
    b = ServerTelemetry(True, None, 3, {"prompt_tokens": 3000.0, "prompt_tokens_cached": 100.0,
                                        "prefix_cache_hit_rate": 100 / 3000})
    merged = merge_summaries([a, b])
    assert merged["prompt_tokens"] == 4000 and merged["prompt_tokens_cached"] == 1000
    assert merged["prefix_cache_hit_rate"] == pytest.approx(1000 / 4000)


# --- SGLang ------------------------------------------------------------------------------------


class SglangMetrics:
    """The SGLang names an engine registers (``sglang/srt/metrics/collector.py``), per DP rank."""

    def __init__(self, *, cached_counter: bool = True) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "dp_rank"]
        self.running = Gauge("sglang:num_running_reqs", "running", labels, registry=self.registry)
        self.queued = Gauge("sglang:num_queue_reqs", "queued", labels, registry=self.registry)
        self.usage = Gauge("sglang:token_usage", "token usage", labels, registry=self.registry)
        self.hit_rate = Gauge("sglang:cache_hit_rate", "hit rate", labels, registry=self.registry)
        self.prompt = Counter("sglang:prompt_tokens_total", "prefill tokens", labels,
                              registry=self.registry)
        self.generated = Counter("sglang:generation_tokens_total", "generated", labels,
                                 registry=self.registry)
        self.retracted = Counter("sglang:num_retracted_requests_total", "retracted", labels,
                                 registry=self.registry)
        self.cached = (Counter("sglang:cached_tokens_total", "cached prompt tokens",
                               [*labels, "cache_source"], registry=self.registry)
                       if cached_counter else None)
        self.ttft = Histogram("sglang:time_to_first_token_seconds", "ttft", labels,
                              registry=self.registry)

    def text(self) -> str:
        return generate_latest(self.registry).decode()


def _rank(metric: Gauge | Counter | Histogram, rank: int) -> Gauge | Counter | Histogram:
    return metric.labels(model_name="meta-llama/Llama-3.1-8B-Instruct", dp_rank=str(rank))


async def test_sglang_metrics_map_to_vllm_names_summed_over_ranks(server: MetricsServer) -> None:
    sglang = SglangMetrics()
    _rank(sglang.prompt, 0).inc(100)  # type: ignore[union-attr]
    before = sglang.text()
    for rank, (running, queued, usage) in enumerate(((3, 1, 0.25), (2, 4, 0.75))):
        _rank(sglang.running, rank).set(running)  # type: ignore[union-attr]
        _rank(sglang.queued, rank).set(queued)  # type: ignore[union-attr]
        _rank(sglang.usage, rank).set(usage)  # type: ignore[union-attr]
    during = sglang.text()
    for rank in (0, 1):
        _rank(sglang.running, rank).set(0)  # type: ignore[union-attr]
        _rank(sglang.queued, rank).set(0)  # type: ignore[union-attr]
        _rank(sglang.prompt, rank).inc(1000)  # type: ignore[union-attr]
        _rank(sglang.generated, rank).inc(64)  # type: ignore[union-attr]
        _rank(sglang.ttft, rank).observe(0.2)  # type: ignore[union-attr]
    assert sglang.cached is not None
    for source, tokens in (("device", 900), ("host", 300)):
        sglang.cached.labels(model_name="meta-llama/Llama-3.1-8B-Instruct", dp_rank="0",
                             cache_source=source).inc(tokens)
    _rank(sglang.retracted, 1).inc(2)  # type: ignore[union-attr]
    _rank(sglang.hit_rate, 0).set(0.99)  # type: ignore[union-attr]  # a gauge: not what counts
    telemetry = await scrape_workload(server, before, during, sglang.text())
    assert telemetry.measured, telemetry.reason
    values = telemetry.values
    assert values["num_requests_running_peak"] == 5 and values["num_requests_waiting_peak"] == 5
    assert values["kv_cache_usage_peak"] == 0.75  # a fraction: the fullest rank, not the sum
    assert values["prompt_tokens"] == 2000 and values["generation_tokens"] == 128
    assert values["prompt_tokens_cached"] == 1200  # every cache source
    assert values["num_preemptions"] == 2  # SGLang retracts where vLLM preempts
    assert values["prefix_cache_hit_rate"] == pytest.approx(1200 / 2000)  # counters, not gauge
    assert values["server_ttft_mean_s"] == pytest.approx(0.2)


async def test_an_sglang_without_the_cached_counter_reports_its_gauge(
        server: MetricsServer) -> None:
    sglang = SglangMetrics(cached_counter=False)
    before = sglang.text()
    _rank(sglang.hit_rate, 0).set(0.6)  # type: ignore[union-attr]
    _rank(sglang.prompt, 0).inc(500)  # type: ignore[union-attr]
    telemetry = await scrape_workload(server, before, sglang.text(), sglang.text())
    assert telemetry.values["prefix_cache_hit_rate"] == pytest.approx(0.6)
    assert "prompt_tokens_cached" not in telemetry.values


# --- vLLM's variants ---------------------------------------------------------------------------


def test_vllm_underscore_names_with_labels_parse_as_the_colon_ones() -> None:
    registry = CollectorRegistry()
    queries = Counter("vllm_prefix_cache_queries", "queried tokens", ["model_name", "engine"],
                      registry=registry)
    hits = Counter("vllm_prefix_cache_hits", "hit tokens", ["model_name", "engine"],
                   registry=registry)
    running = Gauge("vllm_num_requests_running", "running", ["model_name", "engine"],
                    registry=registry)
    for engine, (queried, hit) in enumerate(((400, 100), (600, 300))):
        queries.labels(model_name='org/m "quoted", {braced}', engine=str(engine)).inc(queried)
        hits.labels(model_name='org/m "quoted", {braced}', engine=str(engine)).inc(hit)
        running.labels(model_name="org/m", engine=str(engine)).set(engine + 1)
    values = parse_prometheus_text(generate_latest(registry).decode())
    assert values == {"prefix_cache_queries_total": 1000.0, "prefix_cache_hits_total": 400.0,
                      "num_requests_running": 3.0}  # the _created samples and the rest dropped


async def test_an_exposition_that_does_not_parse_is_not_measured_and_says_why(
        server: MetricsServer) -> None:
    server.text = 'vllm:num_requests_running{model_name="m} 1\n'  # the label's quote never closes
    scraper = ServerScraper(Endpoint(server.url), interval_s=0.01)
    await scraper.start()
    telemetry = await scraper.stop()
    assert not telemetry.measured and telemetry.reason is not None
    assert "/metrics is not the Prometheus text format" in telemetry.reason


async def test_a_server_with_other_names_only_is_not_measured(server: MetricsServer) -> None:
    server.text = "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12\n"
    scraper = ServerScraper(Endpoint(server.url), interval_s=0.01)
    await scraper.start()
    telemetry = await scraper.stop()
    assert not telemetry.measured and telemetry.reason is not None
    assert "no vLLM, llama.cpp or SGLang metrics" in telemetry.reason
