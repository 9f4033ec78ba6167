"""ChangeMonitor: nightly values in, each change alerted once, spikes never."""

from __future__ import annotations

import random

import pytest

from tests.analysis.test_changepoints import SHORT_HISTORY
from tracker.analysis import ChangeMonitor, ChangePoint


def _feed(monitor: ChangeMonitor, values: list[float]) -> list[tuple[int, ChangePoint]]:
    alerts: list[tuple[int, ChangePoint]] = []
    for night, value in enumerate(values):
        alerts += [(night, point) for point in monitor.observe(value)]
    return alerts


def _series(seed: int, nights: int, step_at: int | None, step: float) -> list[float]:
    rng = random.Random(seed)
    return [100.0 * (1.0 + (step if step_at is not None and n >= step_at else 0.0))
            * (1.0 + rng.gauss(0.0, 0.01)) for n in range(nights)]


def test_a_step_is_alerted_once_within_a_week() -> None:
    monitor = ChangeMonitor()
    alerts = _feed(monitor, _series(1, 120, 60, 0.15))
    assert len(alerts) == 1
    night, point = alerts[0]
    assert abs(point.index - 60) <= 1
    assert 60 <= night <= 67
    assert point.rel_change == pytest.approx(0.15, abs=0.02)
    assert monitor.alerted == (point,)


def test_quiet_series_raise_fewer_than_three_false_alerts_per_thousand_nights() -> None:
    alerts = [alert for seed in range(10)
              for alert in _feed(ChangeMonitor(), _series(100 + seed, 150, None, 0.0))]
    assert len(alerts) <= 3  # 1500 nights; the target is <= 0.3 per 100 nights


def test_a_spike_that_reverts_is_never_alerted() -> None:
    values = _series(3, 80, None, 0.0)
    values[50:53] = [140.0, 150.0, 145.0]
    assert _feed(ChangeMonitor(), values) == []


def test_a_change_point_moving_by_a_night_or_two_is_not_alerted_again() -> None:
    monitor = ChangeMonitor(tolerance=3)
    values = _series(4, 70, 40, 0.08)
    values[40] = values[41] = 102.0  # the new level shows fully only from night 42
    alerts = _feed(monitor, values)
    assert len(alerts) == 1


def test_two_changes_are_two_alerts() -> None:
    values = _series(5, 60, 30, 0.1) + [v * 0.8 for v in _series(6, 40, None, 0.0)]
    alerts = _feed(ChangeMonitor(), values)
    assert [abs(p.index - at) <= 1 for (_, p), at in zip(alerts, (30, 60), strict=True)] == \
        [True, True]


def test_unmeasured_nights_are_accepted() -> None:
    monitor = ChangeMonitor()
    values: list[float | None] = list(_series(7, 50, 25, 0.2))
    values[10] = None
    alerts = [p for v in values for p in monitor.observe(v)]
    assert [abs(p.index - 25) <= 1 for p in alerts] == [True]


def test_bad_settings_and_values_are_refused() -> None:
    with pytest.raises(ValueError, match="window"):
        ChangeMonitor(window=6)
    with pytest.raises(ValueError, match="confirm"):
        ChangeMonitor(confirm=0)
    with pytest.raises(ValueError, match="finite"):
        ChangeMonitor().observe(float("inf"))


def test_a_constant_memory_step_is_alerted_within_a_week_and_a_blip_never() -> None:
    gib = 2.0**30
    values = [40.0 * gib] * 100 + [41.0 * gib] * 30
    values[50] = 44.0 * gib  # one night on a different allocator path
    alerts = _feed(ChangeMonitor(lower_is_better=True), values)
    assert [(p.index, p.after) for _, p in alerts] == [(100, 41.0 * gib)]
    assert 100 <= alerts[0][0] <= 107


def test_a_bimodal_quiet_series_raises_no_alert() -> None:
    rng = random.Random(31)
    values = [100.0 * (1.06 if rng.random() < 0.3 else 1.0) * (1.0 + rng.gauss(0.0, 0.015))
              for _ in range(160)]
    assert _feed(ChangeMonitor(lower_is_better=True), values) == []


def test_a_threefold_jump_in_a_short_history_is_alerted_at_its_first_night() -> None:
    alerts = _feed(ChangeMonitor(lower_is_better=True), SHORT_HISTORY)
    assert [point.index for _, point in alerts] == [18]
    assert alerts[0][0] <= 22  # five nights of the new level are enough
