"""The vLLM versions the tracker knows, and the check of a config's engine block against the one
that will run it. One place, pure: the facts are literals, the check raises ``ConfigError``.

For each known release: every ``vllm serve`` option (``--x`` and, for a switch, ``--no-x``), the
choices of those that have them, and what its CPU build's attention backend refuses. Flags retired
since the versions the tracker's configs were first written for are listed with the release that
removed them and what replaces them, so a retired flag is named as such for any later version,
known or not. Which vLLM a config targets (the installation its launch command runs, or an
attached server's ``/version``) is found by ``tracker.targets.vllm_install``. A version the table
does not know has its flags read from its installation there.

The 0.32.0 entry was read from the installation's own argparse (``vllm serve``'s parser).
``tests/targets/test_vllm_install.py`` compares it with the installation built by
``bench/vllm_server.py`` so that it cannot drift, and
``python -m tracker.targets.vllm_install PATH/TO/bin/vllm`` prints the entry of another one.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.errors import ConfigError

if TYPE_CHECKING:
    from tracker.inputs.configs import EngineArgs, EngineFlag


@dataclass(frozen=True, slots=True)
class VllmFlags:
    """One vLLM's ``vllm serve`` options: each ``--flag`` with its choices (None: any value)."""

    version: str
    options: Mapping[str, tuple[str, ...] | None]
    cpu_block_size_multiple: int | None = None  # the CPU build's attention backend needs this

    def has(self, flag: str) -> bool:
        return flag in self.options


@dataclass(frozen=True, slots=True)
class Retired:
    """A flag vLLM removed: the first release without it, why, and what to do instead."""

    removed_in: str
    why: str
    fix: str


@dataclass(frozen=True, slots=True)
class VllmTarget:
    """The vLLM a config will run on: its version as its installation or server states it
    (``0.32.0+cpu``), where that was read, and its flags when known (None when neither in the
    table nor read from the installation, and then only retired flags are checked)."""

    version: str
    source: str  # e.g. "the installation launch.command runs: /opt/vllm/bin/vllm"
    flags: VllmFlags | None = None

    @property
    def on_cpu(self) -> bool:
        """The CPU build (``vllm-…+cpu``): vLLM's own platform check reads the same label."""
        return "cpu" in self.version.partition("+")[2]

    def describe(self) -> str:
        return f"vLLM {self.version} ({self.source})"


_RELEASE = re.compile(r"^v?(\d+(?:\.\d+)*)")


def parse_release(version: str) -> tuple[int, ...] | None:
    """The release numbers: ``0.32.0+cpu`` → (0, 32, 0), or None for text that is not a version."""
    match = _RELEASE.match(version.strip())
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def public_version(version: str) -> str:
    """The version without its local label: ``0.32.0+cpu`` → ``0.32.0``."""
    return version.strip().removeprefix("v").partition("+")[0]


# --- the table ---------------------------------------------------------------------------------

RETIRED: Mapping[str, Retired] = {
    "swap_space": Retired(
        "0.18.0", "the V1 engine never swapped KV blocks to CPU memory",
        "remove it (vLLM 0.32 offloads the KV cache to CPU memory with extra_args: "
        "{kv_offloading_size: GIB})"),
}

# Every `vllm serve` option (a switch's --no- form too): those that take any value, then those
# with choices; printed by `python -m tracker.targets.vllm_install PATH/TO/bin/vllm`.
# vLLM 0.32.0+cpu: 405 options, read from its argparse
_FREE_0_32 = """
--additional-config --aggregate-engine-logging --allow-credentials --allow-deprecated-quantization
--allowed-headers --allowed-local-media-path --allowed-media-domains --allowed-methods
--allowed-origins --api-key --api-server-count --async-scheduling --attention-backend
--attention-config --aux-output-config --block-size --chat-template --code-revision --cohere-format
--cohere-is-reasoning-model --compilation-config --config --config-format
--cp-kv-cache-interleave-size --cpu-distributed-timeout-seconds --cpu-offload-gb
--cpu-offload-params --cudagraph-capture-sizes --cudagraph-metrics --custom-histogram-buckets
--data-parallel-address --data-parallel-backend --data-parallel-external-lb
--data-parallel-hybrid-lb --data-parallel-multi-port-external-lb --data-parallel-rank
--data-parallel-rpc-port --data-parallel-size --data-parallel-size-local --data-parallel-start-rank
--data-parallel-supervisor-port --dbo-decode-token-threshold --dbo-prefill-token-threshold
--dcp-kv-cache-interleave-size --dcp-q-replicate --decode-context-parallel-size
--default-chat-template-kwargs --default-mm-loras --device-ids --device-memory-utilization
--diffusion-config --disable-access-log-for-endpoints --disable-cascade-attn
--disable-chunked-mm-input --disable-custom-all-reduce --disable-fastapi-docs
--disable-hybrid-kv-cache-manager --disable-log-stats --disable-nccl-for-dp-synchronization
--disable-sliding-window --disable-uvicorn-access-log --distributed-executor-backend
--distributed-timeout-seconds --download-dir --dp-supervisor-probe-failure-threshold
--dp-supervisor-probe-interval-s --dp-supervisor-probe-timeout-s --dp-sync-interval
--ec-manager-config --ec-transfer-config --elastic-ep-max-dp-size --enable-auto-tool-choice
--enable-batch-sharded-sampling --enable-chunked-prefill --enable-cumem-allocator --enable-dbo
--enable-elastic-ep --enable-ep-weight-filter --enable-eplb --enable-expert-parallel
--enable-fault-tolerance --enable-flash-late-interaction --enable-flashinfer-autotune
--enable-force-include-usage --enable-hc-sp --enable-layerwise-nvtx-tracing --enable-log-deltas
--enable-log-outputs --enable-log-requests --enable-logging-iteration-details --enable-lora
--enable-mamba-cache-stochastic-rounding --enable-mamba-shared-prefix-checkpoint
--enable-mfu-metrics --enable-mixed-moe-lora-format --enable-mm-embeds --enable-moe-shared-loras
--enable-nccl-comm-suspend --enable-offline-docs --enable-per-request-metrics
--enable-prefix-caching --enable-prompt-embeds --enable-prompt-tokens-details
--enable-request-id-headers --enable-return-routed-experts --enable-scale-out
--enable-server-load-tracking --enable-shm-tensor-arena --enable-sleep-mode --enable-ssl-refresh
--enable-tokenizer-info-endpoint --enable-tower-connector-lora --enable-trace-replay
--enforce-eager --engram-config --eplb-config --exclude-tools-when-tool-choice-none
--fail-on-environ-validation --fault-tolerance-config --fingerprint-value --fully-sharded-loras
--generation-config --gpu-memory-utilization --grpc --grpc-port --h11-max-header-count
--h11-max-incomplete-event-size --headless --hf-config-path --hf-overrides --hf-token --host
--ignore-patterns --interleave-mm-strings --io-processor-plugin --ir-op-priority
--jit-monitor-verbose --kernel-config --kv-cache-dtype-skip-layers --kv-cache-memory-bytes
--kv-cache-metrics --kv-cache-metrics-sample --kv-events-config --kv-offloading-size
--kv-sharing-fast-prefill --kv-transfer-config --language-model-only --limit-mm-per-prompt
--load-format --log-config-file --log-error-stack --logging-config --logits-processors
--long-prefill-token-threshold --long-prefill-token-threshold-adaptive --lora-modules
--lora-target-modules --mamba-backend --mamba-block-size --mamba-cache-philox-rounds --master-addr
--master-port --max-cpu-loras --max-cudagraph-capture-size --max-log-len --max-logprobs
--max-lora-cls-labels --max-loras --max-model-len --max-num-active-seqs --max-num-batched-tokens
--max-num-queued-reqs --max-num-queued-tokens --max-num-scheduled-tokens --max-num-seqs
--max-parallel-loading-workers --media-io-kwargs --middleware --mm-device-do-normalize
--mm-encoder-attn-backend --mm-encoder-fp8-scale-path --mm-encoder-fp8-scale-save-margin
--mm-encoder-fp8-scale-save-path --mm-encoder-only --mm-ipc-gpu-memory-gb --mm-processor-cache-gb
--mm-processor-kwargs --mm-shm-cache-max-object-size-mb --model --model-class-overrides
--model-impl --model-loader-extra-config --nnodes --no-allow-credentials
--no-allow-deprecated-quantization --no-async-scheduling --no-cohere-is-reasoning-model
--no-cudagraph-metrics --no-data-parallel-external-lb --no-data-parallel-hybrid-lb
--no-dcp-q-replicate --no-disable-cascade-attn --no-disable-chunked-mm-input
--no-disable-custom-all-reduce --no-disable-fastapi-docs --no-disable-hybrid-kv-cache-manager
--no-disable-nccl-for-dp-synchronization --no-disable-sliding-window
--no-disable-uvicorn-access-log --no-enable-auto-tool-choice --no-enable-batch-sharded-sampling
--no-enable-chunked-prefill --no-enable-cumem-allocator --no-enable-dbo --no-enable-elastic-ep
--no-enable-ep-weight-filter --no-enable-eplb --no-enable-expert-parallel
--no-enable-fault-tolerance --no-enable-flash-late-interaction --no-enable-flashinfer-autotune
--no-enable-force-include-usage --no-enable-hc-sp --no-enable-layerwise-nvtx-tracing
--no-enable-log-deltas --no-enable-log-outputs --no-enable-log-requests
--no-enable-logging-iteration-details --no-enable-lora --no-enable-mamba-cache-stochastic-rounding
--no-enable-mamba-shared-prefix-checkpoint --no-enable-mfu-metrics
--no-enable-mixed-moe-lora-format --no-enable-mm-embeds --no-enable-moe-shared-loras
--no-enable-nccl-comm-suspend --no-enable-offline-docs --no-enable-per-request-metrics
--no-enable-prefix-caching --no-enable-prompt-embeds --no-enable-prompt-tokens-details
--no-enable-request-id-headers --no-enable-return-routed-experts --no-enable-scale-out
--no-enable-server-load-tracking --no-enable-shm-tensor-arena --no-enable-sleep-mode
--no-enable-ssl-refresh --no-enable-tokenizer-info-endpoint --no-enable-tower-connector-lora
--no-enable-trace-replay --no-enforce-eager --no-exclude-tools-when-tool-choice-none
--no-fail-on-environ-validation --no-fully-sharded-loras --no-interleave-mm-strings
--no-jit-monitor-verbose --no-kv-cache-metrics --no-kv-sharing-fast-prefill
--no-language-model-only --no-log-error-stack --no-long-prefill-token-threshold-adaptive
--no-mm-device-do-normalize --no-mm-encoder-only --no-numa-bind --no-ray-workers-use-nsight
--no-return-sampling-mask --no-return-tokens-as-token-ids --no-scheduler-reserve-full-isl
--no-skip-mm-profiling --no-skip-tokenizer-init --no-sleep-mode-offload-cudagraph
--no-specialize-active-lora --no-swa-bounded-replay --no-tokens-only --no-trust-remote-code
--no-trust-request-chat-template --no-trust-request-mm-kwargs --no-use-fp64-gumbel
--no-use-replayssm --no-use-tqdm-on-load --node-rank --num-gpu-blocks-override --numa-bind
--numa-bind-cpus --numa-bind-nodes --offload-group-size --offload-num-in-group --offload-params
--offload-prefetch-step --optimization-level --otlp-traces-endpoint --override-generation-config
--pipeline-parallel-size --pooler-config --port --prefill-context-parallel-size
--prefill-schedule-interval --prefix-cache-retention-interval --prefix-match-unit --profiler-config
--pt-load-map-location --quantization --quantization-config --ray-workers-use-nsight
--reasoning-config --reasoning-parser --reasoning-parser-plugin --renderer-num-workers
--replayssm-buffer-len --response-role --return-sampling-mask --return-tokens-as-token-ids
--revision --root-path --safetensors-prefetch-block-size --safetensors-prefetch-num-threads
--scheduler-cls --scheduler-reserve-full-isl --seed --served-model-name
--show-hidden-metrics-for-version --shutdown-timeout --skip-mm-profiling --skip-tokenizer-init
--sleep-mode-offload-cudagraph --sleep-preserve-parameter-names --spec-model --spec-tokens
--specialize-active-lora --speculative-config --sse-keep-alive-interval --ssl-ca-certs
--ssl-cert-reqs --ssl-certfile --ssl-ciphers --ssl-keyfile --stream-interval
--structured-outputs-config --swa-bounded-replay --tensor-parallel-size --tokenizer
--tokenizer-mode --tokenizer-revision --tokens-only --tool-call-parser --tool-parser-plugin
--tool-server --trust-remote-code --trust-request-chat-template --trust-request-mm-kwargs
--ubatch-size --uds --use-fp64-gumbel --use-replayssm --use-tqdm-on-load --video-pruning-rate
--watermark --watermark-config --weight-transfer-config --worker-cls --worker-extension-cls
"""
_CHOICES_0_32: Mapping[str, tuple[str, ...]] = {
    "--all2all-backend": (
        "allgather_reducescatter", "deepep_high_throughput", "deepep_low_latency", "deepep_v2",
        "flashinfer_all2allv", "flashinfer_nvlink_one_sided", "flashinfer_nvlink_two_sided",
        "moonep", "mori_high_throughput", "mori_low_latency", "naive", "nixl_ep", "pplx",
    ),
    "--anthropic-disabled-thinking-effort": (
        "auto", "high", "low", "max", "medium", "none", "xhigh",
    ),
    "--chat-template-content-format": ("auto", "openai", "string"),
    "--collect-detailed-traces": ("all", "model", "worker", "None"),
    "--convert": ("auto", "classify", "embed", "none"),
    "--dcp-comm-backend": ("a2a", "ag_rs", "None"),
    "--dtype": ("auto", "bfloat16", "float", "float16", "float32", "half"),
    "--expert-placement-strategy": ("linear", "round_robin"),
    "--fingerprint-mode": ("custom", "full", "hash", "none"),
    "--gdn-prefill-backend": ("flashinfer", "triton", "cutedsl", "aiter_flydsl"),
    "--jit-monitor-mode": ("error", "warn"),
    "--kda-decode-backend": ("auto", "native", "flashinfer", "triton"),
    "--kda-prefill-backend": ("auto", "triton", "flashkda", "flashinfer", "fused"),
    "--kv-cache-dtype": (
        "auto", "bfloat16", "float16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
        "fp8_per_token_head", "int4_per_token_head", "int8_per_token_head", "nvfp4", "nvfp4_4over6",
        "nvfp4_ds_mla", "turboquant_3bit_nc", "turboquant_4bit_nc", "turboquant_k3v4_nc",
        "turboquant_k8v4", "ultraquant_4bit",
    ),
    "--kv-offloading-backend": ("lmcache", "native"),
    "--linear-backend": (
        "aiter", "auto", "b12x", "conch", "cutlass", "deep_gemm", "emulation", "exllama", "fbgemm",
        "flashinfer_b12x", "flashinfer_cudnn", "flashinfer_cutedsl", "flashinfer_cutlass",
        "flashinfer_trtllm", "humming", "machete", "marlin", "torch", "triton", "xpu", "xpu_woq",
    ),
    "--log-level": ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG", "NOTSET"),
    "--logprobs-mode": ("processed_logits", "processed_logprobs", "raw_logits", "raw_logprobs"),
    "--lora-dtype": ("auto", "bfloat16", "float16"),
    "--mamba-cache-dtype": ("auto", "bfloat16", "float16", "float32"),
    "--mamba-cache-mode": ("align", "none"),
    "--mamba-ssm-cache-dtype": ("auto", "bfloat16", "float16", "float32"),
    "--mamba-ssu-algorithm": ("auto", "horizontal", "simple", "vertical", "None"),
    "--max-lora-rank": ("1", "8", "16", "32", "64", "128", "256", "320", "512"),
    "--mm-encoder-attn-dtype": ("fp8", "None"),
    "--mm-encoder-tp-mode": ("data", "weights"),
    "--mm-hasher-algorithm": ("blake3", "sha256", "sha512"),
    "--mm-processor-cache-type": ("lru", "shm"),
    "--mm-processor-device": ("auto", "cpu"),
    "--mm-tensor-ipc": ("direct_rpc", "torch_shm"),
    "--moe-backend": (
        "aiter", "aiter_mega_moe", "aiter_triton_mxfp4_bf16", "auto", "b12x", "batched_triton",
        "cutlass", "deep_gemm", "deep_gemm_mega_moe", "emulation", "flashinfer_b12x",
        "flashinfer_cutedsl", "flashinfer_cutlass", "flashinfer_moe_ep_cutedsl",
        "flashinfer_moe_ep_mega_deep_gemm", "flashinfer_trtllm", "flydsl", "hpc", "humming",
        "marlin", "rdna3", "triton", "triton_unfused",
    ),
    "--offload-backend": ("auto", "prefetch", "uva"),
    "--per-request-spec-decode-metrics": ("detailed", "none", "summary"),
    "--performance-mode": ("balanced", "interactivity", "throughput"),
    "--prefix-caching-hash-algo": ("sha256", "sha256_cbor", "xxhash", "xxhash_cbor"),
    "--runner": ("auto", "draft", "generate", "pooling"),
    "--safetensors-load-strategy": ("eager", "lazy", "prefetch", "torchao", "None"),
    "--scheduling-policy": ("fcfs", "priority"),
    "--sparse-indexer-topk-backend": (
        "aiter", "auto", "cooperative", "deep_select", "flashinfer", "per_row", "persistent",
        "torch",
    ),
    "--spec-method": (
        "bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "custom_class", "deepseek_mtp", "dflash",
        "dots3_note_mtp", "draft_model", "dspark", "eagle", "eagle3", "ernie_mtp", "exaone4_5_mtp",
        "exaone_moe_mtp", "extract_hidden_states", "gemma4_mtp", "glm4_moe_lite_mtp",
        "glm4_moe_mtp", "glm5_next_mtp", "glm_ocr_mtp", "hy_v3_mtp", "hy_v4_mtp", "inkling_mtp",
        "kimi_k3_mtp", "longcat_flash_mtp", "medusa", "mimo_mtp", "mimo_v2_mtp", "minimax_m3_mtp",
        "mlp_speculator", "mtp", "nemotron_h_mtp", "ngram", "ngram_gpu", "pangu_ultra_moe_mtp",
        "qwen3_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "step3p5_mtp", "suffix", "None",
    ),
    "--tool-strict-level": ("auto", "function", "parameter"),
    "--uvicorn-log-level": ("critical", "debug", "error", "info", "trace", "warning"),
    "--video-pruning-method": ("evs", "vidcom2"),
}


def _entry(version: str, free: str, choices: Mapping[str, tuple[str, ...]],
           cpu_block_size_multiple: int | None) -> VllmFlags:
    options: dict[str, tuple[str, ...] | None] = dict.fromkeys(free.split())
    options.update(choices)
    return VllmFlags(version, options, cpu_block_size_multiple)


KNOWN: Mapping[str, VllmFlags] = {
    "0.32.0": _entry("0.32.0", _FREE_0_32, _CHOICES_0_32, cpu_block_size_multiple=32),  # measured
}
CPU_DEFAULT_BLOCK_SIZE = 128  # vLLM 0.32's CPU build, when block_size is left out

# The schema's kv_cache_dtype: what any version the tracker knows takes (the version's own list
# is checked against the vLLM that runs the config).
KV_CACHE_DTYPES: tuple[str, ...] = tuple(dict.fromkeys(
    value for flags in KNOWN.values() for value in flags.options.get("--kv-cache-dtype") or ()))
# The schema's max_lora_rank, the same way
LORA_RANKS: tuple[str, ...] = tuple(dict.fromkeys(
    value for flags in KNOWN.values() for value in flags.options.get("--max-lora-rank") or ()))


def find_known(version: str) -> VllmFlags | None:
    """The table's entry for exactly this release (a local label such as +cpu aside)."""
    return KNOWN.get(public_version(version))


# --- the check ---------------------------------------------------------------------------------

def check_engine_args(engine: EngineArgs, target: VllmTarget, path: str) -> None:
    """Refuse (``ConfigError``) a flag ``target`` does not have, a value outside its choices and
    a block size its CPU backend refuses. The message names the field, the value, the version
    and the fix."""
    for item in engine.flag_items():
        if item.flags:
            _check_flag(item, target, path)
    _check_platform(engine, target, path)
    _check_spec_method(engine, target, path)


def _check_flag(item: EngineFlag, target: VllmTarget, path: str) -> None:
    flag, where = item.flags[0], f"{path}: engine.{item.key}"
    retired = RETIRED.get(item.name)
    release = parse_release(target.version)
    if retired is not None and (target.flags is None or not target.flags.has(flag)) and \
            release is not None and release >= (parse_release(retired.removed_in) or ()):
        raise ConfigError(f"{where}: {target.describe()} has no {flag} (removed in "
                          f"{retired.removed_in}: {retired.why}; got {item.shown}); "
                          f"{retired.fix}")
    if target.flags is None:
        return
    if not target.flags.has(flag):
        close = difflib.get_close_matches(flag, list(target.flags.options), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"{where}: {target.describe()} has no {flag} (got {item.shown}){hint}; "
                          "fix the name (`vllm serve --help=all` lists that version's flags) "
                          "or remove it")
    choices = target.flags.options[flag]
    bad = [] if choices is None else [value for value in item.flags[1:] if value not in choices]
    if choices is not None and bad:
        raise ConfigError(f"{where}: {target.describe()} refuses {flag} {bad[0]}; use one of "
                          f"{', '.join(choices)}")


def _check_platform(engine: EngineArgs, target: VllmTarget, path: str) -> None:
    multiple = target.flags.cpu_block_size_multiple if target.flags is not None else None
    size = engine.block_size
    if not target.on_cpu or multiple is None or size is None or size % multiple == 0:
        return
    raise ConfigError(
        f"{path}: engine.block_size: {target.describe()} is a CPU build, whose attention backend "
        f"needs a multiple of {multiple} (got {size}); set {multiple}, {2 * multiple} or "
        f"{4 * multiple}, or leave it out for the CPU default of {CPU_DEFAULT_BLOCK_SIZE}")


def _check_spec_method(engine: EngineArgs, target: VllmTarget, path: str) -> None:
    """The speculative method is one the version has (its ``--spec-method`` choices)."""
    spec = engine.speculative_config
    choices = target.flags.options.get("--spec-method") if target.flags is not None else None
    if spec is None or choices is None or spec.method in choices:
        return
    raise ConfigError(f"{path}: engine.speculative_config.method: {target.describe()} has no "
                      f"speculative method {spec.method}; use one of "
                      f"{', '.join(c for c in choices if c != 'None')}")
