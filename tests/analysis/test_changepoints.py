"""detect_change_points on literal series and seeded ones with known answers."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tracker.analysis import detect_change_points
from tracker.analysis.changepoints import (
    DEFAULT_ALPHA,
    compute_scan_p_value,
    locate_split,
    scan_segment,
)


def _noisy(seed: int, levels: list[tuple[int, float]], sd: float = 0.01) -> list[float]:
    rng = random.Random(seed)
    return [level * (1.0 + rng.gauss(0.0, sd)) for count, level in levels for _ in range(count)]


def test_a_clear_step_is_found_at_its_first_new_night() -> None:
    values = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 101.0, 99.0, 100.0, 100.5,
              120.0, 121.0, 119.0, 120.5, 119.5, 120.0, 121.0, 119.0, 120.0, 120.5]
    points = detect_change_points(values)
    assert [p.index for p in points] == [10]
    point = points[0]
    assert point.before == pytest.approx(100.0, abs=0.5)
    assert point.after == pytest.approx(120.0, abs=0.5)
    assert point.rel_change == pytest.approx(0.2, abs=0.01)


def test_a_step_down_has_a_negative_change() -> None:
    points = detect_change_points(_noisy(3, [(40, 50.0), (30, 45.0)]))
    assert [p.index for p in points] == [40]
    assert points[0].rel_change == pytest.approx(-0.1, abs=0.01)


def test_a_single_outlier_is_not_a_change_point() -> None:
    values = _noisy(1, [(60, 100.0)])
    values[30] = 250.0
    assert detect_change_points(values) == []


def test_a_spike_that_reverts_is_not_a_change_point() -> None:
    values = _noisy(2, [(60, 100.0)])
    values[25:28] = [140.0, 150.0, 145.0]
    assert detect_change_points(values) == []


def test_two_steps_are_both_found() -> None:
    points = detect_change_points(_noisy(4, [(30, 10.0), (25, 11.0), (30, 9.5)]))
    assert [p.index for p in points] == [30, 55]
    assert points[0].rel_change == pytest.approx(0.1, abs=0.01)
    assert points[1].after == pytest.approx(9.5, abs=0.1)


def test_heavy_tailed_noise_without_a_change_gives_nothing() -> None:
    rng = random.Random(8)
    values = [100.0 * (1.0 + 0.02 * rng.gauss(0, 1) / max(0.2, abs(rng.gauss(0, 1))))
              for _ in range(150)]
    assert detect_change_points(values) == []


def test_a_series_too_short_for_two_segments_gives_nothing() -> None:
    assert detect_change_points([1.0, 1.0, 1.0, 5.0, 5.0, 5.0]) == []
    assert detect_change_points([]) == []


def test_a_constant_series_gives_nothing() -> None:
    assert detect_change_points([7.0] * 40) == []


def test_unmeasured_nights_are_skipped_and_indices_stay_in_the_input() -> None:
    values: list[float | None] = list(_noisy(5, [(20, 100.0), (20, 130.0)]))
    values.insert(10, None)
    values.insert(21, None)  # just before the change, which now starts at input index 22
    points = detect_change_points(values)
    assert [p.index for p in points] == [22]


def test_a_slow_drift_is_not_reported_as_a_step() -> None:
    rng = random.Random(6)
    values = [100.0 * (1.0 + 0.0004 * night) * (1.0 + rng.gauss(0, 0.01))
              for night in range(160)]  # +6 % over the history, no jump anywhere
    assert detect_change_points(values) == []


def test_the_scan_p_value_falls_with_the_statistic_and_grows_with_length() -> None:
    assert compute_scan_p_value(0.0, 100, 5) == 1.0
    assert compute_scan_p_value(4.0, 100, 5) < compute_scan_p_value(3.0, 100, 5)
    assert compute_scan_p_value(3.5, 400, 5) > compute_scan_p_value(3.5, 50, 5)


def test_the_l1_fit_places_a_large_step_exactly() -> None:
    values = [1.0] * 21 + [1.3] * 139
    assert locate_split(values, near=40, min_segment=5) == 21


def test_a_bad_min_segment_is_refused() -> None:
    with pytest.raises(ValueError, match="min_segment"):
        detect_change_points([1.0] * 20, min_segment=1)


# The demo's shape: 18 nights at one level, then six at three times it (a TTFT p99 regression
# caught soon after it began). Six nights a side fully separated is all a short history has, so
# a check stricter than the scan's own floor would never confirm it.
SHORT_HISTORY = [0.212, 0.205, 0.219, 0.208, 0.215, 0.201, 0.223, 0.210, 0.206, 0.217,
                 0.209, 0.214, 0.203, 0.220, 0.211, 0.207, 0.216, 0.204,
                 0.631, 0.618, 0.645, 0.609, 0.637, 0.624]


@pytest.mark.parametrize("lower_is_better", [None, True])
def test_a_threefold_jump_six_nights_before_the_end_of_a_short_history_is_found(
        lower_is_better: bool | None) -> None:
    points = detect_change_points(SHORT_HISTORY, lower_is_better=lower_is_better)
    assert [p.index for p in points] == [18]
    assert points[0].rel_change == pytest.approx(2.0, abs=0.05)



def test_a_short_segment_scan_p_value_is_calibrated_on_noise() -> None:
    """Up to 40 values the scan's p-value comes from permutations of the ranks: on noise, about
    1 % of 24-value segments have p < 0.01 (Siegmund's approximation gives half as many)."""
    rng = np.random.default_rng(4)
    splits = [scan_segment(rng.standard_normal(24), 5) for _ in range(5000)]
    share = float(np.mean([split is not None and split.p_value < 0.01 for split in splits]))
    assert 0.0075 <= share <= 0.0125, share


def test_a_fully_separated_short_split_is_significant_at_the_default_alpha() -> None:
    n, after = 24, 6
    z_max = after * (n - after) / 2.0 / (after * (n - after) * (n + 1) / 12.0) ** 0.5
    assert compute_scan_p_value(z_max, n, 5) < DEFAULT_ALPHA
    assert compute_scan_p_value(z_max + 0.5, n, 5) <= compute_scan_p_value(z_max, n, 5)
