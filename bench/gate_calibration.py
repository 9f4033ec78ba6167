"""Gate calibration: how often ``compare_samples`` cries wolf, and how often it catches a real one.

Run: .venv/bin/python bench/gate_calibration.py [--trials 200] [--seed 7]

Per-request TTFT samples come from two seeded models of a serving latency:

- ``lognormal``: log-normal, median 80 ms, sigma 0.25 (p99 / p50 = 1.8), right-skewed with a
  continuous tail, so the p99 is estimable from 1000 requests;
- ``stragglers``: the same body plus a heavy queueing tail: 5 % of requests are slowed by a
  Pareto factor with index 1.5 (infinite variance), so the p99 sits among a few dozen stragglers.

Run-to-run drift, where a scenario has it, scales a whole run by exp(0.01 N(0, 1)) (1 % run-level
noise, as on a shared GPU host).

Scenarios (1000 requests per side unless said otherwise), each over ``--trials`` seeded trials:

- identical configs, one run each: the false-regression rate of the median and p99 verdicts,
  of the two together (what the gate would do on TTFT), and of fixed "% change" rules;
- identical configs with run-level drift: one run each, versus 3 interleaved runs of 333 each
  (the run is the unit of replication);
- a 5 % regression of every TTFT (so of the median): the power of the median verdict;
- a 10 % regression of the p99 alone (only the slowest few percent get slower, the median does
  not move): how often the p99 verdict and a plain median test (the median verdict) flag it.
Printed, never asserted.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable

from tracker.analysis import compare_samples
from tracker.analysis.stats import compute_quantile
from tracker.metrics import get_metric

MEDIAN_S = 0.080
BODY_SIGMA = 0.25
TAIL_SHARE = 0.05
TAIL_INDEX = 1.5
RUN_SIGMA = 0.01
MODELS = ("lognormal", "stragglers")
_model = {"name": "lognormal"}

TTFT_MEDIAN = get_metric("ttft_median_s")  # a latency: lower is better


def draw_ttft(rng: random.Random) -> float:
    value = MEDIAN_S * math.exp(BODY_SIGMA * rng.gauss(0.0, 1.0))
    if _model["name"] == "stragglers" and rng.random() < TAIL_SHARE:
        value *= 1.0 + (rng.random() ** (-1.0 / TAIL_INDEX) - 1.0)
    return value


def draw_run(rng: random.Random, n: int, transform: Callable[[float], float] | None = None,
             drift: bool = False) -> list[float]:
    factor = math.exp(RUN_SIGMA * rng.gauss(0.0, 1.0)) if drift else 1.0
    values = [draw_ttft(rng) * factor for _ in range(n)]
    return [transform(v) for v in values] if transform else values


def p99_only_transform(rng: random.Random) -> tuple[Callable[[float], float], float, float]:
    """Stretch only the values above the 97th percentile so that the p99 grows by 10 %."""
    reference = sorted(draw_ttft(rng) for _ in range(400_000))
    threshold, p99 = compute_quantile(reference, 0.97), compute_quantile(reference, 0.99)
    stretch = (1.10 * p99 - threshold) / (p99 - threshold)

    def transform(value: float) -> float:
        return value if value <= threshold else threshold + (value - threshold) * stretch

    shifted = sorted(transform(v) for v in reference)
    return (transform, compute_quantile(shifted, 0.99) / p99 - 1.0,
            compute_quantile(shifted, 0.5) / compute_quantile(reference, 0.5) - 1.0)


def _regressed(base: object, head: object, statistic: str, seed: int) -> bool:
    verdict = compare_samples(base, head, TTFT_MEDIAN,  # type: ignore[arg-type]
                              statistic=statistic, seed=seed)
    return verdict.regressed


def _fixed_rule(base: list[float], head: list[float], q: float, percent: float) -> bool:
    return compute_quantile(sorted(head), q) > compute_quantile(sorted(base), q) * (1 + percent)


def _rate(hits: int, trials: int) -> str:
    half = 1.96 * math.sqrt(max(hits, 0.5) * (trials - hits + 0.5) / trials**3)
    return f"{hits / trials:6.1%} ± {half:4.1%}"


def scenario_identical(rng: random.Random, trials: int) -> list[tuple[str, int]]:
    counts = {"median verdict": 0, "p99 verdict": 0, "either (gate on TTFT)": 0,
              "rule: median > +5%": 0, "rule: p99 > +5%": 0, "rule: p99 > +10%": 0}
    for trial in range(trials):
        base, head = draw_run(rng, 1000), draw_run(rng, 1000)
        median, p99 = _regressed(base, head, "median", trial), _regressed(base, head, "p99", trial)
        counts["median verdict"] += median
        counts["p99 verdict"] += p99
        counts["either (gate on TTFT)"] += median or p99
        counts["rule: median > +5%"] += _fixed_rule(base, head, 0.5, 0.05)
        counts["rule: p99 > +5%"] += _fixed_rule(base, head, 0.99, 0.05)
        counts["rule: p99 > +10%"] += _fixed_rule(base, head, 0.99, 0.10)
    return list(counts.items())


def scenario_drift(rng: random.Random, trials: int, runs: int) -> list[tuple[str, int]]:
    per_run = 1000 // runs
    hits = [0, 0, 0]
    for trial in range(trials):
        base = [draw_run(rng, per_run, drift=True) for _ in range(runs)]
        head = [draw_run(rng, per_run, drift=True) for _ in range(runs)]
        median, p99 = _regressed(base, head, "median", trial), _regressed(base, head, "p99", trial)
        hits[0] += median
        hits[1] += p99
        hits[2] += median or p99
    return [("median verdict", hits[0]), ("p99 verdict", hits[1]), ("either", hits[2])]


def scenario_shift(rng: random.Random, trials: int,
                   transform: Callable[[float], float]) -> list[tuple[str, int]]:
    hits = [0, 0]
    for trial in range(trials):
        base, head = draw_run(rng, 1000), draw_run(rng, 1000, transform)
        hits[0] += _regressed(base, head, "median", trial)
        hits[1] += _regressed(base, head, "p99", trial)
    return [("median verdict", hits[0]), ("p99 verdict", hits[1])]


def _print(title: str, rows: list[tuple[str, int]], trials: int, target: str,
           seconds: float) -> None:
    print(f"\n{title}  ({trials} trials, {seconds:.0f} s)  target: {target}")
    for name, hits in rows:
        print(f"  {name:<26} flagged as regression {_rate(hits, trials)}")


def run_model(name: str, rng: random.Random, trials: int, drift: bool) -> None:
    _model["name"] = name
    transform, p99_change, median_change = p99_only_transform(rng)
    print(f"\n=== TTFT model: {name} ===")
    started = time.perf_counter()
    rows = scenario_identical(rng, trials)
    _print("identical configs, 1 run x 1000 requests per side", rows, trials,
           "false regressions <= 5%", time.perf_counter() - started)
    for runs in (1, 3) if drift else ():
        started = time.perf_counter()
        rows = scenario_drift(rng, trials, runs)
        _print(f"identical configs with 1% run-level drift, {runs} run(s) x {1000 // runs} "
               "per side", rows, trials, "false regressions <= 5%", time.perf_counter() - started)
    started = time.perf_counter()
    rows = scenario_shift(rng, trials, lambda v: v * 1.05)
    _print("5% regression of every TTFT (median +5%), 1000 per side", rows, trials,
           "median verdict power >= 0.8", time.perf_counter() - started)
    started = time.perf_counter()
    rows = scenario_shift(rng, trials, transform)
    _print(f"p99-only regression (p99 {p99_change:+.1%}, median {median_change:+.1%}), 1000 per "
           "side", rows, trials, "p99 verdict flags far more often than the median test",
           time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"seed {args.seed}; rates are the share of trials flagged as a regression, with a "
          "95% interval")
    for name in MODELS:
        run_model(name, rng, args.trials, drift=name == MODELS[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
