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


# The demo's chat-c16 series, run by run: a faster config at run 12, the bad one from run 18.
DEMO_TTFT_P99_S = [0.3134, 0.3068, 0.3342, 0.3247, 0.3189, 0.3313, 0.3248, 0.3198, 0.3303,
                   0.3163, 0.3262, 0.3282, 0.1092, 0.1065, 0.1106, 0.1103, 0.1062, 0.1077,
                   0.5758, 0.5788, 0.586, 0.5857, 0.5699, 0.5755, 0.5824, 0.5729]
DEMO_REQUESTS_PER_S = [26.7902, 27.4009, 26.5384, 26.7201, 26.136, 26.5331, 31.2034, 31.4189,
                       30.609, 30.9321, 30.8276, 30.9265, 52.4261, 52.2403, 52.1165, 51.7844,
                       52.6608, 52.1866, 23.8099, 23.6725, 23.3916, 23.4147, 24.0705, 23.7985,
                       23.5185, 23.927]


def test_a_level_six_nights_after_another_is_alerted_at_its_first_night_by_the_sixth() -> None:
    alerts = _feed(ChangeMonitor(lower_is_better=True), DEMO_TTFT_P99_S)
    assert [point.index for _, point in alerts] == [12, 18]
    assert alerts[1][0] <= 23


def test_alerts_in_a_short_staircase_are_only_at_the_first_night_of_a_level() -> None:
    alerts = _feed(ChangeMonitor(lower_is_better=False), DEMO_REQUESTS_PER_S)
    assert alerts
    assert {point.index for _, point in alerts} <= {6, 12, 18}
