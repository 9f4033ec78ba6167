"""Server telemetry: the target's Prometheus ``/metrics`` before, during and after a workload.

vLLM's names are read with either prefix (``vllm:`` or the ``vllm_`` some setups expose) and
summed over label sets (``model_name``, ``finished_reason``, engines). What is kept, per workload:

- gauges, as ``<name>_peak`` and ``<name>_mean`` over the scrapes taken while it ran (the final one
  included): ``kv_cache_usage`` (0..1; ``kv_cache_usage_perc``, or the deprecated
  ``gpu_cache_usage_perc``), ``num_requests_running``, ``num_requests_waiting``;
- counters, as the delta from the scrape before to the scrape after: ``num_preemptions``,
  ``prompt_tokens``, ``generation_tokens``, ``request_success``, ``prefix_cache_queries``,
  ``prefix_cache_hits`` (also the older ``gpu_prefix_cache_*`` names);
- ``prefix_cache_hit_rate`` = hits / queries over the workload (or the V0 gauge
  ``gpu_prefix_cache_hit_rate``'s mean);
- the server's own latency histograms as means over the workload (Δsum / Δcount):
  ``server_ttft_mean_s``, ``server_tpot_mean_s``, ``server_itl_mean_s``, ``server_e2el_mean_s``,
  ``server_queue_time_mean_s``, ``server_prefill_time_mean_s``, ``server_decode_time_mean_s``.

A target without ``/metrics`` (404, refused, no vLLM names) is "not measured", never an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

import aiohttp

from tracker.load.generator import Endpoint
from tracker.results import ServerTelemetry

DEFAULT_SCRAPE_INTERVAL_S = 0.5
SCRAPE_TIMEOUT_S = 5.0
_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\S+)?$")

GAUGES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage": ("kv_cache_usage_perc", "gpu_cache_usage_perc"),
    "num_requests_running": ("num_requests_running",),
    "num_requests_waiting": ("num_requests_waiting",),
}
COUNTERS: dict[str, tuple[str, ...]] = {
    "num_preemptions": ("num_preemptions_total", "num_preemptions"),
    "prompt_tokens": ("prompt_tokens_total",),
    "generation_tokens": ("generation_tokens_total",),
    "request_success": ("request_success_total",),
    "prefix_cache_queries": ("prefix_cache_queries_total", "gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("prefix_cache_hits_total", "gpu_prefix_cache_hits_total"),
}
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "server_ttft": ("time_to_first_token_seconds",),
    "server_tpot": ("time_per_output_token_seconds", "request_time_per_output_token_seconds"),
    "server_itl": ("inter_token_latency_seconds",),
    "server_e2el": ("e2e_request_latency_seconds",),
    "server_queue_time": ("request_queue_time_seconds",),
    "server_prefill_time": ("request_prefill_time_seconds",),
    "server_decode_time": ("request_decode_time_seconds",),
}
_MAX_AGGREGATED = ("_perc", "hit_rate")  # fractions are not summed over label sets


def _strip_prefix(name: str) -> str | None:
    for prefix in ("vllm:", "vllm_"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return None


def parse_prometheus_text(text: str) -> dict[str, float]:
    """vLLM samples by name without the prefix, aggregated over label sets; others dropped."""
    values: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        name = _strip_prefix(match.group(1)) if match else None
        if match is None or name is None or name.endswith(("_bucket", "_created")):
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        if name in values and name.endswith(_MAX_AGGREGATED):
            values[name] = max(values[name], value)
        else:
            values[name] = values.get(name, 0.0) + value
    return values


def _first(sample: Mapping[str, float], names: Sequence[str]) -> float | None:
    for name in names:
        if name in sample:
            return sample[name]
    return None


def _delta(before: Mapping[str, float], after: Mapping[str, float],
           names: Sequence[str]) -> float | None:
    start, end = _first(before, names), _first(after, names)
    if start is None or end is None or end < start:  # absent, or the server restarted
        return None
    return end - start


def compute_server_values(before: Mapping[str, float], during: Sequence[Mapping[str, float]],
                          after: Mapping[str, float]) -> dict[str, float]:
    """The workload's summary from its scrapes (pure); a metric never exposed is absent."""
    values: dict[str, float] = {}
    window = [*during, after]
    for key, names in GAUGES.items():
        seen = [v for v in (_first(sample, names) for sample in window) if v is not None]
        if seen:
            values[f"{key}_peak"] = max(seen)
            values[f"{key}_mean"] = sum(seen) / len(seen)
    for key, names in COUNTERS.items():
        delta = _delta(before, after, names)
        if delta is not None:
            values[key] = delta
    queries, hits = values.get("prefix_cache_queries"), values.get("prefix_cache_hits")
    if queries and hits is not None:
        values["prefix_cache_hit_rate"] = hits / queries
    else:
        rates = [v for v in (_first(s, ("gpu_prefix_cache_hit_rate",)) for s in window)
                 if v is not None]
        if rates:
            values["prefix_cache_hit_rate"] = sum(rates) / len(rates)
    for key, names in HISTOGRAMS.items():
        total = _delta(before, after, [f"{n}_sum" for n in names])
        count = _delta(before, after, [f"{n}_count" for n in names])
        if total is not None and count:
            values[f"{key}_mean_s"] = total / count
    return values


class ScrapeError(Exception):
    pass


async def run_scrape(session: aiohttp.ClientSession, endpoint: Endpoint) -> dict[str, float]:
    try:
        async with session.get(endpoint.url("/metrics"), headers=endpoint.headers,
                               timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S)) as response:
            if response.status != 200:
                raise ScrapeError(f"{endpoint.url('/metrics')} answered HTTP {response.status}")
            text = await response.text(errors="replace")
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise ScrapeError(f"{endpoint.url('/metrics')}: {type(exc).__name__}: {exc}") from None
    values = parse_prometheus_text(text)
    if not values:
        raise ScrapeError(f"{endpoint.url('/metrics')} exposes no vLLM metrics (vllm:* names)")
    return values


class ServerScraper:
    """``await start()`` before a workload, ``await stop()`` after; never raises for the target."""

    def __init__(self, endpoint: Endpoint, interval_s: float = DEFAULT_SCRAPE_INTERVAL_S) -> None:
        self.endpoint = endpoint
        self.interval_s = interval_s
        self.reason: str | None = None
        self.before: dict[str, float] | None = None
        self.during: list[dict[str, float]] = []
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1))
        try:
            self.before = await run_scrape(self._session, self.endpoint)
        except ScrapeError as exc:
            self.reason = f"no server metrics: {exc}"
            await self._close()
            return
        self._task = asyncio.create_task(self._loop(), name="tracker-metrics-scraper")

    async def _loop(self) -> None:
        assert self._session is not None
        while True:
            await asyncio.sleep(self.interval_s)
            with contextlib.suppress(ScrapeError):  # a missed scrape is a gap, not a failure
                self.during.append(await run_scrape(self._session, self.endpoint))

    async def stop(self, *, final_scrape: bool = True) -> ServerTelemetry:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        after: dict[str, float] | None = None
        if self.reason is None and self._session is not None and final_scrape:
            try:
                after = await run_scrape(self._session, self.endpoint)
            except ScrapeError as exc:
                self.reason = f"the scrape after the workload failed: {exc}"
        await self._close()
        if after is None and self.during:
            after = self.during.pop()
        if self.reason is not None or self.before is None or after is None:
            return ServerTelemetry(measured=False, reason=self.reason or "no scrape after the "
                                   "workload (it was cut short)")
        values = compute_server_values(self.before, self.during, after)
        return ServerTelemetry(measured=True, scrapes=len(self.during) + 2, values=values)

    async def _close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def merge_summaries(workloads: Sequence[ServerTelemetry]) -> dict[str, float]:
    """A run's server summary over its measured workloads: peaks max, counters summed."""
    measured = [w for w in workloads if w.measured]
    merged: dict[str, float] = {}
    sums: dict[str, float] = defaultdict(float)
    for item in measured:
        for key, value in item.values.items():
            if key.endswith("_peak"):
                merged[key] = max(merged.get(key, value), value)
            elif key in COUNTERS:
                sums[key] += value
    merged.update(sums)
    if sums.get("prefix_cache_queries"):
        merged["prefix_cache_hit_rate"] = sums["prefix_cache_hits"] / sums["prefix_cache_queries"]
    return merged
