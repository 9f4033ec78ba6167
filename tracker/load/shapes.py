"""Load shapes (pure): open-loop arrival schedules and the search for capacity at SLO.

Arrivals follow ``vllm bench serve``: the gaps between requests are drawn from a gamma
distribution with shape ``burstiness`` and mean ``1 / rate`` (burstiness 1 is a Poisson process,
below 1 is burstier, above 1 more regular). The first request starts at 0. A rate of ``inf`` starts
every request at once. The draws come from ``random.Random(seed)``, so a suite's seed fixes them.

The sweep looks for the highest request rate that still meets the SLOs: it doubles the rate from
``start_rate`` while probes pass, then bisects between the highest pass and the lowest failure.
If the first probe fails, it halves instead. A client-bound probe ends the search (the client,
not the server, set the limit there).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


def compute_arrivals(rate_per_s: float, burstiness: float, count: int,
                     seed: int) -> tuple[float, ...]:
    """Planned start of each of ``count`` requests, seconds after the first."""
    if count <= 0:
        return ()
    if math.isinf(rate_per_s):
        return (0.0,) * count
    rng = random.Random(seed)
    scale = 1.0 / (rate_per_s * burstiness)
    arrivals = [0.0]
    for _ in range(count - 1):
        arrivals.append(arrivals[-1] + rng.gammavariate(burstiness, scale))
    return tuple(arrivals)


def compute_arrivals_for_duration(rate_per_s: float, burstiness: float, duration_s: float,
                                  seed: int) -> tuple[float, ...]:
    """Planned starts from 0 up to (not including) ``duration_s``."""
    if math.isinf(rate_per_s):
        raise ValueError("an infinite rate has no schedule over a duration; use a concurrency")
    rng = random.Random(seed)
    scale = 1.0 / (rate_per_s * burstiness)
    arrivals: list[float] = []
    at = 0.0
    while at < duration_s:
        arrivals.append(at)
        at += rng.gammavariate(burstiness, scale)
    return tuple(arrivals)


@dataclass(frozen=True, slots=True)
class Probe:
    """One sweep step: the rate tried and how it went."""

    rate_per_s: float
    passed: bool  # met the SLOs (attainment at or above the minimum, nothing cut short)
    client_bound: bool = False


@dataclass(frozen=True, slots=True)
class SweepSettings:
    start_rate_per_s: float
    max_rate_per_s: float | None = None
    rates_per_s: tuple[float, ...] | None = None  # an explicit ladder instead of the search
    refine_steps: int = 3
    max_probes: int = 12


def _round_rate(rate: float) -> float:
    return float(f"{rate:.4g}")


def next_sweep_rate(settings: SweepSettings, probes: Sequence[Probe]) -> float | None:
    """The next rate to try, or None when the search is over."""
    if len(probes) >= settings.max_probes or any(p.client_bound for p in probes):
        return None
    if settings.rates_per_s is not None:
        if any(not p.passed for p in probes):
            return None
        ladder = sorted(settings.rates_per_s)
        return ladder[len(probes)] if len(probes) < len(ladder) else None
    if not probes:
        return _round_rate(settings.start_rate_per_s)
    passed = [p.rate_per_s for p in probes if p.passed]
    failed = [p.rate_per_s for p in probes if not p.passed]
    if not failed:
        top = max(passed)
        if settings.max_rate_per_s is not None and top >= settings.max_rate_per_s:
            return None
        nxt = top * 2
        if settings.max_rate_per_s is not None:
            nxt = min(nxt, settings.max_rate_per_s)
        return _round_rate(nxt)
    if not passed:
        return _round_rate(min(failed) / 2)
    low = max(passed)
    above = [f for f in failed if f > low]
    if not above or _bisections(probes) >= settings.refine_steps:
        return None
    high = min(above)
    middle = _round_rate((low + high) / 2)
    return None if middle in (low, high) else middle


def _bisections(probes: Sequence[Probe]) -> int:
    """How many probes were placed between an earlier pass and an earlier failure."""
    count = 0
    for i, probe in enumerate(probes):
        before = probes[:i]
        below = [p.rate_per_s for p in before if p.passed and p.rate_per_s < probe.rate_per_s]
        above = [p.rate_per_s for p in before if not p.passed and p.rate_per_s > probe.rate_per_s]
        if below and above:
            count += 1
    return count


def compute_capacity(probes: Sequence[Probe]) -> float | None:
    """The highest passing rate below every failing one, or None when no rate passed."""
    failed = [p.rate_per_s for p in probes if not p.passed]
    ceiling = min(failed, default=math.inf)
    passed = [p.rate_per_s for p in probes if p.passed and p.rate_per_s < ceiling]
    return max(passed, default=None)
