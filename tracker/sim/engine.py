"""The simulator's engine: one asyncio task runs continuous-batching steps on a time model.

A step costs ``prefill_s_per_token`` per uncached prompt token admitted in it, plus a decode
time that is memory-bound: ``decode_base_s`` (the 16-bit model at batch one), of which the
``decode_weights_share`` spent reading weights scales with the weights' size (AWQ reads ~30 %),
plus ``decode_per_seq_s`` per running sequence, plus ``decode_s_per_kv_gib`` per GiB of KV the
step reads (every running request's context). That is times a seeded jitter per step and a seeded
factor per engine: its ``run_ordinal`` picks the draw, so repeated runs that number themselves
differ a little, reproducibly (nothing is counted process-wide, so a run's factor never depends
on which engines came before it in the process). Static batching (``batching: static``) reserves
``max_model_len`` of KV per sequence and admits a new batch only when the last has drained. Steps
are scheduled on absolute times (each starts where the previous one was due to end), so lateness
of the event loop does not accumulate. With no work, the task waits on an event rather than
polling. No request sleeps on its own: every streamed token appears when the step that produced
it ends. Speculative decoding (``tracker.sim.speculative``) and LoRA adapters
(``tracker.sim.lora``) add their cost to the step they act in.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from tracker.inputs.configs import ServingConfig, SimulatorSettings
from tracker.inputs.word_tokenizer import split_tokens
from tracker.metrics import GIB
from tracker.sim.answers import AnswerModel
from tracker.sim.batching import EngineCounters, Scheduler, SimRequest
from tracker.sim.kvcache import (
    DEFAULT_MAX_MODEL_LEN,
    KvCacheSpec,
    PrefixCache,
    compute_block_hashes,
    compute_kv_cache_spec,
)
from tracker.sim.lora import LoraSlots
from tracker.sim.sampling import StepJitter, draw_run_factor, plan_output
from tracker.sim.speculative import SpecCounters, Speculator

DEFAULT_MAX_NUM_SEQS = 256
_log = logging.getLogger(__name__)


class EngineClosedError(Exception):
    """A request arrived after the engine was closed (the server is shutting down)."""


@dataclass(frozen=True, slots=True)
class Generation:
    """What one request asks the engine for. ``prompt_parts`` are the texts whose tokens are
    cached as a prefix (message contents, or the prompt), and ``prompt_text`` seeds the output."""

    prompt_text: str
    prompt_parts: tuple[str, ...]
    prompt_tokens: int
    max_tokens: int
    temperature: float
    ignore_eos: bool
    adapter: str | None = None  # the LoRA adapter the request's model names (None: the base)


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    num_requests_running: int
    num_requests_waiting: int
    kv_cache_usage: float  # 0..1
    num_preemptions: int
    prompt_tokens: int
    generation_tokens: int
    prefix_cache_queries: int
    prefix_cache_hits: int
    successes: tuple[tuple[str, int], ...]  # (finish reason, count), sorted
    weights_bytes: int = 0
    kv_cache_capacity_bytes: int = 0
    kv_cache_used_bytes: int = 0
    kv_cache_peak_used_bytes: int = 0  # since the engine started
    gpu_memory_used_bytes: int = 0  # per simulated GPU: weights + the KV pool (from the start)
    num_gpu_blocks: int = 0
    block_size: int = 0
    spec_decode: SpecCounters | None = None  # None: no speculative decoding
    lora: LoraSnapshot | None = None  # None: no LoRA


@dataclass(frozen=True, slots=True)
class LoraSnapshot:
    max_loras: int
    running: tuple[str, ...]  # adapters of the running requests, sorted
    waiting: tuple[str, ...]  # adapters of the waiting ones
    loads: int  # adapters loaded into a slot since start


def compute_step_s(
    settings: SimulatorSettings, prefill_tokens: int, batch_size: int, jitter_factor: float,
    *, kv_read_bytes: int = 0, weights_fraction: float = 1.0, extra_s: float = 0.0,
) -> float:
    prefill_s = settings.prefill_s_per_token * prefill_tokens
    share = settings.decode_weights_share
    base_s = settings.decode_base_s * (1.0 - share + share * weights_fraction)
    decode_s = (base_s + settings.decode_per_seq_s * batch_size
                + settings.decode_s_per_kv_gib * kv_read_bytes / GIB)
    return (prefill_s + decode_s + extra_s) * jitter_factor


def _adapters_of(requests: Iterable[SimRequest]) -> tuple[str, ...]:
    return tuple(sorted({r.adapter for r in requests if r.adapter is not None}))


class Engine:
    def __init__(self, config: ServingConfig, *, run_ordinal: int = 0) -> None:
        args = config.engine
        self._settings = settings = config.simulator
        self.kv: KvCacheSpec = compute_kv_cache_spec(args, settings)
        self.max_model_len = args.max_model_len or DEFAULT_MAX_MODEL_LEN
        self.prefix_caching = bool(args.enable_prefix_caching)
        prefix_cache = PrefixCache(self.kv.num_blocks) if self.prefix_caching else None
        reserve = self.max_model_len if settings.batching == "static" else None
        spec = args.speculative_config
        self._scheduler = Scheduler(
            self.kv, args.max_num_seqs or DEFAULT_MAX_NUM_SEQS, args.max_num_batched_tokens,
            prefix_cache, reserve,
            speculator=None if spec is None else Speculator(spec, settings, run_ordinal),
            lora=LoraSlots.from_engine(args, settings),
        )
        self._jitter = StepJitter(settings.seed, settings.noise)
        self._run_factor = draw_run_factor(settings.seed, settings.run_noise, run_ordinal)
        self._ordinals = itertools.count()
        self._answers = AnswerModel.from_config(config)  # quality items (tracker.sim.answers)
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def run_factor(self) -> float:
        """The speed factor of this engine's whole run (1.0 without ``run_noise``)."""
        return self._run_factor

    def start(self) -> None:
        """Start the step task on the running loop."""
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="tracker-sim-engine")

    async def close(self) -> None:
        """Stop stepping and end every request (their handlers see finish reason "abort")."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._scheduler.abort_all()

    def submit(self, generation: Generation) -> SimRequest:
        if self._closed or self._wake is None:
            raise EngineClosedError("the simulator engine is not running")
        request = self._build_request(generation)
        self._scheduler.add(request)
        self._wake.set()
        return request

    def abort(self, request: SimRequest) -> None:
        self._scheduler.abort(request)

    def snapshot(self) -> EngineSnapshot:
        scheduler = self._scheduler
        counters: EngineCounters = scheduler.counters
        return EngineSnapshot(
            num_requests_running=len(scheduler.running),
            num_requests_waiting=len(scheduler.waiting),
            kv_cache_usage=scheduler.kv_cache_usage,
            num_preemptions=counters.preemptions,
            prompt_tokens=counters.prompt_tokens,
            generation_tokens=counters.generation_tokens,
            prefix_cache_queries=counters.prefix_cache_queries,
            prefix_cache_hits=counters.prefix_cache_hits,
            successes=tuple(sorted(counters.successes.items())),
            weights_bytes=self.kv.weights_bytes,
            kv_cache_capacity_bytes=self.kv.capacity_bytes,
            kv_cache_used_bytes=scheduler.used_blocks * self.kv.block_bytes,
            kv_cache_peak_used_bytes=scheduler.peak_used_blocks * self.kv.block_bytes,
            gpu_memory_used_bytes=self.kv.gpu_memory_used_bytes,
            num_gpu_blocks=self.kv.num_blocks,
            block_size=self.kv.block_size,
            spec_decode=None if scheduler.speculator is None
            else scheduler.speculator.snapshot(),
            lora=self._lora_snapshot(),
        )

    def _lora_snapshot(self) -> LoraSnapshot | None:
        scheduler = self._scheduler
        if scheduler.lora is None:
            return None
        return LoraSnapshot(scheduler.lora.max_loras, _adapters_of(scheduler.running),
                            _adapters_of(scheduler.waiting), scheduler.lora.loads)

    def _build_request(self, generation: Generation) -> SimRequest:
        ordinal = next(self._ordinals)
        variation = ordinal if generation.temperature > 0 else None
        output_tokens, words = self._answers.plan(
            generation.prompt_parts, generation.max_tokens, generation.ignore_eos, variation,
        ) or plan_output(
            self._settings.seed, generation.prompt_text, generation.max_tokens,
            generation.ignore_eos, variation,
        )
        block_hashes: tuple[int, ...] = ()
        if self.prefix_caching:
            tokens = [token for part in generation.prompt_parts for token in split_tokens(part)]
            block_hashes = compute_block_hashes(tokens, self.kv.block_size, generation.adapter)
        return SimRequest(
            generation.prompt_tokens, block_hashes, output_tokens, generation.max_tokens, words,
            generation.adapter,
        )

    async def _run(self) -> None:
        try:
            await self._step_forever()
        except Exception:  # the task is a job boundary: end the requests rather than hang them
            _log.exception("the simulator engine stopped")
            self._closed = True
            self._scheduler.abort_all()

    async def _step_forever(self) -> None:
        loop = asyncio.get_running_loop()
        scheduler = self._scheduler
        step_start_s = loop.time()
        while True:
            if not scheduler.has_work:
                await self._wait_for_work()
                step_start_s = loop.time()
            prefill_tokens = scheduler.schedule()
            if not scheduler.running:  # nothing fits; only new work or an abort can change that
                await self._wait_for_work()
                step_start_s = loop.time()
                continue
            step_s = compute_step_s(
                self._settings, prefill_tokens, scheduler.batch_width,
                self._jitter.next_factor() * self._run_factor,
                kv_read_bytes=scheduler.compute_kv_read_bytes(),
                weights_fraction=self.kv.weights_fraction,
                extra_s=scheduler.compute_features_step_s(self._settings),
            )
            step_end_s = step_start_s + step_s
            await asyncio.sleep(max(0.0, step_end_s - loop.time()))
            scheduler.finish_step()
            step_start_s = step_end_s

    async def _wait_for_work(self) -> None:
        assert self._wake is not None
        self._wake.clear()
        await self._wake.wait()
