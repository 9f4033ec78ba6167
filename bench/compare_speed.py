"""How long one comparison of one metric takes, now that every request is judged on numpy/SciPy.

Run: .venv/bin/python bench/compare_speed.py [--requests 100000] [--repeats 5] [--seed 3]

``compare_samples`` on log-normal latencies (sigma 0.5) of ``--requests`` per side, head 1 %
slower, for the median (the efficient-score rank test), the p99 (Harrell-Davis) and the mean
(Welch), and over 3 runs per side (t over runs); the best of ``--repeats``. Beside it, in the same
run, the reference the tracker used before (pure Python: mid-ranks, Mann-Whitney, the
Hodges-Lehmann shift and its interval by bisection over two-pointer counts; copied below, once,
since it takes tens of seconds at 100,000). Goal: 100,000 per side in under 1 s. Printed, never
asserted.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import TypeVar

import numpy as np

from tracker.analysis import compare_samples
from tracker.metrics import get_metric

T = TypeVar("T")


def _ranks(values: Sequence[float]) -> tuple[list[float], float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks, ties, start = [0.0] * len(values), 0.0, 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2.0 + 1.0
        ties += (end - start + 1) ** 3 - (end - start + 1)
        start = end + 1
    return ranks, ties


def _count_at_most(xs: Sequence[float], ys: Sequence[float], bound: float) -> int:
    count = j = 0
    for xi in xs:
        while j < len(ys) and ys[j] <= xi + bound:
            j += 1
        count += j
    return count


def _select(xs: Sequence[float], ys: Sequence[float], k: int) -> float:
    low, high = ys[0] - xs[-1], ys[-1] - xs[0]
    for _ in range(200):
        middle = (low + high) / 2.0
        if middle in (low, high):
            break
        if _count_at_most(xs, ys, middle) >= k:
            high = middle
        else:
            low = middle
    return high


def reference_median(base: list[float], head: list[float]) -> tuple[float, float, float, float]:
    """The pre-numpy path for a median: Mann-Whitney's two-sided p, Hodges-Lehmann of the log
    values and its 95 % interval (pure Python, as the tracker had it)."""
    n, m = len(base), len(head)
    ranks, ties = _ranks([*base, *head])
    u = sum(ranks[n:]) - m * (m + 1) / 2.0
    variance = n * m / 12.0 * ((n + m + 1) - ties / ((n + m) * (n + m - 1)))
    z = (abs(u - n * m / 2.0) - 0.5) / math.sqrt(variance)
    p_value = 2.0 * (1.0 - NormalDist().cdf(z))
    xs, ys = sorted(math.log(v) for v in base), sorted(math.log(v) for v in head)
    k = max(1, math.floor(n * m / 2.0 - 1.96 * math.sqrt(variance)))
    shift = _select(xs, ys, n * m // 2 + 1)
    return math.expm1(shift), math.expm1(_select(xs, ys, k)), \
        math.expm1(_select(xs, ys, n * m - k + 1)), p_value


def _best(call: Callable[[], T], repeats: int) -> tuple[float, T]:
    best = math.inf
    for _ in range(repeats):
        started = time.perf_counter()
        answer = call()
        best = min(best, time.perf_counter() - started)
    return best, answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    n = args.requests
    base = (0.08 * np.exp(0.5 * rng.standard_normal(n))).tolist()
    head = (0.08 * 1.01 * np.exp(0.5 * rng.standard_normal(n))).tolist()
    runs_base = [base[i::3] for i in range(3)]
    runs_head = [head[i::3] for i in range(3)]
    cases = [("ttft_median_s", "1 run per side", base, head),
             ("ttft_p99_s", "1 run per side", base, head),
             ("ttft_mean_s", "1 run per side", base, head),
             ("ttft_median_s", "3 runs per side", runs_base, runs_head)]
    print(f"{n:,} requests per side, log-normal sigma 0.5, head +1%; best of {args.repeats}")
    print(f"  {'metric':<16} {'design':<16} {'seconds':>8}  verdict")
    for name, design, b, h in cases:
        metric = get_metric(name)
        seconds, verdict = _best(lambda m=metric, b=b, h=h: compare_samples(b, h, m),
                                 args.repeats)
        print(f"  {name:<16} {design:<16} {seconds:8.3f}  {verdict.method}: {verdict.reason}")
    seconds, (rel, low, high, p_value) = _best(lambda: reference_median(base, head), 1)
    print(f"  {'reference':<16} {'1 run per side':<16} {seconds:8.3f}  pure-Python mann-whitney "
          f"+ hodges-lehmann (before #15): {rel:+.2%} [{low:+.2%}, {high:+.2%}], "
          f"two-sided p={p_value:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
