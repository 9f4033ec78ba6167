"""The tuning walk on the simulator: configs/walk/1..4 with configs/walk/suite.yaml, repeated.

Run: .venv/bin/python bench/walk.py [--repeats 3] [--scale 1.0]

Prints, per config, the medians over the repeats of mean TTFT, output throughput and memory
(simulated weights + peak KV-cache memory in use), and each step's change against the previous
one; the published 4xA100 LLaMA-2-70B tuning table is printed alongside as the reference for the
*ordering* (the simulator models an 8B model on one 80 GiB GPU, so magnitudes differ).
``--scale`` multiplies every simulated duration (0.5 halves the run time). Printed, never asserted.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.jobs.walk import compute_walk_steps, measure_walk, scale_timings, shipped_walk
from tracker.store.db import open_store

GIB = 1024**3
REFERENCE = "published 4xA100 LLaMA-2-70B walk: 422 -> 1282 -> 1352 -> 1687 -> 1727 tok/s; " \
            "TTFT 3200 -> 950 ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    config_paths, suite_path = shipped_walk()
    configs = [scale_timings(load_config(p), args.scale) for p in config_paths]
    suite = load_suite(suite_path)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'walk.db'}")
        try:
            rows = measure_walk(store, configs, suite, args.repeats)
        finally:
            store.dispose()
    print(f"suite {suite.suite.name}, {args.repeats} runs per config (medians), scale {args.scale}")
    print(f"{'config':<28} {'mean TTFT ms':>12} {'output tok/s':>12} {'memory GiB':>10}  "
          f"{'TTFT':>6} {'tok/s':>6} {'memory':>7}")
    previous = None
    for step in compute_walk_steps(rows):
        change = ""
        if previous is not None:
            change = (f"{step.mean_ttft_s / previous.mean_ttft_s - 1:+6.0%} "
                      f"{step.output_tokens_per_s / previous.output_tokens_per_s - 1:+6.0%} "
                      f"{step.memory_bytes / previous.memory_bytes - 1:+7.0%}")
        print(f"{step.config:<28} {step.mean_ttft_s * 1000:>12.0f} "
              f"{step.output_tokens_per_s:>12.0f} {step.memory_bytes / GIB:>10.2f}  {change}")
        previous = step
    for runs in rows:
        spread = ", ".join(f"{m.output_tokens_per_s:.0f}" for m in runs)
        print(f"  {runs[0].config}: output tok/s per run {spread}; preemptions "
              f"{max(m.preemptions for m in runs)}")
    print(f"reference: {REFERENCE}")


if __name__ == "__main__":
    main()
