"""Continuous-batching scheduling of the simulator, without clocks: what runs in each step.

Each step first reserves KV blocks for the tokens the running requests decode, preempting the
newest request (recompute: it goes back to the front of the queue and frees its blocks) when the
cache is full, as vLLM does. Then, if nothing was preempted, it admits waiting requests in arrival
order while ``max_num_seqs`` and the free blocks allow. At the end of the step every running
request gets one token. The ones that reach their length finish and free their blocks.

With prefix caching, the full prompt blocks of running requests are shared: a block whose hash a
running request already holds is referenced, not allocated again, and is freed with its last
holder (vLLM's reference-counted blocks). With ``max_num_batched_tokens`` a step computes at most
that many tokens, as vLLM's chunked prefill does: each running request that decodes takes one,
a prompt still being prefilled continues with the largest chunk left, then waiting requests are
admitted with a chunk of what remains. A request streams its first token at the end of the step
that computes its prompt's last chunk. Static batching (``reserve_tokens`` set) is the
engine before paging and continuous batching: each sequence reserves ``reserve_tokens`` of KV up
front, and a new batch is admitted only when the previous one has drained.

With speculative decoding (``tracker.sim.speculative``) a decoding request reserves KV for its
draft too and gets 1 + the accepted draft tokens at the end of a step. With LoRA adapters
(``tracker.sim.lora``) a waiting request whose adapter would exceed ``max_loras`` in the batch is
passed over (the ones behind it may be admitted), and each admitted adapter is made resident.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from dataclasses import dataclass, field

from tracker.inputs.configs import SimulatorSettings
from tracker.sim.kvcache import WATERMARK_FRACTION, KvCacheSpec, PrefixCache
from tracker.sim.lora import LoraSlots
from tracker.sim.sampling import OutputWords
from tracker.sim.speculative import Speculator

ABORT = "abort"


class SimRequest:
    """One request inside the engine, whose handler reads ``pieces`` as they grow."""

    __slots__ = (
        "_done_reason", "_waiter", "_words", "adapter", "admitted", "block_hashes",
        "cached_tokens", "chunk", "finish_reason", "held_hashes", "num_blocks", "output_tokens",
        "pieces", "prefill_left", "prompt_tokens",
    )

    def __init__(
        self, prompt_tokens: int, block_hashes: tuple[int, ...], output_tokens: int,
        max_tokens: int, words: OutputWords, adapter: str | None = None,
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.adapter = adapter  # the LoRA adapter it asked for (None: the base model)
        self.block_hashes = block_hashes
        self.output_tokens = output_tokens
        self.pieces: list[str] = []
        self.finish_reason: str | None = None  # "length", "stop" or "abort" once finished
        self.num_blocks = 0  # private blocks; shared prompt blocks are in held_hashes
        self.held_hashes: tuple[int, ...] = ()
        self.admitted = False
        self.cached_tokens = 0  # prompt tokens found in the prefix cache when first admitted
        self.prefill_left = 0  # prompt tokens still to compute before the first token
        self.chunk = 0  # of them, computed in the step being run
        self._done_reason = "length" if output_tokens >= max_tokens else "stop"
        self._words = words
        self._waiter: asyncio.Future[None] | None = None

    @property
    def generated(self) -> int:
        return len(self.pieces)

    def emit(self, tokens: int = 1) -> bool:
        """Append the next ``tokens`` tokens (fewer where the request ends first), and return
        True when the last one came."""
        for _ in range(min(tokens, self.output_tokens - len(self.pieces))):
            self.pieces.append(self._words.next_piece())
        done = len(self.pieces) >= self.output_tokens
        if done:
            self.finish_reason = self._done_reason
        self._wake()
        return done

    def cancel(self) -> None:
        if self.finish_reason is None:
            self.finish_reason = ABORT
            self._wake()

    async def wait_for_update(self) -> None:
        """Return after the next token or the end of the request."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


@dataclass(slots=True)
class EngineCounters:
    """Monotonic counters, as vLLM exports them, with tokens, not requests, for the prefix cache."""

    preemptions: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    successes: Counter[str] = field(default_factory=Counter)  # by finish reason


class Scheduler:
    def __init__(
        self, kv: KvCacheSpec, max_num_seqs: int, max_num_batched_tokens: int | None,
        prefix_cache: PrefixCache | None, reserve_tokens: int | None = None, *,
        speculator: Speculator | None = None, lora: LoraSlots | None = None,
    ) -> None:
        self.kv = kv
        self.speculator = speculator
        self.lora = lora
        self._lookahead = speculator.depth if speculator is not None else 0
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.free_blocks = kv.num_blocks
        self.peak_used_blocks = 0
        self.counters = EngineCounters()
        self._max_num_seqs = max_num_seqs
        self._max_num_batched_tokens = max_num_batched_tokens
        self._prefix_cache = prefix_cache
        self._reserve_tokens = reserve_tokens  # static batching: KV reserved per sequence
        self._static_width = 0  # static batching: the batch's size when it started
        self._shared_refs: dict[int, int] = {}  # prompt block hash -> running holders
        self._watermark_blocks = int(kv.num_blocks * WATERMARK_FRACTION)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def kv_cache_usage(self) -> float:
        return 1.0 - self.free_blocks / self.kv.num_blocks

    @property
    def used_blocks(self) -> int:
        return self.kv.num_blocks - self.free_blocks

    @property
    def static(self) -> bool:
        return self._reserve_tokens is not None

    @property
    def batch_width(self) -> int:
        """The sequences a decode step computes. A static batch keeps computing (padding) the
        ones that have finished until the whole batch is done."""
        return self._static_width if self.static and self.running else len(self.running)

    def compute_kv_read_bytes(self) -> int:
        """KV bytes one decode step reads: every running request's context (a static batch:
        its width times the longest context, padded)."""
        contexts = [r.prompt_tokens + r.generated for r in self.running]
        if self.static and contexts:
            return self.batch_width * max(contexts) * self.kv.kv_bytes_per_token
        return sum(contexts) * self.kv.kv_bytes_per_token

    @property
    def drafting(self) -> int:
        """Running requests that decode (their prompt computed) this step: each drafts."""
        if self.speculator is None:
            return 0
        return sum(1 for r in self.running if r.prefill_left == 0)

    def compute_features_step_s(self, settings: SimulatorSettings) -> float:
        """What speculative decoding and LoRA add to the coming step."""
        extra = 0.0
        if self.speculator is not None:
            extra += self.speculator.compute_step_s(settings, self.drafting)
        if self.lora is not None:
            extra += self.lora.compute_step_s(r.adapter for r in self.running)
        return extra

    def add(self, request: SimRequest) -> None:
        self.waiting.append(request)

    def abort(self, request: SimRequest) -> None:
        """Drop a request wherever it is (a client went away), but leave a finished one alone."""
        if request.finish_reason is not None:
            return
        if request in self.waiting:
            self.waiting.remove(request)
        elif request in self.running:
            self.running.remove(request)
            self._free(request)
        request.cancel()

    def abort_all(self) -> None:
        for request in [*self.waiting, *self.running]:
            self.abort(request)

    def schedule(self) -> int:
        """Reserve this step's KV slots, admit what fits, and return the tokens to prefill."""
        if self._grow_running():
            return 0
        if self.static and self.running:
            return 0  # static batching: the batch drains before a new one starts
        budget = None if self.static else self._max_num_batched_tokens  # a static batch: whole
        left = None if budget is None else max(0, budget - sum(  # each decode takes one token,
            1 + self._lookahead for r in self.running if r.prefill_left == 0))  # + its draft
        prefill_tokens = 0
        for request in self.running:  # prompts being prefilled go on, oldest first
            if request.prefill_left > 0:
                request.chunk = request.prefill_left if left is None \
                    else min(request.prefill_left, left)
                prefill_tokens += request.chunk
                left = None if left is None else left - request.chunk
        prefill_tokens += self._admit(left)
        self._static_width = len(self.running)
        return prefill_tokens

    def finish_step(self) -> None:
        """Give every running request whose prompt is computed its token. Finished ones leave
        and free their blocks."""
        still_running: list[SimRequest] = []
        for request in self.running:
            chunk = request.chunk
            request.prefill_left -= chunk
            request.chunk = 0
            if request.prefill_left > 0:  # its prompt's next chunk comes in the next step
                still_running.append(request)
                continue
            tokens = 1 + self._draw_accepted(request, was_decoding=chunk == 0)
            before = request.generated
            done = request.emit(tokens)
            self.counters.generation_tokens += request.generated - before
            if done:
                self._free(request)
                self.counters.successes[request.finish_reason or ABORT] += 1
            else:
                still_running.append(request)
        self.running = still_running

    def _draw_accepted(self, request: SimRequest, *, was_decoding: bool) -> int:
        """The draft tokens accepted for ``request`` this step (0: no draft: no speculation, or
        the step computed its prompt)."""
        if self.speculator is None or not was_decoding or request.generated == 0:
            return 0
        return self.speculator.draw_accepted()

    def _blocks_for(self, context: int) -> int:
        return self.kv.blocks_for(max(context, self._reserve_tokens or 0))

    def _shareable(self, request: SimRequest) -> tuple[int, ...]:
        return request.block_hashes if self._prefix_cache is not None else ()

    def _grow_running(self) -> bool:
        """Allocate blocks for the running requests' next tokens, and return True if any was
        preempted."""
        preempted = False
        index = 0
        while index < len(self.running):
            request = self.running[index]
            lookahead = self._lookahead if request.prefill_left == 0 else 0  # its draft's slots
            context = request.prompt_tokens + request.generated + lookahead
            private = self._blocks_for(context) - len(request.held_hashes)
            need = max(0, private - request.num_blocks)
            if need <= self.free_blocks:
                self._allocate(request, need)
                index += 1
                continue
            self._preempt(self.running.pop())  # newest out first; it may be this request
            preempted = True
        return preempted

    def _admit(self, left: int | None) -> int:
        """Admit waiting requests in order while a sequence slot, the blocks and ``left`` tokens
        of the step's budget allow (None: no budget). Each computes a chunk of its prompt. A
        request whose LoRA adapter would be one too many in the batch is passed over and keeps
        its place in the queue."""
        prefill_tokens = 0
        adapters = {r.adapter for r in self.running if r.adapter is not None}
        passed: list[SimRequest] = []
        while self.waiting and len(self.running) < self._max_num_seqs and (left is None
                                                                          or left > 0):
            request = self.waiting[0]
            if self.lora is not None and not self.lora.can_join(request.adapter, adapters):
                passed.append(self.waiting.popleft())
                continue
            chunk = self._admit_one(request, left)
            if chunk is None:
                break
            if self.lora is not None and request.adapter is not None:
                self.lora.activate(request.adapter, adapters)
                adapters.add(request.adapter)
            prefill_tokens += chunk
            left = None if left is None else left - chunk
        self.waiting.extendleft(reversed(passed))
        return prefill_tokens

    def _admit_one(self, request: SimRequest, left: int | None) -> int | None:
        """Admit the first waiting request when its blocks fit, and return the prompt tokens it
        computes this step, or None when it does not fit (it stays first in the queue)."""
        context = request.prompt_tokens + request.generated
        shared = self._shareable(request)
        new_shared = sum(1 for h in shared if h not in self._shared_refs)
        private = max(0, self._blocks_for(context) - len(shared))
        reserve = self._watermark_blocks if self.running else 0
        if private + new_shared + reserve > self.free_blocks:
            return None
        cached = self._count_cached_tokens(request, context)
        compute = context - cached
        self.waiting.popleft()
        self._hold(request, shared)
        self._allocate(request, private)
        self.running.append(request)
        self._record_admission(request, cached)
        request.prefill_left = compute
        request.chunk = compute if left is None else min(compute, left)
        return request.chunk

    def _count_cached_tokens(self, request: SimRequest, context: int) -> int:
        if self._prefix_cache is None:
            return 0
        blocks = self._prefix_cache.count_cached_blocks(request.block_hashes)
        return min(blocks * self.kv.block_size, context - 1)  # the last token is always computed

    def _record_admission(self, request: SimRequest, cached_tokens: int) -> None:
        hits = min(cached_tokens, request.prompt_tokens)
        if not request.admitted:  # the usage reports the first admission's hits, as vLLM's does
            request.admitted = True
            request.cached_tokens = hits
            self.counters.prompt_tokens += request.prompt_tokens
        if self._prefix_cache is not None:
            self.counters.prefix_cache_queries += request.prompt_tokens
            self.counters.prefix_cache_hits += hits
            self._prefix_cache.insert(request.block_hashes)

    def _preempt(self, request: SimRequest) -> None:
        request.prefill_left = request.chunk = 0  # recomputed from the start when readmitted
        self._free(request)
        self.waiting.appendleft(request)
        self.counters.preemptions += 1

    def _hold(self, request: SimRequest, hashes: tuple[int, ...]) -> None:
        for block_hash in hashes:
            holders = self._shared_refs.get(block_hash, 0)
            if holders == 0:
                self._take(1)
            self._shared_refs[block_hash] = holders + 1
        request.held_hashes = hashes

    def _allocate(self, request: SimRequest, blocks: int) -> None:
        self._take(blocks)
        request.num_blocks += blocks

    def _take(self, blocks: int) -> None:
        self.free_blocks -= blocks
        self.peak_used_blocks = max(self.peak_used_blocks, self.used_blocks)

    def _free(self, request: SimRequest) -> None:
        self.free_blocks += request.num_blocks
        request.num_blocks = 0
        for block_hash in request.held_hashes:
            holders = self._shared_refs[block_hash] - 1
            if holders == 0:
                del self._shared_refs[block_hash]
                self.free_blocks += 1
            else:
                self._shared_refs[block_hash] = holders
        request.held_hashes = ()
