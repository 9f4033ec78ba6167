"""Startup facts from vLLM's log (GPU and CPU wording) and its ``vllm:cache_config_info``."""

from __future__ import annotations

from tracker.reports.telemetry_report import render_startup_line
from tracker.results import SERVER_CHECK_KEY
from tracker.targets.startup import StartupFacts, compute_cache_config_facts, parse_startup_log
from tracker.telemetry.server_metrics import parse_cache_config_info

GIB = 1024**3
# vLLM 0.10 on a GPU: one statement a line
GPU_LOG_0_10 = """\
INFO 11-20 10:00:00 [api_server.py:1805] vLLM API server version 0.10.1.1
INFO 11-20 10:00:41 [gpu_model_runner.py:1953] Model loading took 74.08 GiB memory and 36.57 seconds
INFO 11-20 10:01:02 [gpu_worker.py:276] Available KV cache memory: 32.08 GiB
INFO 11-20 10:01:03 [kv_cache_utils.py:849] GPU KV cache size: 90,841 tokens
INFO 11-20 10:01:03 [kv_cache_utils.py:853] Maximum concurrency for 32,768 tokens per request: 2.77x
"""
# vLLM 0.32 on a GPU: the KV size and the concurrency in one line, more digits for the load
GPU_LOG_0_32 = """\
(Worker pid=88) INFO 12-02 07:34:01 [default_loader.py:501] Loading weights took 12.40 seconds
(Worker pid=88) INFO 12-02 07:34:02 [gpu_model_runner.py:5150] Model loading took 14.99 GiB memory \
and 13.052143 seconds
(Worker pid=88) INFO 12-02 07:34:09 [gpu_worker.py:760] Available KV cache memory: 52.31 GiB
(EngineCore pid=71) INFO 12-02 07:34:09 [kv_cache_utils.py:2327] GPU KV cache size: 428,512 tokens, \
Maximum concurrency for 8,192 tokens per request: 52.31x
"""
# vLLM 0.32's CPU build, as it ran here (tests/targets/fixtures has the whole log of a launch)
CPU_LOG_0_32 = """\
(Worker pid=21199) INFO 12-02 07:31:44 [base_loader.py:82] Initializing model took 0.320584 seconds
(Worker pid=21199) INFO 12-02 07:31:45 [default_loader.py:501] Loading weights took 0.03 seconds
(Worker pid=21199) INFO 12-02 07:31:47 [cpu_worker.py:260] Explicitly set (1.0/8.96) GiB for KV \
cache on node 0.
(EngineCore pid=21075) INFO 12-02 07:31:47 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 \
tokens, Maximum concurrency for 2,048 tokens per request: 512.00x
"""
# vLLM 0.32's CPU build's /metrics (the line as it served it here)
CACHE_CONFIG_INFO = (
    '# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n'
    '# TYPE vllm:cache_config_info gauge\n'
    'vllm:cache_config_info{_block_size_resolved="True",block_size="128",cache_dtype="auto",'
    'cache_hit_alignment_tokens="None",effective_attention_block_size="128",'
    'enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.92",'
    'kv_cache_max_concurrency="512.0",kv_cache_memory_bytes="1073741824",'
    'kv_cache_size_tokens="1048576",num_cpu_blocks="None",num_gpu_blocks="8192",'
    'num_gpu_blocks_override="None",sliding_window="None",user_specified_block_size="False"} 1.0\n'
    '# HELP vllm:num_requests_running Number of requests in model execution batches.\n'
    '# TYPE vllm:num_requests_running gauge\n'
    'vllm:num_requests_running{engine="0",model_name="m"} 0.0\n')


def test_the_gpu_wording_of_vllm_0_10_gives_every_fact() -> None:
    facts = parse_startup_log(GPU_LOG_0_10)
    assert facts == StartupFacts(engine_version="vllm 0.10.1.1",
                                 weights_memory_bytes=int(74.08 * GIB), model_load_s=36.57,
                                 kv_cache_memory_bytes=int(32.08 * GIB), kv_cache_tokens=90841,
                                 max_concurrency=2.77)


def test_the_gpu_wording_of_vllm_0_32_takes_the_whole_model_load_not_the_weights_alone() -> None:
    facts = parse_startup_log(GPU_LOG_0_32)
    assert (facts.model_load_s, facts.weights_memory_bytes) == (13.052143, int(14.99 * GIB))
    assert (facts.kv_cache_tokens, facts.max_concurrency) == (428512, 52.31)
    assert facts.kv_cache_memory_bytes == int(52.31 * GIB)


def test_the_cpu_wording_gives_the_load_time_and_the_kv_cache_but_no_weights_memory() -> None:
    facts = parse_startup_log(CPU_LOG_0_32)
    assert facts.model_load_s == 0.03
    assert (facts.kv_cache_tokens, facts.kv_cache_memory_bytes) == (1048576, GIB)
    assert facts.max_concurrency == 512.0
    assert (facts.weights_memory_bytes, facts.engine_version) == (None, None)  # not reported


def test_a_missing_startup_line_is_not_reported_rather_than_an_error() -> None:
    facts = parse_startup_log("INFO GPU KV cache size: 1,024 tokens\nsomething else\n")
    assert facts.kv_cache_tokens == 1024
    assert (facts.engine_version, facts.weights_memory_bytes, facts.max_concurrency) == \
        (None, None, None)


def test_cache_config_info_gives_the_kv_cache_block_size_and_prefix_caching() -> None:
    labels = parse_cache_config_info(CACHE_CONFIG_INFO)
    assert labels is not None and labels["block_size"] == "128"
    facts = compute_cache_config_facts(labels)
    assert facts == StartupFacts(kv_cache_memory_bytes=GIB, kv_cache_tokens=1048576,
                                 max_concurrency=512.0, block_size=128, prefix_caching=True)


def test_without_kv_cache_size_tokens_the_tokens_are_blocks_times_block_size() -> None:
    # the simulator's (and an older vLLM's) labels; a GPU build's bytes label says "None"
    text = ('vllm:cache_config_info{block_size="16",num_gpu_blocks="28672",'
            'kv_cache_memory_bytes="None",enable_prefix_caching="False",model_name="m"} 1.0\n')
    facts = compute_cache_config_facts(parse_cache_config_info(text))
    assert (facts.kv_cache_tokens, facts.block_size, facts.prefix_caching) == (458752, 16, False)
    assert facts.kv_cache_memory_bytes is None


def test_a_server_without_cache_config_info_states_nothing() -> None:
    assert parse_cache_config_info('vllm:num_requests_running{engine="0"} 0.0\n') is None
    assert compute_cache_config_facts(None) == StartupFacts()


def test_the_metrics_win_over_the_log_and_the_log_fills_what_they_do_not_say() -> None:
    metrics = compute_cache_config_facts(parse_cache_config_info(CACHE_CONFIG_INFO))
    logged = parse_startup_log(GPU_LOG_0_32)  # as if a GPU build stated these
    facts = metrics.merged_over(logged)
    assert (facts.kv_cache_tokens, facts.kv_cache_memory_bytes, facts.block_size) == \
        (1048576, GIB, 128)
    assert (facts.model_load_s, facts.weights_memory_bytes) == (13.052143, int(14.99 * GIB))


def test_the_report_shows_a_launched_servers_facts_and_says_what_was_not_reported() -> None:
    facts = compute_cache_config_facts(parse_cache_config_info(CACHE_CONFIG_INFO))
    launch = {"startup_s": 47.14, **facts.merged_over(parse_startup_log(CPU_LOG_0_32))
              .as_environment()}
    assert render_startup_line({"launch": launch}) == (
        "engine start: KV cache 1,048,576 tokens, 1.00 GiB; block size 128; prefix caching on; "
        "model load 0.03 s; weights not reported; ready after 47.1 s")


def test_the_report_shows_an_attached_servers_cache_config() -> None:
    labels = parse_cache_config_info(CACHE_CONFIG_INFO)
    environment = {SERVER_CHECK_KEY: {"version": "0.32.0", "cache_config": labels}}
    assert render_startup_line(environment) == (
        "engine (attached): KV cache 1,048,576 tokens, 1.00 GiB; block size 128; prefix caching on")
    assert render_startup_line({"engine": "tracker-sim 0.9.0"}) is None  # nothing stated
