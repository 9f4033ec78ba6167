"""Server telemetry: the target's Prometheus ``/metrics`` before, during and after a workload.

"Before" is once the workload's warm-up has ended (the load generator's ``on_warmed``), so the
counters' deltas are the measured requests' alone: ``request_success`` equals the requests that
succeeded, not those plus the warm-up.

The exposition text is parsed with ``prometheus_client``'s parser. vLLM's names are read with
either prefix (``vllm:`` or the ``vllm_`` some setups expose). llama.cpp's (``llamacpp:``) and
SGLang's (``sglang:``) are read as vLLM's where they mean the same (``LLAMACPP_NAMES``,
``SGLANG_NAMES``). Every other sample is dropped. Values are summed over label sets
(``model_name``, ``finished_reason``, engines, data-parallel ranks), except fractions, which
take their max. What is kept, per workload, under vLLM's names:

- Gauges, as ``<name>_peak`` and ``<name>_mean`` over the scrapes taken while it ran (the final
  one included): ``kv_cache_usage`` (0..1, from ``kv_cache_usage_perc`` or the deprecated
  ``gpu_cache_usage_perc``), ``num_requests_running``, ``num_requests_waiting``, and the
  simulator's ``tracker_sim:gpu_memory_used_bytes`` as ``gpu_memory_used_bytes`` (its simulated
  GPU's memory, read as the target's GPU memory by ``tracker.metrics.compute_gpu_memory``).
- Counters, as the delta from the scrape before to the scrape after (a labelled counter that
  appears during the workload counts from 0): ``num_preemptions``,
  ``prompt_tokens``, ``prompt_tokens_cached``, ``generation_tokens``, ``request_success``,
  ``prefix_cache_queries``, ``prefix_cache_hits`` (also the older ``gpu_prefix_cache_*`` names).
- ``prefix_cache_hit_rate``: the share of prompt tokens served from the prefix cache over the
  workload, from counter deltas (``compute_hit_rate``). Only a server with no such counters
  (vLLM V0, an older SGLang) gets its hit-rate gauge's mean over the scrapes instead. With
  neither, it is absent.
- The server's own latency histograms as means over the workload (Δsum / Δcount):
  ``server_ttft_mean_s``, ``server_tpot_mean_s``, ``server_itl_mean_s``, ``server_e2el_mean_s``,
  ``server_queue_time_mean_s``, ``server_prefill_time_mean_s``, ``server_decode_time_mean_s``.
- Speculative decoding, where the server drafts: vLLM's ``spec_decode_*`` counters' deltas and
  the acceptance rate, mean acceptance length and per-position rates they give
  (``tracker.telemetry.spec_decode``).

A target without ``/metrics`` (404, refused, none of these names declared) is "not measured",
never an error. So is one whose kept lines do not parse (the reason quotes the parser).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from tracker.load.generator import Endpoint
from tracker.redaction import redact_one_line
from tracker.results import ServerTelemetry
from tracker.telemetry import spec_decode

DEFAULT_SCRAPE_INTERVAL_S = 0.5
SCRAPE_TIMEOUT_S = 5.0

GAUGES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage": ("kv_cache_usage_perc", "gpu_cache_usage_perc"),
    "num_requests_running": ("num_requests_running",),
    "num_requests_waiting": ("num_requests_waiting",),
    "gpu_memory_used_bytes": ("sim_gpu_memory_used_bytes",),  # the simulator's (SIM_NAMES)
}
COUNTERS: dict[str, tuple[str, ...]] = {
    "num_preemptions": ("num_preemptions_total", "num_preemptions"),
    "prompt_tokens": ("prompt_tokens_total",),
    "prompt_tokens_cached": ("prompt_tokens_cached_total",),
    "generation_tokens": ("generation_tokens_total",),
    "request_success": ("request_success_total",),
    "prefix_cache_queries": ("prefix_cache_queries_total", "gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("prefix_cache_hits_total", "gpu_prefix_cache_hits_total"),
    **spec_decode.COUNTERS,
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
HIT_RATE_GAUGE = "gpu_prefix_cache_hit_rate"  # vLLM V0's gauge (0..1); SGLang's cache_hit_rate
# (hits, queries) counter deltas whose ratio is the hit rate, the first pair measured wins:
# vLLM's prefix-cache counters, then cached / all prompt tokens (vLLM, llama.cpp, SGLang)
HIT_RATE_COUNTERS = (("prefix_cache_hits", "prefix_cache_queries"),
                     ("prompt_tokens_cached", "prompt_tokens"))
_MAX_AGGREGATED = ("_perc", "hit_rate")  # fractions are not summed over label sets

_VLLM_NAMES: dict[str, tuple[str, ...]] = {name: (name,) for name in (
    *(n for names in (*GAUGES.values(), *COUNTERS.values()) for n in names),
    *(f"{n}_{part}" for names in HISTOGRAMS.values() for n in names for part in ("sum", "count")),
    HIT_RATE_GAUGE, *spec_decode.PER_POSITION_NAMES)}
# llama-server: no KV-usage gauge (the older kv_cache_usage_ratio is read where it exists), and
# its prompt_tokens_total leaves the cached tokens out, where vLLM's counts every prompt token
LLAMACPP_NAMES: dict[str, tuple[str, ...]] = {
    "requests_processing": ("num_requests_running",),
    "requests_deferred": ("num_requests_waiting",),
    "kv_cache_usage_ratio": ("kv_cache_usage_perc",),
    "tokens_predicted_total": ("generation_tokens_total",),
    "prompt_tokens_total": ("prompt_tokens_total",),
    "prompt_tokens_cached_total": ("prompt_tokens_cached_total", "prompt_tokens_total"),
}
SGLANG_NAMES: dict[str, tuple[str, ...]] = {
    "num_running_reqs": ("num_requests_running",),
    "num_queue_reqs": ("num_requests_waiting",),
    "token_usage": ("kv_cache_usage_perc",),
    "num_retracted_requests_total": ("num_preemptions_total",),
    "prompt_tokens_total": ("prompt_tokens_total",),
    "cached_tokens_total": ("prompt_tokens_cached_total",),
    "generation_tokens_total": ("generation_tokens_total",),
    "cache_hit_rate": (HIT_RATE_GAUGE,),
    **{f"{name}_{part}": (f"{vllm}_{part}",) for name, vllm in (
        ("time_to_first_token_seconds", "time_to_first_token_seconds"),
        ("inter_token_latency_seconds", "inter_token_latency_seconds"),
        ("e2e_request_latency_seconds", "e2e_request_latency_seconds"),
        ("queue_time_seconds", "request_queue_time_seconds")) for part in ("sum", "count")},
}
# The simulator's own: its simulated GPU's memory (no NVML sees it), read as a gauge
SIM_NAMES: dict[str, tuple[str, ...]] = {"gpu_memory_used_bytes": ("sim_gpu_memory_used_bytes",)}
ENGINE_NAMES: dict[str, Mapping[str, tuple[str, ...]]] = {
    "vllm:": _VLLM_NAMES, "vllm_": _VLLM_NAMES, "llamacpp:": LLAMACPP_NAMES,
    "sglang:": SGLANG_NAMES, "tracker_sim:": SIM_NAMES,
}


class ScrapeError(Exception):
    pass


def _vllm_names(sample_name: str) -> tuple[str, ...]:
    """The vLLM names (without the prefix) a sample counts towards, or () for one not kept."""
    for prefix, names in ENGINE_NAMES.items():
        if sample_name.startswith(prefix):
            return names.get(sample_name[len(prefix):], ())
    return ()


def _sample_name(line: str) -> str:
    end = len(line)
    for stop in ("{", " ", "\t"):
        found = line.find(stop)
        if 0 <= found < end:
            end = found
    return line[:end]


def _kept_lines(text: str) -> str:
    """The sample lines of names that are kept: bucket lines and comments are most of a vLLM
    exposition, and leaving them out before parsing keeps a scrape's cost off the load's loop."""
    kept = [line for line in (raw.strip() for raw in text.splitlines())
            if line and not line.startswith("#") and _vllm_names(_sample_name(line))]
    return "\n".join(kept) + "\n"


def parse_prometheus_text(text: str) -> dict[str, float]:
    """The kept samples under vLLM's names without the prefix, aggregated over label sets.

    Raises ``ScrapeError`` naming the parser's complaint when a kept line is not the Prometheus
    text format."""
    values: dict[str, float] = {}
    try:
        samples = [s for family in text_string_to_metric_families(_kept_lines(text))
                   for s in family.samples]
    except (ValueError, IndexError) as exc:
        raise ScrapeError(f"is not the Prometheus text format ({type(exc).__name__}: "
                          f"{redact_one_line(str(exc), 160)})") from None
    for sample in samples:
        value = float(sample.value)
        if not math.isfinite(value):
            continue
        for vllm_name in _vllm_names(sample.name):
            name = spec_decode.compute_sample_key(vllm_name, sample.labels)
            if name is None:
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
    if start is None and end is not None:
        start = 0.0  # a labelled counter appears at its first count: before it, it counted 0
    if start is None or end is None or end < start:  # never exposed, or the server restarted
        return None
    return end - start


def compute_hit_rate(counters: Mapping[str, float]) -> float | None:
    """Prefix-cache hits / queries from counter deltas (``HIT_RATE_COUNTERS``), or None when no
    pair was measured or nothing was queried."""
    for hits_key, queries_key in HIT_RATE_COUNTERS:
        hits, queries = counters.get(hits_key), counters.get(queries_key)
        if hits is not None and queries:
            return hits / queries
    return None


def compute_server_values(before: Mapping[str, float], during: Sequence[Mapping[str, float]],
                          after: Mapping[str, float]) -> dict[str, float]:
    """The workload's summary from its scrapes (pure). A metric never exposed is absent."""
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
    values.update(spec_decode.compute_position_deltas(before, after))
    values.update(spec_decode.compute_acceptance(values))
    rate = compute_hit_rate(values)
    if rate is None:
        rates = [s[HIT_RATE_GAUGE] for s in window if HIT_RATE_GAUGE in s]
        rate = sum(rates) / len(rates) if rates else None
    if rate is not None:
        values["prefix_cache_hit_rate"] = rate
    for key, names in HISTOGRAMS.items():
        total = _delta(before, after, [f"{n}_sum" for n in names])
        count = _delta(before, after, [f"{n}_count" for n in names])
        if total is not None and count:
            values[f"{key}_mean_s"] = total / count
    return values


async def _fetch_text(session: aiohttp.ClientSession, endpoint: Endpoint) -> str:
    url = endpoint.url("/metrics")
    try:
        async with session.get(url, headers=endpoint.headers,
                               timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S)) as response:
            if response.status != 200:
                hint = " (llama-server serves it with --metrics)" if response.status == 501 else ""
                raise ScrapeError(f"{url} answered HTTP {response.status}{hint}")
            return await response.text(errors="replace")
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise ScrapeError(f"{url}: {type(exc).__name__}: {exc}") from None


async def run_scrape(session: aiohttp.ClientSession, endpoint: Endpoint) -> dict[str, float]:
    url = endpoint.url("/metrics")
    text = await _fetch_text(session, endpoint)
    try:
        values = parse_prometheus_text(text)
    except ScrapeError as exc:
        raise ScrapeError(f"{url} {exc}") from None
    if not values and not _declares_engine_metrics(text):
        raise ScrapeError(f"{url} exposes no vLLM, llama.cpp or SGLang metrics (vllm:*, "
                          "llamacpp:* or sglang:* names)")
    return values


CACHE_CONFIG_INFO = ("vllm:cache_config_info", "vllm_cache_config_info")


def parse_cache_config_info(text: str) -> dict[str, str] | None:
    """The labels of vLLM's ``cache_config_info`` (its CacheConfig, every value a string:
    ``block_size``, ``kv_cache_size_tokens``, ``kv_cache_memory_bytes``, ``enable_prefix_caching``,
    ``num_gpu_blocks``, ...), the first engine's where there are several. It is None when the
    text has none or its line does not parse."""
    lines = [line for line in (raw.strip() for raw in text.splitlines())
             if line and not line.startswith("#") and _sample_name(line) in CACHE_CONFIG_INFO]
    try:
        samples = [s for family in text_string_to_metric_families("\n".join(lines) + "\n")
                   for s in family.samples]
    except (ValueError, IndexError):
        return None
    return dict(samples[0].labels) if samples else None


async def run_fetch_cache_config(endpoint: Endpoint) -> dict[str, str] | None:
    """``parse_cache_config_info`` of one scrape of the target, or None when it has none or
    ``/metrics`` does not answer (never raises for the target)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
        try:
            text = await _fetch_text(session, endpoint)
        except ScrapeError:
            return None
    return parse_cache_config_info(text)


def _declares_engine_metrics(text: str) -> bool:
    """An engine that has served nothing yet declares its metrics (``# TYPE``) with no samples."""
    types = tuple(f"# TYPE {prefix}" for prefix in ENGINE_NAMES)
    return any(line.strip().startswith(types) for line in text.splitlines())


class ServerScraper:
    """Call ``await start()`` once a workload's warm-up has ended and ``await stop()`` after
    its last request. It never raises for the target."""

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
        if self.reason is None and self.before is None:
            self.reason = "no scrape: the workload ended before its warm-up did"
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
    """A run's server summary over its measured workloads: peaks max, counters summed, the hit
    rate from the summed counters (or, without them, the workloads' rates' mean)."""
    measured = [w for w in workloads if w.measured]
    merged: dict[str, float] = {}
    sums: dict[str, float] = defaultdict(float)
    for item in measured:
        for key, value in item.values.items():
            if key.endswith("_peak"):
                merged[key] = max(merged.get(key, value), value)
            elif key in COUNTERS or spec_decode.is_position_key(key):
                sums[key] += value
    merged.update(sums)
    merged.update(spec_decode.compute_acceptance(merged))
    rate = compute_hit_rate(merged)
    rates = [w.values["prefix_cache_hit_rate"] for w in measured
             if "prefix_cache_hit_rate" in w.values]
    if rate is None and rates:
        rate = sum(rates) / len(rates)
    if rate is not None:
        merged["prefix_cache_hit_rate"] = rate
    return merged
