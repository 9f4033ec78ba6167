"""Check GPU telemetry on a machine that has a GPU: sample NVML idle, then under a matmul load.

    .venv/bin/python bench/gpu_check.py [--seconds 10] [--hz 10] [--size 8192] [--dtype bf16]

It runs the tracker's own ``GpuSampler`` twice — idle (the same-run reference) and while the GPU
multiplies two ``size`` x ``size`` matrices in a loop with whatever framework is installed
(PyTorch, CuPy or JAX, in that order) — and prints what was measured per phase and GPU, plus the
matmul rate the load reached, with each phase's energy per GPU (NVML's energy counter, else the
sampled power integrated) beside the sampled power's own integral, so the two can be compared on
real hardware. Last, a short run of the built-in simulator through the tracker's own runner
(real NVML, a temporary SQLite store) prints the stored energy per output token: the GPU is idle
then, so the figure checks the path from the counter to the stored metric, not a serving cost.
Without a driver it says so and exits 3; without a framework it samples the idle GPU only and
says which packages would load it.
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
from tracker.telemetry.energy import compute_sampled_energy_j
from tracker.telemetry.gpu import GpuSampler, collect_gpu_environment

SIM_CONFIG = """\
name: gpu-check-sim
target: {kind: sim, model: sim/gpu-check}
"""
SIM_SUITE = """\
name: gpu-check
seed: 1
workloads:
  - name: chat
    prompts: {source: synthetic, input_tokens: 64}
    max_tokens: 64
    ignore_eos: true
    concurrency: 8
    num_requests: 64
"""

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
             _fmt(d.temperature_peak_c, digits=0), ",".join(d.throttle_reasons) or "-",
             _fmt(d.energy_j), d.energy_source or "-",
             _fmt(compute_sampled_energy_j(d.gpu_index, telemetry.samples))]
            for d in telemetry.devices]


def print_sim_energy_per_token() -> None:
    """A short simulator run through the tracker's runner with the real NVML: the stored
    joules per output token (the GPU idles; this checks the path, not a serving figure)."""
    import tempfile

    from tracker.inputs.configs import load_config
    from tracker.inputs.suites import load_suite
    from tracker.metrics import compute_workload_metrics
    from tracker.pipeline.execute import execute_suite
    from tracker.store.db import open_store

    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        (folder / "c.yaml").write_text(SIM_CONFIG, encoding="utf-8")
        (folder / "s.yaml").write_text(SIM_SUITE, encoding="utf-8")
        engine = open_store(f"sqlite:///{folder / 'check.db'}")
        try:
            run = execute_suite(engine, load_config(folder / "c.yaml"),
                                load_suite(folder / "s.yaml"))
        finally:
            engine.dispose()
    for workload in run.workloads:
        values, gpu = compute_workload_metrics(workload), workload.gpu
        source = gpu.energy_source if gpu is not None else None
        note = gpu.energy_note if gpu is not None else None
        print(f"simulator run {workload.name}: {workload.summary.total_output_tokens} output "
              f"tokens in {workload.summary.duration_s:.2f} s, energy "
              f"{_fmt(gpu.energy_j if gpu else None)} J ({source}), "
              f"{_fmt(values.get('joules_per_output_token'), digits=3)} J/output token, "
              f"{_fmt(values.get('joules_per_token'), digits=3)} J/token"
              + (f"; note: {note}" if note else ""))


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
                        "power peak W", "SM MHz", "temp peak C", "throttle", "energy J",
                        "energy from", "sampled power J"), rows))
    print_sim_energy_per_token()
    return 0


if __name__ == "__main__":
    sys.exit(main())
