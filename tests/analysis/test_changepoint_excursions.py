"""Excursions set aside before the scan, and the failure cases they, the per-neighbour step check
and the moving-window candidates fixed: a spike just before a step, two steps the same way (a
staircase), a short bump before a larger step."""

from __future__ import annotations

import random

import numpy as np

from tracker.analysis import detect_change_points
from tracker.analysis.changepoint_excursions import compute_noise_scale, find_excursions


def _noisy(seed: int, levels: list[tuple[int, float]], sd: float = 0.015) -> list[float]:
    """``levels``: (nights, level) pieces, each night the level times 1 + N(0, sd)."""
    rng = random.Random(seed)
    return [level * (1.0 + rng.gauss(0.0, sd)) for nights, level in levels for _ in range(nights)]


def test_a_three_night_spike_is_an_excursion_and_a_step_is_not() -> None:
    values = np.array(_noisy(1, [(40, 100.0), (40, 110.0)]))
    values[20:23] *= 1.3  # a spike the bad way (latency: up)
    flagged = np.flatnonzero(find_excursions(values, lower_is_better=True)).tolist()
    assert flagged == [20, 21, 22]


def test_only_the_bad_way_is_set_aside_when_the_direction_is_known() -> None:
    values = np.array(_noisy(2, [(60, 100.0)]))
    values[30] *= 0.7  # 30 % faster: not what a noisy neighbour does to a latency
    assert not find_excursions(values, lower_is_better=True).any()
    assert np.flatnonzero(find_excursions(values, lower_is_better=None)).tolist() == [30]


def test_the_noise_scale_is_about_the_sd_and_barely_moved_by_a_step() -> None:
    flat = np.array(_noisy(3, [(200, 100.0)], sd=0.02))
    stepped = np.array(_noisy(3, [(100, 100.0), (100, 130.0)], sd=0.02))
    assert 1.6 < compute_noise_scale(flat) < 2.4
    assert compute_noise_scale(stepped) < 1.15 * compute_noise_scale(flat) + 0.3


def test_a_spike_just_before_a_step_does_not_hide_the_step() -> None:
    """A throughput series: three nights 20 % down (bad way) and an outlier right before a 10 %
    drop; the local check used to compare the step with those nights and miss it."""
    values = _noisy(4, [(60, 1000.0), (100, 900.0)], sd=0.02)
    for night in (52, 53, 54, 57):
        values[night] *= 0.8
    points = detect_change_points(values, lower_is_better=False)
    assert [p.index for p in points if abs(p.index - 60) <= 2] != []
    assert len(points) == 1


def test_steps_the_same_way_are_each_found() -> None:
    """A staircase (+4 % three times) looks like a drift when judged as one split of the whole
    history (the detector used to find none of it); each step is judged between its neighbours."""
    for seed in range(5):
        values = _noisy(10 + seed, [(40, 100.0), (40, 104.0), (40, 108.2), (40, 112.5)])
        found = [p.index for p in detect_change_points(values, lower_is_better=True)]
        assert len(found) == 3, (seed, found)
        assert all(abs(at - want) <= 2 for at, want in zip(found, (40, 80, 120), strict=True))


def test_a_drift_without_a_step_rarely_gives_a_change_point() -> None:
    """+4 % over 160 nights (2.7 noise sd): in at most 2 of 10 series a split stands out."""
    found = 0
    for seed in range(20, 30):
        rng = random.Random(seed)
        values = [100.0 * (1.0 + 0.04 * night / 160) * (1.0 + rng.gauss(0.0, 0.015))
                  for night in range(160)]
        found += detect_change_points(values, lower_is_better=True) != []
    assert found <= 2


def test_a_short_bump_before_a_larger_step_is_found_too() -> None:
    """+3 % for 25 nights, back, then +6 % for good: the scan of the whole history sees the large
    step and, in half of these series, nothing else; the moving window proposes the bump."""
    found = 0
    for seed in range(10):
        values = _noisy(30 + seed, [(30, 100.0), (25, 103.0), (30, 100.0), (75, 106.0)])
        points = [p.index for p in detect_change_points(values, lower_is_better=True)]
        assert any(abs(at - 85) <= 2 for at in points), (seed, points)
        found += sum(any(abs(at - want) <= 2 for at in points) for want in (30, 55)) == 2
    assert found >= 8
