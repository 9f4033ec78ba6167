"""What a vLLM server says about itself when it starts: ``StartupFacts``.

Two sources, and a fact either gives is kept:

- Its ``/metrics`` ``vllm:cache_config_info`` (``compute_cache_config_facts``), the same on every
  platform: KV-cache tokens (``kv_cache_size_tokens``, else ``num_gpu_blocks`` x ``block_size``),
  KV-cache bytes (``kv_cache_memory_bytes``: the CPU build sets it, a GPU build only where
  ``--kv-cache-memory-bytes`` was given), ``block_size``, ``enable_prefix_caching`` and
  ``kv_cache_max_concurrency``. Read once the server is healthy: a launched server's here
  (``fetch_startup_facts``), an attached one's by its server check (``tracker.targets.server_check``
  keeps the labels in the run's environment, and the reports read them with this function).
- A launched server's log (``parse_startup_log``), in the GPU wording ("Model loading took 14.99
  GiB memory and 36.57 seconds", "Available KV cache memory: 32.08 GiB", "GPU KV cache size:
  90,841 tokens") and the CPU build's ("Loading weights took 0.03 seconds", "Explicitly set
  (1.0/8.96) GiB for KV cache", "CPU KV cache size: 1,048,576 tokens"). Only the log states the
  weights' memory and the load time.

Where both state a fact the metrics win (exact integers, where the log rounds to 0.01 GiB). A
fact neither states is None: "not reported", never an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from tracker.load.generator import Endpoint
from tracker.metrics import GIB
from tracker.telemetry.server_metrics import run_fetch_cache_config


@dataclass(frozen=True, slots=True)
class StartupFacts:
    """What the server said about itself while starting, where ``None`` means it did not say."""

    engine_version: str | None = None
    weights_memory_bytes: int | None = None
    model_load_s: float | None = None
    kv_cache_memory_bytes: int | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    block_size: int | None = None
    prefix_caching: bool | None = None

    def merged_over(self, fallback: StartupFacts) -> StartupFacts:
        """These facts, each one missing taken from ``fallback``."""
        mine = {f.name: getattr(self, f.name) for f in fields(self)}
        return StartupFacts(**{name: getattr(fallback, name) if value is None else value
                               for name, value in mine.items()})

    def as_environment(self) -> dict[str, object]:
        return asdict(self)


_VERSION = re.compile(r"(?P<name>vLLM|tracker-sim) API server version:?\s*v?(?P<version>[\w.+-]+)")
# GPU: the whole load, weights' memory included; the CPU build says only the weights' load time
_MODEL_LOADING = re.compile(r"Model loading took\s+(?P<gib>[\d.]+)\s*GiB(?: memory)? and\s+"
                            r"(?P<s>[\d.]+)\s*s")
_WEIGHTS_LOADING = re.compile(r"Loading weights took\s+(?P<s>[\d.]+)\s*s")
_KV_MEMORY = re.compile(r"Available KV cache memory:\s*(?P<gib>[\d.]+)\s*GiB"
                        r"|(?:Explicitly|Auto) set \((?P<cpu_gib>[\d.]+)/[\d.]+\) GiB for KV cache")
_KV_TOKENS = re.compile(r"\b[A-Z]{2,}(?: \+ host)? KV cache size:\s*(?P<tokens>[\d,]+)\s*tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for\s+[\d,]+\s+tokens per request:\s*"
                          r"(?P<x>[\d.]+)\s*x")


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    found = list(pattern.finditer(text))
    return found[-1] if found else None


def parse_startup_log(text: str) -> StartupFacts:
    """The startup facts in a vLLM log. The last statement of each wins (a restart repeats them)."""
    version, loading = _last(_VERSION, text), _last(_MODEL_LOADING, text)
    weights, kv_memory = _last(_WEIGHTS_LOADING, text), _last(_KV_MEMORY, text)
    kv_tokens, concurrency = _last(_KV_TOKENS, text), _last(_CONCURRENCY, text)
    name = {"vLLM": "vllm"}.get(version["name"], version["name"]) if version else None
    load_s = loading["s"] if loading else weights["s"] if weights else None
    kv_gib = (kv_memory["gib"] or kv_memory["cpu_gib"]) if kv_memory else None
    return StartupFacts(
        engine_version=f"{name} {version['version']}" if version else None,
        weights_memory_bytes=int(float(loading["gib"]) * GIB) if loading else None,
        model_load_s=float(load_s) if load_s is not None else None,
        kv_cache_memory_bytes=int(float(kv_gib) * GIB) if kv_gib is not None else None,
        kv_cache_tokens=int(kv_tokens["tokens"].replace(",", "")) if kv_tokens else None,
        max_concurrency=float(concurrency["x"]) if concurrency else None,
    )


def _label_int(labels: Mapping[str, str], name: str) -> int | None:
    """A label's whole number, or None when absent, "None" or not a number."""
    try:
        value = int(labels.get(name, ""))
    except ValueError:
        return None
    return value if value >= 0 else None


def compute_cache_config_facts(labels: Mapping[str, str] | None) -> StartupFacts:
    """The facts in ``vllm:cache_config_info``'s labels (``parse_cache_config_info``)."""
    if labels is None:
        return StartupFacts()
    block_size = _label_int(labels, "block_size")
    tokens = _label_int(labels, "kv_cache_size_tokens")
    blocks = _label_int(labels, "num_gpu_blocks")
    if tokens is None and blocks is not None and block_size is not None:
        tokens = blocks * block_size  # vLLM before kv_cache_size_tokens, and the simulator
    prefix = {"true": True, "false": False}.get(labels.get("enable_prefix_caching", "").lower())
    try:
        concurrency: float | None = float(labels.get("kv_cache_max_concurrency", ""))
    except ValueError:
        concurrency = None
    return StartupFacts(kv_cache_memory_bytes=_label_int(labels, "kv_cache_memory_bytes") or None,
                        kv_cache_tokens=tokens,
                        max_concurrency=concurrency if concurrency and math.isfinite(concurrency)
                        else None,
                        block_size=block_size, prefix_caching=prefix)


async def fetch_startup_facts(endpoint: Endpoint) -> StartupFacts:
    """The facts a running vLLM's ``/metrics`` states (launched or attached), empty when it
    states none or does not answer."""
    return compute_cache_config_facts(await run_fetch_cache_config(endpoint))
