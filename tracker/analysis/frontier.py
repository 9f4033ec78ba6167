"""The capacity frontier of one run (or one config version): throughput against latency over a
rate or concurrency ladder, its Pareto front, its knee, and readings off it (no I/O).

A point is one probe of a sweep (``<workload>@<R>rps``) or one stage of a ladder
(``<workload>@<R>rps``, ``<workload>@c<N>``), as ``tracker.load.phases`` names them: the load
asked for, the throughput achieved and a latency statistic (TTFT p90, say).

- The **Pareto front** keeps the points no other point beats on both axes (at least the
  throughput at no more latency): past saturation a higher rate buys latency, not throughput,
  and those points drop out.
- The **knee** is Kneedle's (Satopää et al., 2011) on the front: with both axes scaled to [0, 1]
  between the front's ends, it is the point farthest below the chord from the first to the last,
  i.e. where latency starts to rise faster than throughput. It is a property of the curve's
  shape alone, so it needs no SLO and moves when the curve moves. The SLO's own reading is the
  capacity at the SLO the sweep stores (``capacity_at_slo_req_per_s``), which the gate judges.
  Fewer than three points, or a front with no bend below its chord, has no knee (None).
- **Latency at a fixed throughput** and **throughput at a latency limit** are read off the front
  by linear interpolation between its neighbouring points. They are never extrapolated (None
  outside).
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

_RATE = re.compile(r"@(?P<rate>\d+(?:\.\d+)?(?:e[+-]?\d+)?)rps$")
_CONCURRENCY = re.compile(r"@c(?P<concurrency>\d+)$")


@dataclass(frozen=True, slots=True)
class ProbeLoad:
    """The load one probe or stage asked for: a planned rate or a closed loop's concurrency."""

    label: str  # "8rps", "c4": the part of the name after the "@"
    rate_per_s: float | None
    concurrency: int | None

    @property
    def order(self) -> float:
        return self.rate_per_s if self.rate_per_s is not None else float(self.concurrency or 0)


@dataclass(frozen=True, slots=True)
class FrontierPoint:
    load: ProbeLoad
    throughput_req_per_s: float  # achieved
    latency_s: float  # the chosen statistic (a TTFT p90, an E2E median, ...)


@dataclass(frozen=True, slots=True)
class Frontier:
    points: tuple[FrontierPoint, ...]  # every point, by load asked for
    front: tuple[FrontierPoint, ...]  # the Pareto front, by throughput
    knee: FrontierPoint | None  # Kneedle's knee of the front; None: no bend to find


def parse_probe_load(workload: str, name: str) -> ProbeLoad | None:
    """The load a probe's name asks for: ``ladder@8rps`` of workload ``ladder`` is 8 req/s, and
    ``ladder@c4`` is concurrency 4. Any other name gives None (the workload's own result, a burst
    stage ``@8rps-b0.5``, a rerun ``@1-worker``, another workload)."""
    prefix = f"{workload}@"
    if not name.startswith(prefix):
        return None
    tail = name[len(workload):]
    rate = _RATE.fullmatch(tail)
    if rate is not None:
        value = float(rate["rate"])
        return ProbeLoad(tail[1:], value, None) if value > 0 and math.isfinite(value) else None
    concurrency = _CONCURRENCY.fullmatch(tail)
    if concurrency is not None and int(concurrency["concurrency"]) > 0:
        return ProbeLoad(tail[1:], None, int(concurrency["concurrency"]))
    return None


def compute_pareto_front(points: Sequence[FrontierPoint]) -> tuple[FrontierPoint, ...]:
    """The points that no other point dominates (as much throughput or more at no more
    latency, one of them strictly), by throughput ascending."""
    best_latency = math.inf
    front: list[FrontierPoint] = []
    for point in sorted(points, key=lambda p: (-p.throughput_req_per_s, p.latency_s)):
        if point.latency_s < best_latency:
            front.append(point)
            best_latency = point.latency_s
    return tuple(reversed(front))


def compute_knee(front: Sequence[FrontierPoint]) -> FrontierPoint | None:
    """Kneedle on a front sorted by throughput: the point farthest below the chord of the
    scaled curve (max of scaled throughput minus scaled latency), or None with fewer than
    three points or no point below the chord."""
    if len(front) < 3:
        return None
    xs = [p.throughput_req_per_s for p in front]
    ys = [p.latency_s for p in front]
    x_span, y_span = xs[-1] - xs[0], ys[-1] - ys[0]
    if x_span <= 0.0 or y_span <= 0.0:
        return None
    gaps = [(x - xs[0]) / x_span - (y - ys[0]) / y_span for x, y in zip(xs, ys, strict=True)]
    best = max(range(1, len(front) - 1), key=lambda i: gaps[i])
    return front[best] if gaps[best] > 0.0 else None


def compute_latency_at_throughput(front: Sequence[FrontierPoint],
                                  throughput_req_per_s: float) -> float | None:
    """The front's latency at this throughput, interpolated, or None outside the measured range."""
    pairs = [(p.throughput_req_per_s, p.latency_s) for p in front]
    return _interpolate(pairs, throughput_req_per_s)


def _interpolate(pairs: Sequence[tuple[float, float]], x: float) -> float | None:
    for (x0, y0), (x1, y1) in itertools.pairwise(pairs):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    if len(pairs) == 1 and pairs[0][0] == x:
        return pairs[0][1]
    return None


def compute_frontier(points: Sequence[FrontierPoint]) -> Frontier:
    """The frontier of these points: all of them, the Pareto front and its knee."""
    front = compute_pareto_front(points)
    ordered = tuple(sorted(points, key=lambda p: p.load.order))
    return Frontier(ordered, front, compute_knee(front))


def combine_runs(runs: Sequence[Sequence[FrontierPoint]]) -> tuple[FrontierPoint, ...]:
    """One config version's points over several runs: per load asked for, the median
    throughput and the median latency of the runs that probed it."""
    by_load: dict[str, list[FrontierPoint]] = {}
    for run in runs:
        for point in run:
            by_load.setdefault(point.load.label, []).append(point)
    return tuple(
        FrontierPoint(found[0].load,
                      statistics.median(p.throughput_req_per_s for p in found),
                      statistics.median(p.latency_s for p in found))
        for found in sorted(by_load.values(), key=lambda f: f[0].load.order))
