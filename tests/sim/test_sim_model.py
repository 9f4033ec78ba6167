"""The simulator's model without clocks or sockets: KV capacity, scheduling, seeded randomness."""

from __future__ import annotations

import pytest

from tracker.errors import MeasurementError
from tracker.inputs.configs import EngineArgs, SimulatorSettings
from tracker.sim.batching import Scheduler, SimRequest
from tracker.sim.engine import compute_step_s
from tracker.sim.kvcache import (
    KvCacheSpec,
    PrefixCache,
    compute_block_hashes,
    compute_kv_cache_spec,
)
from tracker.sim.sampling import StepJitter, plan_output

# --- KV capacity -----------------------------------------------------------------------------


def test_default_kv_cache_follows_vllm_arithmetic() -> None:
    spec = compute_kv_cache_spec(EngineArgs())
    assert spec.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2  # 128 KiB
    assert spec.block_size == 16
    # (80 GiB x 0.9 - 16 GiB) / 128 KiB per token / 16 tokens per block
    assert spec.num_blocks == (72 - 16) * 1024**3 // (128 * 1024) // 16 == 28672


@pytest.mark.parametrize(
    ("args", "blocks"),
    [
        ({"kv_cache_dtype": "fp8"}, 2 * 28672),  # one byte per value
        ({"block_size": 32}, 28672 // 2),
        ({"gpu_memory_utilization": 0.5}, (40 - 16) * 1024**3 // (128 * 1024) // 16),
        ({"tensor_parallel_size": 2}, (144 - 16) * 1024**3 // (128 * 1024) // 16),
    ],
)
def test_engine_args_change_kv_capacity(args: dict[str, object], blocks: int) -> None:
    assert compute_kv_cache_spec(EngineArgs.model_validate(args)).num_blocks == blocks


def test_quantized_weights_leave_more_room_for_kv() -> None:
    plain = compute_kv_cache_spec(EngineArgs())
    awq = compute_kv_cache_spec(EngineArgs(quantization="awq"))
    assert awq.weights_bytes < plain.weights_bytes / 2
    assert awq.num_blocks > plain.num_blocks


def test_no_memory_for_the_cache_is_refused_like_vllm() -> None:
    with pytest.raises(MeasurementError, match="no available memory for the cache blocks"):
        compute_kv_cache_spec(EngineArgs(gpu_memory_utilization=0.15))


def test_max_model_len_beyond_the_cache_is_refused_like_vllm() -> None:
    # 80 GiB x 0.21 - 16 GiB = 0.8 GiB: 6544 tokens
    with pytest.raises(MeasurementError, match=r"max seq len \(8192\) is larger"):
        compute_kv_cache_spec(EngineArgs(gpu_memory_utilization=0.21, max_model_len=8192))


# --- scheduling ------------------------------------------------------------------------------

def tiny_cache(num_blocks: int) -> KvCacheSpec:
    return KvCacheSpec(block_size=4, num_blocks=num_blocks, kv_bytes_per_token=1,
                       weights_bytes=0, usable_bytes=num_blocks * 4)


def make_request(
    prompt_tokens: int, output_tokens: int, hashes: tuple[int, ...] = ()
) -> SimRequest:
    _, words = plan_output(0, "p", output_tokens, True, None)
    return SimRequest(prompt_tokens, hashes, output_tokens, output_tokens, words)


def test_requests_that_do_not_fit_the_kv_cache_wait() -> None:
    scheduler = Scheduler(tiny_cache(10), max_num_seqs=8, max_num_batched_tokens=None,
                          prefix_cache=None)
    requests = [make_request(16, 2) for _ in range(3)]  # 4 blocks each
    for request in requests:
        scheduler.add(request)
    assert scheduler.schedule() == 32
    assert scheduler.running == requests[:2]
    assert list(scheduler.waiting) == requests[2:]
    assert scheduler.free_blocks == 2
    scheduler.finish_step()
    scheduler.schedule()
    scheduler.finish_step()  # both finish with their second token and free their blocks
    assert scheduler.free_blocks == 10
    assert scheduler.schedule() == 16
    assert scheduler.running == requests[2:]


def test_max_num_seqs_caps_the_batch() -> None:
    scheduler = Scheduler(tiny_cache(100), max_num_seqs=2, max_num_batched_tokens=None,
                          prefix_cache=None)
    for _ in range(5):
        scheduler.add(make_request(4, 3))
    scheduler.schedule()
    assert (len(scheduler.running), len(scheduler.waiting)) == (2, 3)


def test_a_full_cache_preempts_the_newest_request_and_recomputes_it() -> None:
    scheduler = Scheduler(tiny_cache(10), max_num_seqs=8, max_num_batched_tokens=None,
                          prefix_cache=None)
    older, newer = make_request(16, 20), make_request(16, 20)
    scheduler.add(older)
    scheduler.add(newer)
    scheduler.schedule()
    steps = 0
    while scheduler.counters.preemptions == 0:
        scheduler.finish_step()
        scheduler.schedule()
        steps += 1
    # each holds 5 blocks after 4 tokens; the 5th token's KV needs a 6th block
    assert steps == 5
    assert scheduler.running == [older]
    assert list(scheduler.waiting) == [newer]
    assert newer.num_blocks == 0
    assert older.num_blocks == 6
    prefill_tokens = 0
    while older.finish_reason is None:
        scheduler.finish_step()
        prefill_tokens = scheduler.schedule()
    assert scheduler.running == [newer]
    assert prefill_tokens == 16 + 5  # the prompt and the 5 tokens it had are recomputed
    assert scheduler.counters.prompt_tokens == 32  # counted once per request
    assert len(newer.pieces) == 5  # what was streamed stays streamed


def test_prefix_cache_hits_skip_prefill_of_shared_leading_blocks() -> None:
    scheduler = Scheduler(tiny_cache(100), max_num_seqs=8, max_num_batched_tokens=None,
                          prefix_cache=PrefixCache(100))
    shared = [f"s{i}" for i in range(8)]
    first = make_request(10, 1, compute_block_hashes([*shared, "a", "b"], 4))
    second = make_request(10, 1, compute_block_hashes([*shared, "c", "d"], 4))
    scheduler.add(first)
    assert scheduler.schedule() == 10
    scheduler.finish_step()
    scheduler.add(second)
    assert scheduler.schedule() == 2  # two shared blocks of four were cached
    assert (scheduler.counters.prefix_cache_queries, scheduler.counters.prefix_cache_hits) == (
        20, 8)


def test_block_hashes_depend_on_the_whole_prefix() -> None:
    a = compute_block_hashes(list("abcdefghij"), 4)
    b = compute_block_hashes(list("abcdefgXij"), 4)
    c = compute_block_hashes(list("Xbcdefghij"), 4)
    assert len(a) == 2  # the partial last block is not cached
    assert a[0] == b[0] and a[1] != b[1]
    assert a[1] != c[1]  # a change in block 0 changes every later hash


def test_prefix_cache_evicts_the_least_recently_used_block() -> None:
    cache = PrefixCache(2)
    cache.insert([1, 2])
    assert cache.count_cached_blocks([1]) == 1  # 1 is now the most recent
    cache.insert([3])
    assert cache.count_cached_blocks([1]) == 1
    assert cache.count_cached_blocks([2]) == 0


# --- step time and randomness ----------------------------------------------------------------

def test_step_time_adds_prefill_and_batch_decode_times_jitter() -> None:
    settings = SimulatorSettings(prefill_s_per_token=1e-4, decode_base_s=0.004,
                                 decode_per_seq_s=1e-3)
    assert compute_step_s(settings, 100, 8, 1.0) == pytest.approx(0.01 + 0.004 + 0.008)
    assert compute_step_s(settings, 0, 1, 1.5) == pytest.approx(0.005 * 1.5)


def test_step_jitter_is_seeded_and_clipped() -> None:
    def draw(seed: int) -> list[float]:
        jitter = StepJitter(seed, 0.5)
        return [jitter.next_factor() for _ in range(4000)]

    drawn = draw(3)
    assert drawn == draw(3)
    assert drawn != draw(4)
    assert min(drawn) == 0.5  # 1 - 0.5 x N(0,1) falls below 0.5 for N > 1: clipped
    assert sum(drawn) / len(drawn) == pytest.approx(1.0, abs=0.05)
    assert StepJitter(3, 0.0).next_factor() == 1.0


def test_output_length_is_exact_with_ignore_eos_and_natural_otherwise() -> None:
    assert plan_output(1, "prompt", 50, True, None)[0] == 50
    lengths = {plan_output(1, f"prompt {i}", 50, False, None)[0] for i in range(200)}
    assert min(lengths) >= 25
    assert max(lengths) <= 50
    assert len(lengths) > 10
    assert plan_output(1, "same", 50, False, None)[0] == plan_output(1, "same", 50, False, None)[0]
    assert plan_output(1, "one", 1, False, None)[0] == 1


def test_output_words_are_one_token_each_and_repeat_for_the_same_seed() -> None:
    def text(seed: int, variation: int | None) -> str:
        _, words = plan_output(seed, "p", 10, True, variation)
        return "".join(words.next_piece() for _ in range(10))

    assert text(1, None) == text(1, None)
    assert text(1, 0) != text(1, 1)
    assert len(text(1, None).split(" ")) == 10


def test_max_num_batched_tokens_chunks_a_long_prefill_over_steps_as_vllm_does() -> None:
    """A 1,024-token prompt under a 256-token budget: four steps of 256 before its first token
    (vLLM's chunked prefill), while a decoding request keeps its one token a step out of the
    budget; without a budget the prompt is computed in one step."""
    scheduler = Scheduler(tiny_cache(1000), max_num_seqs=8, max_num_batched_tokens=256,
                          prefix_cache=None)
    decoding = make_request(4, 20)
    scheduler.add(decoding)
    assert scheduler.schedule() == 4
    scheduler.finish_step()
    long = make_request(1024, 2)
    scheduler.add(long)
    chunks = []
    while not long.pieces:
        chunks.append(scheduler.schedule())
        scheduler.finish_step()
    assert chunks == [255, 255, 255, 255, 4]  # 256 less the decode's one token, until done
    assert len(decoding.pieces) == 1 + len(chunks)  # the decode never waited for the prompt
    unbounded = Scheduler(tiny_cache(1000), max_num_seqs=8, max_num_batched_tokens=None,
                          prefix_cache=None)
    whole = make_request(1024, 2)
    unbounded.add(whole)
    assert unbounded.schedule() == 1024
    unbounded.finish_step()
    assert len(whole.pieces) == 1
