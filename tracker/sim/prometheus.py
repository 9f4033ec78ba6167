"""The simulator's ``/metrics``, written by ``prometheus_client``: vLLM's metric names and labels.

It also writes its own (``tracker_sim:*``): the simulated memory, which no NVML can see. The
tracker reads ``tracker_sim:gpu_memory_used_bytes`` as the GPU memory of the target
(``tracker.metrics``). With speculative decoding it writes vLLM's ``spec_decode_*`` counters
(only then, as vLLM does), and with LoRA, vLLM's ``lora_requests_info`` and the simulator's
count of adapter loads. A counter is named by its family here, and the text adds ``_total``
(``vllm:num_preemptions_total``), as vLLM's does."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from tracker.sim.engine import EngineSnapshot, LoraSnapshot
from tracker.sim.speculative import SpecCounters

_Family = type[GaugeMetricFamily] | type[CounterMetricFamily]
_GAUGE, _COUNTER = GaugeMetricFamily, CounterMetricFamily
_PER_MODEL: tuple[tuple[_Family, str, str, str], ...] = (  # (type, name, help, snapshot field)
    (_GAUGE, "vllm:num_requests_running", "Number of requests in model execution batches.",
     "num_requests_running"),
    (_GAUGE, "vllm:num_requests_waiting", "Number of requests waiting to be processed.",
     "num_requests_waiting"),
    (_GAUGE, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
     "kv_cache_usage"),
    (_GAUGE, "tracker_sim:weights_memory_bytes", "Simulated GPU memory taken by the model weights.",
     "weights_bytes"),
    (_GAUGE, "tracker_sim:kv_cache_capacity_bytes", "Simulated GPU memory of the whole KV cache.",
     "kv_cache_capacity_bytes"),
    (_GAUGE, "tracker_sim:kv_cache_used_bytes", "KV-cache memory held by requests now.",
     "kv_cache_used_bytes"),
    (_GAUGE, "tracker_sim:kv_cache_peak_used_bytes",
     "Most KV-cache memory held at once since start.", "kv_cache_peak_used_bytes"),
    (_GAUGE, "tracker_sim:gpu_memory_used_bytes",
     "Simulated memory used on each GPU: its share of the weights and the KV pool.",
     "gpu_memory_used_bytes"),
    (_COUNTER, "vllm:num_preemptions", "Cumulative number of preemptions from the engine.",
     "num_preemptions"),
    (_COUNTER, "vllm:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens"),
    (_COUNTER, "vllm:generation_tokens", "Number of generation tokens processed.",
     "generation_tokens"),
    (_COUNTER, "vllm:prefix_cache_queries",
     "Prefix cache queries, in terms of number of queried tokens.", "prefix_cache_queries"),
    (_COUNTER, "vllm:prefix_cache_hits",
     "Prefix cache hits, in terms of number of cached tokens.", "prefix_cache_hits"),
)
_SPEC = (  # counters, by SpecCounters field
    ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", "drafts"),
    ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", "draft_tokens"),
    ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", "accepted_tokens"),
)


def render_metrics(snapshot: EngineSnapshot, model: str) -> str:
    """The Prometheus text of one engine snapshot."""
    return generate_latest(_SnapshotCollector(snapshot, model)).decode()


def _family(kind: _Family, name: str, help_text: str,
            samples: list[tuple[dict[str, str], float]]) -> Metric:
    family = kind(name, help_text, labels=list(samples[0][0]) if samples else [])
    for labels, value in samples:
        family.add_metric(list(labels.values()), float(value))
    return family


@dataclass(frozen=True, slots=True)
class _SnapshotCollector:
    """One engine snapshot as metric families (a ``prometheus_client`` collector)."""

    snapshot: EngineSnapshot
    model: str

    def collect(self) -> Iterator[Metric]:
        snapshot, model = self.snapshot, {"model_name": self.model}
        for kind, name, help_text, field in _PER_MODEL:
            yield _family(kind, name, help_text, [(model, getattr(snapshot, field))])
        cache = {"block_size": str(snapshot.block_size),
                 "num_gpu_blocks": str(snapshot.num_gpu_blocks), **model}
        yield _family(_GAUGE, "vllm:cache_config_info",
                      "Information of the LLMEngine CacheConfig", [(cache, 1)])
        successes = dict(snapshot.successes)
        yield _family(_COUNTER, "vllm:request_success", "Count of successfully processed requests.",
                      [({"finished_reason": reason, **model}, successes.get(reason, 0))
                       for reason in sorted({"length", "stop", *successes})])
        if snapshot.spec_decode is not None:
            yield from _spec_decode(snapshot.spec_decode, model)
        if snapshot.lora is not None:
            yield from _lora(snapshot.lora, model)


def _spec_decode(counters: SpecCounters, model: dict[str, str]) -> Iterator[Metric]:
    """vLLM's speculative-decoding counters."""
    for name, help_text, field in _SPEC:
        yield _family(_COUNTER, name, help_text, [(model, getattr(counters, field))])
    positions = enumerate(counters.accepted_per_position or ())
    yield _family(_COUNTER, "vllm:spec_decode_num_accepted_tokens_per_pos",
                  "Accepted tokens per draft position.",
                  [({**model, "position": str(position)}, count) for position, count in positions])


def _lora(lora: LoraSnapshot, model: dict[str, str]) -> Iterator[Metric]:
    """vLLM's ``lora_requests_info`` (its labels say which adapters run and wait, and the value
    is when it was set) and the simulator's count of adapters loaded into a slot."""
    info = {"max_lora": str(lora.max_loras), "running_lora_adapters": ",".join(lora.running),
            "waiting_lora_adapters": ",".join(lora.waiting)}
    yield _family(_GAUGE, "vllm:lora_requests_info", "Running stats on lora requests.",
                  [(info, time.time())])
    yield _family(_COUNTER, "tracker_sim:lora_loads", "LoRA adapters loaded into a GPU slot.",
                  [(model, lora.loads)])
