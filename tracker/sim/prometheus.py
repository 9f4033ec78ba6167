"""The simulator's ``/metrics``: Prometheus text under vLLM's metric names and labels, and its
own (``tracker_sim:*``): the simulated memory, which no NVML can see; the tracker reads
``tracker_sim:gpu_memory_used_bytes`` as the GPU memory of the target (``tracker.metrics``).
With speculative decoding, vLLM's ``spec_decode_*`` counters (only then, as vLLM); with LoRA,
vLLM's ``lora_requests_info`` and the simulator's count of adapter loads."""

from __future__ import annotations

import time

from tracker.sim.engine import EngineSnapshot, LoraSnapshot
from tracker.sim.speculative import SpecCounters

_GAUGES = (
    ("vllm:num_requests_running", "Number of requests in model execution batches.",
     "num_requests_running"),
    ("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
     "num_requests_waiting"),
    ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv_cache_usage"),
    ("tracker_sim:weights_memory_bytes", "Simulated GPU memory taken by the model weights.",
     "weights_bytes"),
    ("tracker_sim:kv_cache_capacity_bytes", "Simulated GPU memory of the whole KV cache.",
     "kv_cache_capacity_bytes"),
    ("tracker_sim:kv_cache_used_bytes", "KV-cache memory held by requests now.",
     "kv_cache_used_bytes"),
    ("tracker_sim:kv_cache_peak_used_bytes", "Most KV-cache memory held at once since start.",
     "kv_cache_peak_used_bytes"),
    ("tracker_sim:gpu_memory_used_bytes",
     "Simulated memory used on each GPU: its share of the weights and the KV pool.",
     "gpu_memory_used_bytes"),
)
_COUNTERS = (
    ("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.",
     "num_preemptions"),
    ("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "prompt_tokens"),
    ("vllm:generation_tokens_total", "Number of generation tokens processed.",
     "generation_tokens"),
    ("vllm:prefix_cache_queries_total",
     "Prefix cache queries, in terms of number of queried tokens.", "prefix_cache_queries"),
    ("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
     "prefix_cache_hits"),
)
_SUCCESS = "vllm:request_success_total"
_FINISH_REASONS = ("length", "stop")


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_metrics(snapshot: EngineSnapshot, model: str) -> str:
    labels = f'model_name="{_escape_label(model)}"'
    lines: list[str] = []
    for kind, table in (("gauge", _GAUGES), ("counter", _COUNTERS)):
        for name, help_text, attribute in table:
            value = float(getattr(snapshot, attribute))
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}",
                      f"{name}{{{labels}}} {value!r}"]
    lines += ["# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
              "# TYPE vllm:cache_config_info gauge",
              f'vllm:cache_config_info{{block_size="{snapshot.block_size}",'
              f'num_gpu_blocks="{snapshot.num_gpu_blocks}",{labels}}} 1.0']
    lines += [f"# HELP {_SUCCESS} Count of successfully processed requests.",
              f"# TYPE {_SUCCESS} counter"]
    successes = dict(snapshot.successes)
    for reason in sorted({*_FINISH_REASONS, *successes}):
        value = float(successes.get(reason, 0))
        lines.append(f'{_SUCCESS}{{finished_reason="{reason}",{labels}}} {value!r}')
    if snapshot.spec_decode is not None:
        lines += render_spec_decode(snapshot.spec_decode, labels)
    if snapshot.lora is not None:
        lines += render_lora(snapshot.lora, labels)
    return "\n".join(lines) + "\n"


_SPEC = (
    ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", "drafts"),
    ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", "draft_tokens"),
    ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", "accepted_tokens"),
)
_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


def render_spec_decode(counters: SpecCounters, labels: str) -> list[str]:
    """vLLM's speculative-decoding counters (``prometheus_client`` adds ``_total``)."""
    lines: list[str] = []
    for name, help_text, attribute in _SPEC:
        value = float(getattr(counters, attribute))
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter",
                  f"{name}_total{{{labels}}} {value!r}"]
    lines += [f"# HELP {_PER_POS} Accepted tokens per draft position.",
              f"# TYPE {_PER_POS} counter"]
    for position, count in enumerate(counters.accepted_per_position or ()):
        lines.append(f'{_PER_POS}_total{{{labels},position="{position}"}} {float(count)!r}')
    return lines


def render_lora(lora: LoraSnapshot, labels: str) -> list[str]:
    """vLLM's ``lora_requests_info`` (its labels say which adapters run and wait; the value is
    when it was set) and the simulator's count of adapters loaded into a slot."""
    info = (f'max_lora="{lora.max_loras}",running_lora_adapters="{",".join(lora.running)}",'
            f'waiting_lora_adapters="{",".join(lora.waiting)}"')
    return ["# HELP vllm:lora_requests_info Running stats on lora requests.",
            "# TYPE vllm:lora_requests_info gauge",
            f"vllm:lora_requests_info{{{info}}} {time.time()!r}",
            "# HELP tracker_sim:lora_loads_total LoRA adapters loaded into a GPU slot.",
            "# TYPE tracker_sim:lora_loads_total counter",
            f"tracker_sim:lora_loads_total{{{labels}}} {float(lora.loads)!r}"]
