"""The simulator reacts to engine args the way vLLM does: static vs continuous batching, shared
prefix blocks, memory-bound decode, quantized weights, seeded run noise, vLLM's command line."""

from __future__ import annotations

import aiohttp
import pytest

from tests.sim.conftest import ServerFactory
from tests.sim.sim_support import chat_body, fetch_metrics, make_config, stream_request
from tracker.inputs.configs import EngineArgs, SimulatorSettings
from tracker.metrics import GIB
from tracker.sim.batching import Scheduler, SimRequest
from tracker.sim.engine import Engine, compute_step_s
from tracker.sim.kvcache import KvCacheSpec, PrefixCache, compute_kv_cache_spec
from tracker.sim.sampling import draw_run_factor, plan_output
from tracker.sim.server import SimServer
from tracker.sim.standalone import parse_serving_config, render_startup_lines


def tiny_cache(num_blocks: int) -> KvCacheSpec:
    return KvCacheSpec(block_size=4, num_blocks=num_blocks, kv_bytes_per_token=1,
                       weights_bytes=0, usable_bytes=num_blocks * 4)


def make_request(prompt_tokens: int, output_tokens: int,
                 hashes: tuple[int, ...] = ()) -> SimRequest:
    _, words = plan_output(0, "p", output_tokens, True, None)
    return SimRequest(prompt_tokens, hashes, output_tokens, output_tokens, words)


def run_step(scheduler: Scheduler) -> int:
    prefill = scheduler.schedule()
    scheduler.finish_step()
    return prefill


def test_static_batching_reserves_max_model_len_and_waits_for_the_batch_to_drain() -> None:
    scheduler = Scheduler(tiny_cache(100), max_num_seqs=8, max_num_batched_tokens=None,
                          prefix_cache=None, reserve_tokens=40)
    short, long = make_request(4, 1), make_request(4, 5)
    scheduler.add(short)
    scheduler.add(long)
    scheduler.schedule()
    assert scheduler.used_blocks == 2 * 10  # 40 tokens reserved each, whatever they use
    scheduler.finish_step()  # `short` is done
    late = make_request(4, 1)
    scheduler.add(late)
    for _ in range(4):
        assert scheduler.batch_width == 2  # the finished one is still computed (padding)
        run_step(scheduler)
    assert long.finish_reason == "length" and late.num_blocks == 0  # it waited all along
    assert run_step(scheduler) == 4 and late.finish_reason == "length"


def test_continuous_batching_lets_a_request_join_at_the_next_step() -> None:
    scheduler = Scheduler(tiny_cache(100), max_num_seqs=8, max_num_batched_tokens=None,
                          prefix_cache=None)
    scheduler.add(make_request(4, 5))
    run_step(scheduler)
    late = make_request(4, 1)
    scheduler.add(late)
    assert run_step(scheduler) == 4 and late.finish_reason == "length"
    assert scheduler.used_blocks == 2  # paged: the running one holds what it uses


def test_running_requests_share_their_cached_prompt_blocks() -> None:
    shared = (11, 12, 13)  # three full 4-token blocks of one system prompt

    def used_by_two(prefix_cache: PrefixCache | None) -> tuple[int, Scheduler]:
        scheduler = Scheduler(tiny_cache(100), max_num_seqs=8, max_num_batched_tokens=None,
                              prefix_cache=prefix_cache)
        for last in (21, 22):
            scheduler.add(make_request(14, 3, (*shared, last)))
        scheduler.schedule()
        return scheduler.used_blocks, scheduler

    unshared, _ = used_by_two(None)
    sharing, scheduler = used_by_two(PrefixCache(100))
    assert unshared == 2 * 4  # 14 tokens: four blocks each
    assert sharing == 3 + 2 * 1  # the three shared blocks once, one own block each
    for _ in range(3):
        run_step(scheduler)
    assert scheduler.used_blocks == 0  # the last holder freed the shared blocks


def test_decode_is_memory_bound_and_awq_reads_fewer_weight_bytes() -> None:
    settings = SimulatorSettings(decode_base_s=0.004, decode_per_seq_s=0.0,
                                 decode_s_per_kv_gib=0.001, decode_weights_share=0.5)
    assert compute_step_s(settings, 0, 1, 1.0) == pytest.approx(0.004)
    assert compute_step_s(settings, 0, 1, 1.0, kv_read_bytes=2 * GIB) == pytest.approx(0.006)
    awq = compute_kv_cache_spec(EngineArgs(quantization="awq"))
    assert awq.weights_fraction == pytest.approx(0.3)
    assert compute_step_s(settings, 0, 1, 1.0, weights_fraction=awq.weights_fraction) == \
        pytest.approx(0.004 * (0.5 + 0.5 * 0.3))


def test_model_size_and_gpu_memory_set_the_kv_capacity() -> None:
    big = SimulatorSettings(model_params_b=70, gpu_memory_gib=80)
    spec = compute_kv_cache_spec(EngineArgs(tensor_parallel_size=4, max_model_len=4096), big)
    assert spec.weights_bytes == 140 * GIB
    assert spec.capacity_bytes == pytest.approx(4 * 72 * GIB - 140 * GIB, rel=1e-3)


def test_run_noise_is_seeded_and_differs_between_repeats() -> None:
    factors = [draw_run_factor(7, 0.02, ordinal) for ordinal in range(20)]
    assert factors == [draw_run_factor(7, 0.02, ordinal) for ordinal in range(20)]
    assert len(set(factors)) == 20 and all(0.9 < f < 1.1 for f in factors)
    assert draw_run_factor(7, 0.0, 3) == 1.0


def test_an_engines_run_factor_depends_on_its_ordinal_not_on_the_engines_before_it() -> None:
    config = make_config(run_noise=0.05)
    first = Engine(config).run_factor
    others = [Engine(config, run_ordinal=n).run_factor for n in range(1, 4)]
    assert Engine(config).run_factor == first == draw_run_factor(7, 0.05, 0)
    assert others == [draw_run_factor(7, 0.05, n) for n in range(1, 4)]
    assert len({first, *others}) == 4


async def test_a_restarted_server_runs_the_next_ordinal_and_a_new_one_starts_again() -> None:
    config = make_config(run_noise=0.05)
    server = SimServer(config, run_ordinal=2)
    drawn = []
    for _ in range(2):
        async with server:
            drawn.append(server.run_factor)
    async with SimServer(config, run_ordinal=2) as fresh:
        again = fresh.run_factor
    assert drawn == [draw_run_factor(7, 0.05, 2), draw_run_factor(7, 0.05, 3)]
    assert again == drawn[0]


async def test_metrics_report_weights_and_peak_kv_memory(
    start_server: ServerFactory, client: aiohttp.ClientSession
) -> None:
    server = await start_server(make_config({"block_size": 16}))
    await stream_request(client, server.base_url, chat_body("word " * 100, 5))
    metrics = await fetch_metrics(client, server.base_url)
    assert metrics["tracker_sim:weights_memory_bytes"] == 16 * GIB
    assert metrics["tracker_sim:kv_cache_used_bytes"] == 0  # the request has finished
    # 100 prompt + 4 decoded tokens in context at the last step: 7 blocks of 16 x 128 KiB
    assert metrics["tracker_sim:kv_cache_peak_used_bytes"] == 7 * 16 * 128 * 1024
    assert metrics['vllm:cache_config_info{block_size="16",num_gpu_blocks="28672"}'] == 1.0


def test_the_standalone_simulator_takes_vllm_flags() -> None:
    config, host, port, unknown = parse_serving_config([
        "meta/llama", "--block-size", "32", "--gpu-memory-utilization", "0.85",
        "--quantization", "awq", "--kv-cache-dtype", "fp8", "--no-enable-prefix-caching",
        "--swap-space", "16", "--tensor-parallel-size", "2", "--trust-remote-code",
        "--sim-batching", "static", "--sim-decode-base-s", "0.002", "--port", "8123"])
    assert config.target.model == "meta/llama" and (host, port) == ("127.0.0.1", 8123)
    assert config.engine == EngineArgs(block_size=32, gpu_memory_utilization=0.85,
                                       quantization="awq", kv_cache_dtype="fp8",
                                       enable_prefix_caching=False, swap_space=16,
                                       tensor_parallel_size=2)
    assert config.simulator.batching == "static" and config.simulator.decode_base_s == 0.002
    assert unknown == ["--trust-remote-code"]


def test_the_standalone_simulator_refuses_a_bad_flag_value() -> None:
    with pytest.raises(ValueError, match=r"engine.block_size: .*\(got 12\)"):
        parse_serving_config(["m", "--block-size", "12"])
    with pytest.raises(ValueError, match="no model"):
        parse_serving_config(["--block-size", "16"])


def test_startup_lines_state_capacity_like_vllm() -> None:
    config, *_ = parse_serving_config(["m", "--max-model-len", "8192"])
    lines = "\n".join(render_startup_lines(config, compute_kv_cache_spec(config.engine), 0.5))
    assert "Model loading took 16.00 GiB memory and 0.50 seconds" in lines
    assert "Available KV cache memory: 56.00 GiB" in lines
    assert "GPU KV cache size: 458,752 tokens" in lines
    assert "Maximum concurrency for 8,192 tokens per request: 56.00x" in lines
