"""A second generator of labelled nightly histories, from a different model than detection.py's.

``bench/detection.py`` draws every series the same way (Student-t noise on a log level, symmetric
outliers). Real fleets mix metrics that behave nothing alike, so this generator first draws a
metric *kind*, and the kind decides the noise, the direction that is worse and which nuisances
apply. It uses numpy's PCG64 generator, not ``random``, and shares no code with detection.py.

Kinds (share of the fleet) and their noise:

- ``p50`` (30 %): a median latency; log-normal noise, sd log-uniform in 1.5-5 %. Lower is better.
- ``p99`` (25 %): a tail latency; Student-t noise (3-6 degrees of freedom) on the log value,
  scaled to an sd log-uniform in 3-14 %. Lower is better.
- ``throughput`` (25 %): near-Gaussian, sd 1-4 %. Higher is better.
- ``accuracy`` (10 %): a quality score k/n over n = 500-1,319 items, k binomial, a true score
  in 0.35-0.92. Higher is better.
- ``memory`` (10 %): peak memory in bytes, bit-constant: exactly the same value every night
  except after a step (and on the nights of a spike or a one-night blip). Lower is better.

Nuisances (none of them is a change point):

- bimodal hosts, on half the latency and throughput series: 15-40 % of nights run on a host
  3-8 % worse; the host is drawn independently each night, or (half of those series) in short
  runs of about 1.5-3 nights (a two-state Markov chain with that stationary share);
- drift on a third of those series linear (±0.5-2 noise sd over the history), on another third
  a random walk (its sd at the last night 0.5-1.5 noise sd);
- weekly seasonality on 40 % of them (a day-of-week pattern up to 1 noise sd);
- noisy-neighbour outliers on 1-6 % of nights, 8-40 % the bad way (one in ten the good way);
  accuracy and memory series instead get a one-night blip on 30 % of series;
- transient spikes on 60 % of series: 1-3 episodes of 1-3 nights, always the bad way by
  15-60 % (latency * (1 + s), throughput and accuracy * (1 - s)).

Labelled steps: 1-3 per changed history (weights 0.5, 0.35, 0.15), at least 12 nights from
either end and 20 nights apart, each exactly 2, 5, 10 or 30 % (equally likely) up or down. An
accuracy step that would leave (0.05, 0.99) goes the other way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.random import Generator

KINDS = ("p50", "p99", "throughput", "accuracy", "memory")
KIND_SHARES = (0.30, 0.25, 0.25, 0.10, 0.10)
LOWER_IS_BETTER = {"p50": True, "p99": True, "throughput": False, "accuracy": False,
                   "memory": True}
STEP_SIZES = (0.02, 0.05, 0.10, 0.30)
MARGIN_NIGHTS = 12  # no step closer than this to either end
SPACING_NIGHTS = 20  # between steps


@dataclass(frozen=True, slots=True)
class FleetHistory:
    kind: str  # one of KINDS
    lower_is_better: bool
    values: list[float]
    steps: list[int]  # first night of each new level
    step_sizes: list[float]  # signed relative size of each step
    noise_sd: float  # relative sd of a night's noise, host modes included (0 for memory)
    nuisances: tuple[str, ...]  # what else shapes the series: "hosts", "walk", "spikes", ...


def _log_uniform(rng: Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def _draw_steps(rng: Generator, nights: int) -> list[int]:
    count = int(rng.choice((1, 2, 3), p=(0.5, 0.35, 0.15)))
    steps: list[int] = []
    for _ in range(100):
        if len(steps) == count:
            break
        at = int(rng.integers(MARGIN_NIGHTS, nights - MARGIN_NIGHTS))
        if all(abs(at - other) >= SPACING_NIGHTS for other in steps):
            steps.append(at)
    return sorted(steps)


def _level_path(nights: int, steps: list[int], sizes: list[float]) -> np.ndarray:
    """The true relative level each night: 1 until the first step, then the product of steps."""
    factor = np.ones(nights)
    for at, size in zip(steps, sizes, strict=True):
        factor[at:] *= 1.0 + size
    return factor


def _host_penalty(rng: Generator, nights: int) -> tuple[np.ndarray, float, str]:
    """1 on a good host, 1 + penalty on the slow one (independent nights or short runs); the
    extra relative sd the two modes add; the nuisance's name."""
    share, penalty = rng.uniform(0.15, 0.40), rng.uniform(0.03, 0.08)
    extra_sd = penalty * float(np.sqrt(share * (1.0 - share)))
    if rng.random() < 0.5:
        return np.where(rng.random(nights) < share, 1.0 + penalty, 1.0), extra_sd, "hosts"
    run = rng.uniform(1.5, 3.0)
    leave_slow = 1.0 / run
    enter_slow = share / (1.0 - share) * leave_slow
    slow = np.zeros(nights, dtype=bool)
    state = rng.random() < share
    draws = rng.random(nights)
    for night in range(nights):
        slow[night] = state
        state = draws[night] >= leave_slow if state else draws[night] < enter_slow
    return np.where(slow, 1.0 + penalty, 1.0), extra_sd, "host-runs"


def _noise(rng: Generator, kind: str, nights: int) -> tuple[np.ndarray, float]:
    """Multiplicative noise for a latency or throughput series, and its sd (relative)."""
    if kind == "p50":
        sd = _log_uniform(rng, 0.015, 0.05)
        return np.exp(sd * rng.standard_normal(nights)), sd
    if kind == "p99":
        sd, df = _log_uniform(rng, 0.03, 0.14), rng.uniform(3.0, 6.0)
        t = rng.standard_t(df, nights) * np.sqrt((df - 2.0) / df)
        return np.exp(sd * np.clip(t, -15.0, 15.0)), sd
    sd = rng.uniform(0.01, 0.04)
    return np.maximum(0.05, 1.0 + sd * rng.standard_normal(nights)), sd


def _drift_and_season(rng: Generator, nights: int, sd: float) -> tuple[np.ndarray, list[str]]:
    """exp(log drift + weekly pattern): linear drift, a random walk, or neither; seasonality."""
    log = np.zeros(nights)
    names: list[str] = []
    kind = rng.integers(3)
    if kind == 0:
        log += rng.choice((-1.0, 1.0)) * rng.uniform(0.5, 2.0) * sd * np.arange(nights) / nights
        names.append("drift")
    elif kind == 1:
        total = rng.uniform(0.5, 1.5) * sd
        log += np.cumsum(rng.standard_normal(nights)) * total / np.sqrt(nights)
        names.append("walk")
    if rng.random() < 0.4:
        pattern = rng.uniform(-1.0, 1.0, 7) * rng.uniform(0.0, 1.0) * sd
        log += pattern[np.arange(nights) % 7]
        names.append("weekly")
    return np.exp(log), names


def _continuous(rng: Generator, kind: str, nights: int,
                lower: bool) -> tuple[np.ndarray, float, list[str]]:
    """A latency or throughput series' multiplier each night (before steps and excursions)."""
    noise, sd = _noise(rng, kind, nights)
    names: list[str] = []
    if rng.random() < 0.5:
        hosts, extra_sd, name = _host_penalty(rng, nights)
        noise = noise * (hosts if lower else 1.0 / hosts)
        sd = float(np.hypot(sd, extra_sd))
        names.append(name)
    shape, more = _drift_and_season(rng, nights, sd)
    return noise * shape, sd, names + more


def _bad_way(factor: np.ndarray | float, size: np.ndarray | float,
             lower_is_better: bool) -> np.ndarray | float:
    return factor * (1.0 + size) if lower_is_better else factor * (1.0 - size)


def _spikes(rng: Generator, nights: int, steps: list[int], lower: bool) -> np.ndarray:
    """Multipliers for 1-3 transient episodes of 1-3 nights, always the bad way (on 60 %)."""
    out = np.ones(nights)
    if rng.random() >= 0.6:
        return out
    for _ in range(int(rng.integers(1, 4))):
        length = int(rng.integers(1, 4))
        start = int(rng.integers(0, nights - length + 1))
        if any(abs(start - at) <= 2 or start <= at < start + length for at in steps):
            continue  # a spike on a step's first nights would move the step
        out[start:start + length] = _bad_way(1.0, rng.uniform(0.15, 0.60), lower)
    return out


def _outliers(rng: Generator, nights: int, kind: str, lower: bool) -> np.ndarray:
    out = np.ones(nights)
    if kind in ("accuracy", "memory"):
        if rng.random() < 0.3:
            out[int(rng.integers(nights))] = _bad_way(1.0, rng.uniform(0.01, 0.10), lower)
        return out
    hit = rng.random(nights) < rng.uniform(0.01, 0.06)
    size = rng.uniform(0.08, 0.40, nights)
    bad = _bad_way(1.0, size, lower)
    good = _bad_way(1.0, size / 2.0, not lower)
    out[hit] = np.where(rng.random(nights) < 0.9, bad, good)[hit]
    return out


def _step_sizes(rng: Generator, count: int, kind: str, score: float) -> list[float]:
    sizes = [float(rng.choice(STEP_SIZES)) * float(rng.choice((-1.0, 1.0))) for _ in range(count)]
    if kind == "accuracy":
        product = 1.0
        for i, size in enumerate(sizes):
            if not 0.05 < score * product * (1.0 + size) < 0.99:
                sizes[i] = -size
            product *= 1.0 + sizes[i]
    return sizes


def generate_fleet_history(rng: Generator, nights: int, with_steps: bool) -> FleetHistory:
    kind = str(rng.choice(KINDS, p=KIND_SHARES))
    lower = LOWER_IS_BETTER[kind]
    steps = _draw_steps(rng, nights) if with_steps else []
    score = rng.uniform(0.35, 0.92)
    sizes = _step_sizes(rng, len(steps), kind, score)
    level = _level_path(nights, steps, sizes)
    names: list[str] = []
    if kind == "accuracy":
        items = int(rng.integers(500, 1320))
        values = rng.binomial(items, np.clip(score * level, 0.0, 1.0)) / items
        sd = float(np.sqrt((1.0 - score) / (score * items)))
    elif kind == "memory":
        base_bytes = int(rng.integers(8, 80)) * 2**30 + int(rng.integers(0, 1024)) * 2**20
        values, sd = np.round(base_bytes * level), 0.0
    else:
        base = {"p50": 0.08, "p99": 0.4, "throughput": 900.0}[kind] * rng.uniform(0.3, 3.0)
        shape, sd, names = _continuous(rng, kind, nights, lower)
        values = base * level * shape
    outliers, spikes = _outliers(rng, nights, kind, lower), _spikes(rng, nights, steps, lower)
    names += ["outliers"] * bool((outliers != 1.0).any()) + ["spikes"] * bool((spikes != 1.0).any())
    values = values * outliers * spikes
    if kind == "memory":
        values = np.round(values)
    return FleetHistory(kind, lower, [float(v) for v in values], steps, sizes, sd, tuple(names))


def generate_fleet(seed: int, series: int, nights: int) -> tuple[list[FleetHistory],
                                                                 list[FleetHistory]]:
    """``series`` histories with steps and ``series`` without, from one seed."""
    rng = np.random.default_rng(seed)
    changed = [generate_fleet_history(rng, nights, True) for _ in range(series)]
    quiet = [generate_fleet_history(rng, nights, False) for _ in range(series)]
    return changed, quiet
