"""The tail test: a step among the newest nights, and spikes that are not one."""

from __future__ import annotations

import random

import numpy as np

from tracker.analysis.changepoint_tail import detect_recent_step


def _quiet(seed: int, nights: int) -> list[float]:
    rng = random.Random(seed)
    return [100.0 * (1.0 + rng.gauss(0.0, 0.01)) for _ in range(nights)]


def test_a_step_six_nights_old_is_found_at_its_first_night() -> None:
    values = _quiet(1, 60) + [v * 1.05 for v in _quiet(2, 6)]
    found = detect_recent_step(np.array(values), 5, 0.003, 0.01)
    assert found is not None
    assert found[0] == 60
    assert found[1] < 0.003


def test_a_three_night_spike_that_returns_is_not_a_step() -> None:
    values = _quiet(3, 66)
    values[59:62] = [140.0, 150.0, 145.0]  # the bad way for a latency, then back
    assert detect_recent_step(np.array(values), 5, 0.003, 0.01) is None


def test_quiet_nights_give_no_step() -> None:
    hits = sum(detect_recent_step(np.array(_quiet(10 + seed, 70)), 5, 0.003, 0.01) is not None
               for seed in range(50))
    assert hits <= 1


def test_a_bit_constant_series_is_left_to_the_exact_reading() -> None:
    values = np.array([8.0 * 2**30] * 60 + [9.0 * 2**30] * 6)
    assert detect_recent_step(values, 5, 0.003, 0.01) is None
