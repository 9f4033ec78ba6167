"""The table of vLLM versions: a retired flag, a flag or value the version does not take, and a
block size the CPU build refuses are config errors that name the field, the value, the version
and the fix; every shipped and `tracker init` config is valid for vLLM 0.32."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.cli.init_command import copy_starter_files
from tracker.errors import ConfigError
from tracker.inputs.configs import EngineArgs, load_config
from tracker.inputs.vllm_args import (
    KNOWN,
    KV_CACHE_DTYPES,
    VllmFlags,
    VllmTarget,
    check_engine_args,
    find_known,
    parse_release,
)

ROOT = Path(__file__).resolve().parents[2]
GPU_0_32 = VllmTarget("0.32.0", "a GPU host", KNOWN["0.32.0"])
CPU_0_32 = VllmTarget("0.32.0+cpu", "the CPU build", KNOWN["0.32.0"])


def _refusal(engine: EngineArgs, target: VllmTarget) -> str:
    with pytest.raises(ConfigError) as info:
        check_engine_args(engine, target, "configs/prod.yaml")
    assert info.value.exit_code == 2
    return str(info.value)


def test_swap_space_is_refused_by_vllm_0_32_with_the_version_and_the_fix() -> None:
    message = _refusal(EngineArgs(max_num_seqs=8, swap_space=4), GPU_0_32)
    assert message == (
        "configs/prod.yaml: engine.swap_space: vLLM 0.32.0 (a GPU host) has no --swap-space "
        "(removed in 0.18.0: the V1 engine never swapped KV blocks to CPU memory; got 4); "
        "remove it (vLLM 0.32 offloads the KV cache to CPU memory with extra_args: "
        "{kv_offloading_size: GIB})")


def test_a_retired_flag_is_refused_by_any_later_version_known_or_not() -> None:
    later = VllmTarget("0.40.1", "a future host")  # its flags unknown: the retired list still holds
    assert "vLLM 0.40.1 (a future host) has no --swap-space (removed in 0.18.0" in \
        _refusal(EngineArgs(swap_space=4), later)
    check_engine_args(EngineArgs(swap_space=4), VllmTarget("0.17.1", "an older host"), "c.yaml")


def test_a_flag_the_version_does_not_have_is_refused_in_extra_args_too() -> None:
    engine = EngineArgs(extra_args={"use-v2-block-manager": True})
    assert _refusal(engine, GPU_0_32) == (
        "configs/prod.yaml: engine.extra_args.use_v2_block_manager: vLLM 0.32.0 (a GPU host) has "
        "no --use-v2-block-manager (got true); fix the name (`vllm serve --help=all` lists that "
        "version's flags) or remove it")


def test_a_value_outside_the_versions_choices_is_refused() -> None:
    older = VllmTarget("0.10.0", "an older host", VllmFlags("0.10.0", {
        "--kv-cache-dtype": ("auto", "fp8", "fp8_e4m3", "fp8_e5m2"), "--max-num-seqs": None}))
    assert _refusal(EngineArgs(max_num_seqs=8, kv_cache_dtype="bfloat16"), older) == (
        "configs/prod.yaml: engine.kv_cache_dtype: vLLM 0.10.0 (an older host) refuses "
        "--kv-cache-dtype bfloat16; use one of auto, fp8, fp8_e4m3, fp8_e5m2")
    assert _refusal(EngineArgs(extra_args={"scheduling-policy": "lifo"}), GPU_0_32) == (
        "configs/prod.yaml: engine.extra_args.scheduling_policy: vLLM 0.32.0 (a GPU host) "
        "refuses --scheduling-policy lifo; use one of fcfs, priority")


def test_the_cpu_build_refuses_block_size_16_and_a_gpu_build_takes_it() -> None:
    engine = EngineArgs(block_size=16, max_num_seqs=8)
    assert _refusal(engine, CPU_0_32) == (
        "configs/prod.yaml: engine.block_size: vLLM 0.32.0+cpu (the CPU build) is a CPU build, "
        "whose attention backend needs a multiple of 32 (got 16); set 32, 64 or 128, or leave it "
        "out for the CPU default of 128")
    check_engine_args(engine, GPU_0_32, "c.yaml")
    check_engine_args(EngineArgs(block_size=64), CPU_0_32, "c.yaml")
    check_engine_args(EngineArgs(max_num_seqs=8), CPU_0_32, "c.yaml")  # its default: fine


def test_kv_cache_dtype_bfloat16_and_the_other_0_32_values_are_accepted() -> None:
    for value in ("bfloat16", "nvfp4", "int8_per_token_head", "fp8_e5m2", "auto"):
        check_engine_args(EngineArgs(kv_cache_dtype=value), CPU_0_32, "c.yaml")
    assert set(KV_CACHE_DTYPES) >= {"auto", "bfloat16", "fp8", "nvfp4", "int8_per_token_head"}


def test_every_typed_engine_field_but_swap_space_is_a_flag_of_0_32() -> None:
    engine = EngineArgs(block_size=32, gpu_memory_utilization=0.9, max_model_len=4096,
                        max_num_seqs=8, max_num_batched_tokens=4096, quantization="awq",
                        kv_cache_dtype="fp8", enable_prefix_caching=False,
                        tensor_parallel_size=1, dtype="bfloat16",
                        extra_args={"enforce_eager": True, "enable_chunked_prefill": False})
    check_engine_args(engine, CPU_0_32, "c.yaml")


def test_versions_are_read_with_their_local_label() -> None:
    assert parse_release("0.32.0+cpu") == (0, 32, 0) and parse_release("v0.9.2") == (0, 9, 2)
    assert parse_release("tracker-sim 1.0") is None
    assert find_known("0.32.0+cpu") is KNOWN["0.32.0"] and find_known("0.32.1") is None
    assert CPU_0_32.on_cpu and not GPU_0_32.on_cpu
    assert not VllmTarget("0.32.0+cu129", "cuda").on_cpu


def _serving_configs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.yaml")
                  if p.name not in {"suite.yaml", "schedules.yaml"})


def test_every_shipped_config_is_valid_for_vllm_0_32() -> None:
    paths = _serving_configs(ROOT / "configs")
    assert len(paths) >= 10
    for path in paths:
        loaded = load_config(path)
        check_engine_args(loaded.config.engine, GPU_0_32, str(path))


def test_every_config_tracker_init_writes_is_valid_for_vllm_0_32(tmp_path: Path) -> None:
    copy_starter_files(tmp_path)
    paths = _serving_configs(tmp_path / "configs")
    assert [p.name for p in paths] == ["sim-default.yaml", "taotoken-example.yaml",
                                       "vllm-launch-llama3-8b.yaml", "vllm-llama3-8b.yaml"]
    for path in paths:
        check_engine_args(load_config(path).config.engine, GPU_0_32, str(path))
