"""The simulator's KV-cache model: a fixed simulated GPU and model, paged blocks, a prefix cache.

Capacity follows vLLM's arithmetic: the memory the engine may use (GPU bytes x
``gpu_memory_utilization`` on each of ``tensor_parallel_size`` GPUs) less the weights, divided by
the KV bytes of one token (2 for K and V x layers x kv heads x head dim x dtype bytes), in blocks
of ``block_size`` tokens. The pool is allocated at start, so each GPU's memory is its share of
the weights and the pool whatever the load (``gpu_memory_used_bytes``). The prefix cache
remembers the chained hashes of full prompt blocks it has computed (least recently used first
out), so a repeated prefix costs no prefill.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from tracker.errors import MeasurementError
from tracker.inputs.configs import EngineArgs, SimulatorSettings
from tracker.metrics import GIB

GPU_MEMORY_BYTES = 80 * GIB  # one simulated 80 GiB accelerator (SimulatorSettings.gpu_memory_gib)
MODEL_LAYERS = 32  # the attention shape of Llama-3-8B; the size comes from model_params_b
MODEL_KV_HEADS = 8
MODEL_HEAD_DIM = 128
MODEL_WEIGHTS_BYTES = 16 * GIB  # an 8B-parameter model in 16-bit weights

DEFAULT_BLOCK_SIZE = 16
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
DEFAULT_MAX_MODEL_LEN = 4096
WATERMARK_FRACTION = 0.01  # blocks kept free when admitting, as vLLM does

_FOUR_BIT_QUANTIZATIONS = frozenset(
    {"awq", "awq_marlin", "gptq", "gptq_marlin", "marlin", "bitsandbytes", "gguf"}
)


@dataclass(frozen=True, slots=True)
class KvCacheSpec:
    block_size: int
    num_blocks: int
    kv_bytes_per_token: int
    weights_bytes: int
    usable_bytes: int
    unquantized_weights_bytes: int = 0  # the same model in 16-bit weights (0: not known)
    gpus: int = 1  # tensor_parallel_size: the weights and the KV pool are split over them

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def block_bytes(self) -> int:
        return self.block_size * self.kv_bytes_per_token

    @property
    def capacity_bytes(self) -> int:
        return self.num_blocks * self.block_bytes

    @property
    def gpu_memory_used_bytes(self) -> int:
        """What each simulated GPU holds from the start, as NVML would read it on vLLM: its
        share of the weights and of the whole KV pool (allocated at start, whatever the load)."""
        return -(-(self.weights_bytes + self.capacity_bytes) // self.gpus)

    @property
    def weights_fraction(self) -> float:
        """Weights read per decode step, relative to the 16-bit model (AWQ: about 0.3)."""
        if self.unquantized_weights_bytes <= 0:
            return 1.0
        return self.weights_bytes / self.unquantized_weights_bytes

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)


def compute_unquantized_weights_bytes(settings: SimulatorSettings | None) -> int:
    """16-bit weights: 2 GiB per billion parameters (the 8B default: 16 GiB)."""
    if settings is None:
        return MODEL_WEIGHTS_BYTES
    return int(settings.model_params_b * 2 * GIB)


def compute_weights_bytes(engine: EngineArgs, settings: SimulatorSettings | None = None) -> int:
    """Weights of the simulated model: 4-bit schemes keep ~30 %, other quantizations half."""
    scale = 1.0
    if engine.dtype in ("float", "float32"):
        scale = 2.0
    if engine.quantization in _FOUR_BIT_QUANTIZATIONS:
        scale = 0.3
    elif engine.quantization is not None:
        scale = 0.5
    return int(compute_unquantized_weights_bytes(settings) * scale)


def compute_kv_bytes_per_token(engine: EngineArgs) -> int:
    dtype_bytes = 2
    if engine.kv_cache_dtype is not None and engine.kv_cache_dtype.startswith("fp8"):
        dtype_bytes = 1
    elif engine.dtype in ("float", "float32"):
        dtype_bytes = 4
    return 2 * MODEL_LAYERS * MODEL_KV_HEADS * MODEL_HEAD_DIM * dtype_bytes


def compute_kv_cache_spec(
    engine: EngineArgs, settings: SimulatorSettings | None = None
) -> KvCacheSpec:
    """The KV cache a vLLM engine would get for these args on the simulated GPU(s).

    Raises ``MeasurementError`` where vLLM would refuse to start: no memory left for the cache, or
    a cache too small for one sequence of ``max_model_len`` tokens.
    """
    block_size = engine.block_size or DEFAULT_BLOCK_SIZE
    utilization = engine.gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION
    gpus = engine.tensor_parallel_size or 1
    gpu_bytes = GPU_MEMORY_BYTES if settings is None else int(settings.gpu_memory_gib * GIB)
    usable_bytes = int(gpu_bytes * utilization) * gpus
    weights_bytes = compute_weights_bytes(engine, settings)
    per_token = compute_kv_bytes_per_token(engine)
    num_blocks = max(0, usable_bytes - weights_bytes) // (per_token * block_size)
    spec = KvCacheSpec(block_size, num_blocks, per_token, weights_bytes, usable_bytes,
                       compute_unquantized_weights_bytes(settings), gpus)
    _check_fits(spec, engine)
    return spec


def _check_fits(spec: KvCacheSpec, engine: EngineArgs) -> None:
    if spec.num_blocks == 0:
        raise MeasurementError(
            f"simulator: engine.gpu_memory_utilization leaves {spec.usable_bytes / GIB:.1f} GiB, "
            f"not enough for {spec.weights_bytes / GIB:.1f} GiB of weights and any KV cache "
            "(no available memory for the cache blocks); raise gpu_memory_utilization"
        )
    max_model_len = engine.max_model_len or DEFAULT_MAX_MODEL_LEN
    if max_model_len > spec.capacity_tokens:
        raise MeasurementError(
            f"simulator: the model's max seq len ({max_model_len}) is larger than the maximum "
            f"number of tokens that can be stored in KV cache ({spec.capacity_tokens}); raise "
            "engine.gpu_memory_utilization or lower engine.max_model_len"
        )


def compute_block_hashes(tokens: Sequence[str], block_size: int,
                         salt: str | None = None) -> tuple[int, ...]:
    """Chained hashes of the full blocks of ``tokens``: equal prefixes give equal leading hashes.
    A ``salt`` (a LoRA adapter's name: vLLM keeps each adapter's KV apart) starts another chain."""
    hashes: list[int] = []
    previous = 0 if salt is None else hash(("salt", salt))
    for start in range(0, len(tokens) - block_size + 1, block_size):
        previous = hash((previous, *tokens[start : start + block_size]))
        hashes.append(previous)
    return tuple(hashes)


class PrefixCache:
    """Block hashes whose KV has been computed, at most ``capacity_blocks``, least recent first out.

    Memory is simplified: cached blocks do not count against running requests' blocks.
    """

    def __init__(self, capacity_blocks: int) -> None:
        self._capacity_blocks = capacity_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def count_cached_blocks(self, block_hashes: Sequence[int]) -> int:
        """How many leading blocks are cached, marking them recently used."""
        hits = 0
        for block_hash in block_hashes:
            if block_hash not in self._blocks:
                break
            self._blocks.move_to_end(block_hash)
            hits += 1
        return hits

    def insert(self, block_hashes: Sequence[int]) -> None:
        for block_hash in block_hashes:
            self._blocks[block_hash] = None
            self._blocks.move_to_end(block_hash)
        while len(self._blocks) > self._capacity_blocks:
            self._blocks.popitem(last=False)
