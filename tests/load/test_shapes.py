"""Arrival schedules and the capacity search, on literal probe sequences."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest

from tracker.load.shapes import (
    Probe,
    SweepSettings,
    compute_arrivals,
    compute_arrivals_for_duration,
    compute_capacity,
    next_sweep_rate,
)


def test_arrivals_have_the_planned_mean_rate_and_start_at_zero() -> None:
    arrivals = compute_arrivals(50.0, 1.0, 4001, seed=7)
    assert arrivals[0] == 0.0 and list(arrivals) == sorted(arrivals)
    assert 4000 / arrivals[-1] == pytest.approx(50.0, rel=0.05)


def test_burstiness_changes_the_spread_not_the_rate() -> None:
    def gaps(burstiness: float) -> list[float]:
        arrivals = compute_arrivals(10.0, burstiness, 3001, seed=1)
        return [b - a for a, b in itertools.pairwise(arrivals)]

    poisson, bursty, regular = gaps(1.0), gaps(0.25), gaps(8.0)
    for series in (poisson, bursty, regular):
        assert statistics.fmean(series) == pytest.approx(0.1, rel=0.08)
    cv = {k: statistics.pstdev(v) / statistics.fmean(v) for k, v in
          {"poisson": poisson, "bursty": bursty, "regular": regular}.items()}
    assert cv["bursty"] > cv["poisson"] > cv["regular"]
    assert cv["poisson"] == pytest.approx(1.0, abs=0.08)  # exponential gaps


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert compute_arrivals(3.0, 1.0, 50, seed=9) == compute_arrivals(3.0, 1.0, 50, seed=9)
    assert compute_arrivals(3.0, 1.0, 50, seed=9) != compute_arrivals(3.0, 1.0, 50, seed=10)


def test_an_infinite_rate_starts_everything_at_once() -> None:
    assert compute_arrivals(math.inf, 1.0, 4, seed=0) == (0.0, 0.0, 0.0, 0.0)


def test_a_duration_schedule_stops_before_the_duration() -> None:
    arrivals = compute_arrivals_for_duration(100.0, 1.0, 2.0, seed=3)
    assert arrivals[-1] < 2.0 and len(arrivals) == pytest.approx(200, rel=0.2)


def run_search(settings: SweepSettings, capacity: float) -> list[float]:
    """Drive the search against a server that meets the SLOs up to ``capacity``."""
    probes: list[Probe] = []
    while (rate := next_sweep_rate(settings, probes)) is not None:
        probes.append(Probe(rate, rate <= capacity))
    return [p.rate_per_s for p in probes]


def test_the_sweep_doubles_then_bisects() -> None:
    tried = run_search(SweepSettings(start_rate_per_s=1.0, refine_steps=2), capacity=5.0)
    assert tried == [1.0, 2.0, 4.0, 8.0, 6.0, 5.0]
    probes = [Probe(r, r <= 5.0) for r in tried]
    assert compute_capacity(probes) == 5.0


def test_the_sweep_halves_when_the_first_rate_fails() -> None:
    tried = run_search(SweepSettings(start_rate_per_s=8.0, refine_steps=0), capacity=1.5)
    assert tried[:3] == [8.0, 4.0, 2.0] and tried[3] == 1.0
    assert compute_capacity([Probe(r, r <= 1.5) for r in tried]) == 1.0


def test_the_sweep_respects_max_rate_and_max_probes() -> None:
    assert run_search(SweepSettings(1.0, max_rate_per_s=5.0), capacity=100.0) == \
        [1.0, 2.0, 4.0, 5.0]
    assert len(run_search(SweepSettings(1.0, max_probes=3), capacity=100.0)) == 3


def test_an_explicit_ladder_stops_at_the_first_failure() -> None:
    settings = SweepSettings(1.0, rates_per_s=(4.0, 1.0, 2.0, 8.0))
    assert run_search(settings, capacity=3.0) == [1.0, 2.0, 4.0]


def test_a_client_bound_probe_ends_the_sweep() -> None:
    probes = [Probe(1.0, True), Probe(2.0, False, client_bound=True)]
    assert next_sweep_rate(SweepSettings(1.0), probes) is None
    assert compute_capacity(probes) == 1.0


def test_capacity_is_below_every_failure_and_none_without_a_pass() -> None:
    noisy = [Probe(1.0, True), Probe(2.0, False), Probe(4.0, True)]
    assert compute_capacity(noisy) == 1.0
    assert compute_capacity([Probe(1.0, False)]) is None
