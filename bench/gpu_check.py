"""Check GPU telemetry on a machine that has a GPU: sample NVML idle, then under a matmul load.

    .venv/bin/python bench/gpu_check.py [--seconds 10] [--hz 10] [--size 8192] [--dtype bf16]

It runs the tracker's own ``GpuSampler`` twice — idle (the same-run reference) and while the GPU
multiplies two ``size`` x ``size`` matrices in a loop with whatever framework is installed
(PyTorch, CuPy or JAX, in that order) — and prints what was measured per phase and GPU, plus the
matmul rate the load reached. Without a driver it says so and exits 3; without a framework it
samples the idle GPU only and says which packages would load it.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracker.errors import ExitCode
from tracker.reports.run_report import render_table
from tracker.results import GpuTelemetry
from tracker.telemetry.gpu import GpuSampler, collect_gpu_environment

GIB = 1024**3
Load = Callable[[float], float]  # run for seconds -> matmuls done


def _torch_load(size: int, dtype: str) -> tuple[str, Load] | None:
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    kind = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    a = torch.randn(size, size, device="cuda", dtype=kind)
    b = torch.randn(size, size, device="cuda", dtype=kind)

    def run(seconds: float) -> float:
        done, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(10):
                torch.matmul(a, b)
            torch.cuda.synchronize()
            done += 10
        return done

    return f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", run


def _cupy_load(size: int, dtype: str) -> tuple[str, Load] | None:
    if importlib.util.find_spec("cupy") is None:
        return None
    import cupy

    kind = {"bf16": cupy.float16, "fp16": cupy.float16, "fp32": cupy.float32}[dtype]
    a = cupy.random.standard_normal((size, size)).astype(kind)
    b = cupy.random.standard_normal((size, size)).astype(kind)

    def run(seconds: float) -> float:
        done, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(10):
                cupy.matmul(a, b)
            cupy.cuda.Device().synchronize()
            done += 10
        return done

    return f"cupy {cupy.__version__}", run


def _jax_load(size: int, dtype: str) -> tuple[str, Load] | None:
    if importlib.util.find_spec("jax") is None:
        return None
    import jax
    import jax.numpy as jnp

    if not any(d.platform == "gpu" for d in jax.devices()):
        return None
    kind = {"bf16": jnp.bfloat16, "fp16": jnp.float16, "fp32": jnp.float32}[dtype]
    a = jnp.ones((size, size), dtype=kind)
    b = jnp.ones((size, size), dtype=kind)
    matmul = jax.jit(jnp.matmul)

    def run(seconds: float) -> float:
        done, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            matmul(a, b).block_until_ready()
            done += 1
        return done

    return f"jax {jax.__version__}", run


def find_load(size: int, dtype: str) -> tuple[str, Load] | None:
    for factory in (_torch_load, _cupy_load, _jax_load):
        found = factory(size, dtype)
        if found is not None:
            return found
    return None


def sample_while(hz: float, work: Callable[[], object]) -> GpuTelemetry:
    sampler = GpuSampler(hz)
    sampler.start()
    try:
        work()
    finally:
        telemetry = sampler.stop()
    return telemetry


def _fmt(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if value is None else f"{value / scale:.{digits}f}"


def render_phase_rows(phase: str, telemetry: GpuTelemetry) -> list[list[str]]:
    return [[phase, str(d.gpu_index), str(d.samples), _fmt(d.memory_used_peak_bytes, GIB, 2),
             _fmt(d.gpu_util_mean_pct, digits=0), _fmt(d.power_mean_w, digits=0),
             _fmt(d.power_peak_w, digits=0), _fmt(d.sm_clock_mean_mhz, digits=0),
             _fmt(d.temperature_peak_c, digits=0), ",".join(d.throttle_reasons) or "-"]
            for d in telemetry.devices]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load (default 10)")
    parser.add_argument("--hz", type=float, default=10.0, help="NVML samples per second")
    parser.add_argument("--size", type=int, default=8192, help="matrix side (default 8192)")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    args = parser.parse_args(argv)
    facts = collect_gpu_environment()
    if not facts.get("gpu_count"):
        print(f"no GPU to check: {facts.get('gpu_reason', 'NVML reports no GPU')}")
        print("run this on a machine with an NVIDIA GPU and driver; the tracker records GPU "
              "telemetry there as 'not measured' with this reason")
        return ExitCode.NOT_MEASURED
    print(f"GPUs: {facts['gpu_count']} x {facts['gpu_model']}, driver "
          f"{facts['gpu_driver_version']}, CUDA driver {facts['cuda_driver_version']}")
    idle = sample_while(args.hz, lambda: time.sleep(min(args.seconds, 3.0)))
    rows = render_phase_rows("idle", idle)
    load = find_load(args.size, args.dtype)
    if load is None:
        print("no GPU framework found (torch with CUDA, cupy, or jax with a GPU backend); "
              "install one to load the GPU; showing the idle GPU only")
    else:
        name, run = load
        run(1.0)  # warm-up: kernels chosen, clocks up
        done: list[float] = []
        busy = sample_while(args.hz, lambda: done.append(run(args.seconds)))
        rows += render_phase_rows("matmul", busy)
        tflops = 2 * args.size**3 * done[0] / args.seconds / 1e12
        print(f"load: {name}, {args.dtype} {args.size}x{args.size} matmul, "
              f"{done[0]:.0f} in {args.seconds:g} s = {tflops:.1f} TFLOP/s")
    print(render_table(("phase", "gpu", "samples", "mem peak GiB", "util %", "power W",
                        "power peak W", "SM MHz", "temp peak C", "throttle"), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
