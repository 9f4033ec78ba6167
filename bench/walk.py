"""The tuning walk on the simulator: configs/walk/1..4 with configs/walk/suite.yaml, repeated.

Run: .venv/bin/python bench/walk.py [--repeats 3] [--scale 1.0]

Prints, per config, the medians over the repeats of mean TTFT, output throughput and memory
(simulated weights + peak KV-cache memory in use), and each step's change against the previous
one; the published 4xA100 LLaMA-2-70B tuning table is printed alongside as the reference for the
*ordering* (the simulator models an 8B model on one 80 GiB GPU, so magnitudes differ).
``--scale`` multiplies every simulated duration (0.5 halves the run time).

Quality: the suite also asks the shipped 1,000-item set (``--quality-set``, ``--quality-sample``
items of it, seeded; 0 skips it) once per config (later repeats reuse the answers, as a night
does), and the walk gains a variant of step 2 with ``kv_cache_dtype: fp8``. Printed per step
against the step it changes: accuracy, the paired difference with its interval and the exact
McNemar p (``tracker.analysis.compute_paired_quality``, as the gate judges it), so the AWQ and
fp8 steps' accuracy cost shows beside their speed and memory gains. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tracker.analysis import compute_paired_quality
from tracker.demo.walk import (
    WalkMeasurement,
    compute_walk_steps,
    measure_walk,
    scale_timings,
    shipped_walk,
)
from tracker.gate.quality_check import compute_pairs
from tracker.inputs.configs import LoadedConfig, build_loaded_config, load_config
from tracker.inputs.suites import LoadedSuite, QualityBlock, build_loaded_suite, load_suite
from tracker.metrics import GIB
from tracker.quality.set_files import load_quality_set
from tracker.quality.sets import compute_sample
from tracker.store.db import open_store

ROOT = Path(__file__).resolve().parent.parent
QUALITY_SET = ROOT / "baselines" / "quality" / "mixed-1k.jsonl"

REFERENCE = "published 4xA100 LLaMA-2-70B walk: 422 -> 1282 -> 1352 -> 1687 -> 1727 tok/s; " \
            "TTFT 3200 -> 950 ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--quality-set", type=Path, default=QUALITY_SET)
    parser.add_argument("--quality-sample", type=int, default=1000,
                        help="items of the set asked (seeded); 0: no quality")
    args = parser.parse_args()
    config_paths, suite_path = shipped_walk()
    configs = [scale_timings(load_config(p), args.scale) for p in config_paths]
    suite = load_suite(suite_path)
    if args.quality_sample > 0:
        configs.append(with_fp8_kv(configs[1]))
        suite = with_quality(suite, args.quality_set, args.quality_sample)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'walk.db'}")
        try:
            rows = measure_walk(store, configs, suite, args.repeats)
        finally:
            store.dispose()
    print(f"suite {suite.suite.name}, {args.repeats} runs per config (medians), scale {args.scale}")
    print(f"{'config':<34} {'mean TTFT ms':>12} {'output tok/s':>12} {'memory GiB':>10}  "
          f"{'TTFT':>6} {'tok/s':>6} {'memory':>7}")
    steps = compute_walk_steps(rows)
    previous = None
    for index, step in enumerate(steps):
        if args.quality_sample > 0 and index == len(steps) - 1:
            previous = steps[1]  # the fp8 variant changes step 2
        change = ""
        if previous is not None:
            change = (f"{step.mean_ttft_s / previous.mean_ttft_s - 1:+6.0%} "
                      f"{step.output_tokens_per_s / previous.output_tokens_per_s - 1:+6.0%} "
                      f"{step.memory_bytes / previous.memory_bytes - 1:+7.0%}")
        print(f"{step.config:<34} {step.mean_ttft_s * 1000:>12.0f} "
              f"{step.output_tokens_per_s:>12.0f} {step.memory_bytes / GIB:>10.2f}  {change}")
        previous = step
    for runs in rows:
        spread = ", ".join(f"{m.output_tokens_per_s:.0f}" for m in runs)
        print(f"  {runs[0].config}: output tok/s per run {spread}; preemptions "
              f"{max(m.preemptions for m in runs)}")
    print(f"reference: {REFERENCE}")
    if args.quality_sample > 0:
        print_quality(rows)


def with_fp8_kv(loaded: LoadedConfig) -> LoadedConfig:
    """Step 2 with an fp8 KV cache: the variant whose accuracy cost the walk shows."""
    engine = loaded.config.engine.model_copy(update={"kv_cache_dtype": "fp8"})
    config = loaded.config.model_copy(update={"name": f"{loaded.config.name}+fp8-kv",
                                              "engine": engine})
    return build_loaded_config(config, loaded.path)


def with_quality(loaded: LoadedSuite, path: Path, sample: int) -> LoadedSuite:
    """The walk's suite asking ``sample`` items of the quality set at ``path``."""
    whole = load_quality_set(path)
    block = QualityBlock(path=str(path), sample=sample if sample < len(whole.items) else None,
                         seed=1)
    quality = compute_sample(whole, block.sample, block.seed)
    suite = loaded.suite.model_copy(update={"quality": block})
    return build_loaded_suite(suite, loaded.path, quality)


def print_quality(rows: list[list[WalkMeasurement]]) -> None:
    """Each step's accuracy against the step it changes, paired item by item."""
    first = {runs[0].config: runs[0] for runs in rows}
    names = list(first)
    against = {name: names[i - 1] for i, name in enumerate(names) if i > 0}
    against[names[-1]] = names[1]  # the fp8 variant changes step 2
    print("\nquality (paired, item by item; exact McNemar)")
    print(f"{'config':<36} {'against':<28} {'accuracy':>8} {'change pts [interval]':>24} "
          f"{'p':>9}  verdict")
    for name, measured in first.items():
        result = measured.quality
        if result is None or result.accuracy is None:
            print(f"{name:<36} quality not measured")
            continue
        base = first[against[name]].quality if name in against else None
        if base is None:
            print(f"{name:<36} {'-':<28} {result.accuracy:>8.1%}")
            continue
        paired = compute_paired_quality(compute_pairs(base, result)[0])
        low, high = paired.ci
        change = f"{paired.difference * 100:+.1f} [{low * 100:+.1f}, {high * 100:+.1f}]"
        print(f"{name:<36} {against[name]:<28} {result.accuracy:>8.1%} {change:>24} "
              f"{paired.p_two_sided:>9.2g}  {paired.verdict.outcome.value}")


if __name__ == "__main__":
    main()
