"""The client-bound verdict on literal measurements, and the collector kept out of timing."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from tracker.load import client_health as clienthealth
from tracker.load.client_health import GcPause, compute_client_health, compute_workers_needed


def test_a_healthy_client_is_not_client_bound() -> None:
    health = compute_client_health(cpu_fraction=0.3, loop_lags_s=[0.001] * 100,
                                   send_lags_s=[0.0002] * 100, open_loop=True,
                                   planned_rate_per_s=50.0)
    assert not health.client_bound and health.reason is None
    assert health.send_lag_p99_s is not None and health.send_lag_p99_s < 0.001


def test_requests_leaving_late_against_the_schedule_make_it_client_bound() -> None:
    lags = [i * 0.001 for i in range(100)]  # falling further behind: up to 99 ms late
    health = compute_client_health(cpu_fraction=0.6, loop_lags_s=[0.001], send_lags_s=lags,
                                   open_loop=True, planned_rate_per_s=5000.0)
    assert health.client_bound
    assert health.reason is not None and "5000 req/s" in health.reason
    assert "planned start" in health.reason and "98.0 ms" in health.reason


def test_closed_loop_send_lag_alone_is_not_a_verdict_but_loop_lag_and_cpu_are() -> None:
    late = compute_client_health(cpu_fraction=0.5, loop_lags_s=[0.001], send_lags_s=[0.05] * 10,
                                 open_loop=False)
    assert not late.client_bound
    lagging = compute_client_health(cpu_fraction=0.5, loop_lags_s=[0.05] * 10, send_lags_s=[],
                                    open_loop=False)
    assert lagging.client_bound and lagging.reason and "event loop lagged" in lagging.reason
    busy = compute_client_health(cpu_fraction=0.99, loop_lags_s=[], send_lags_s=[],
                                 open_loop=False)
    assert busy.client_bound and busy.reason and "99%" in busy.reason


def test_nothing_measured_is_none_not_zero() -> None:
    health = compute_client_health(cpu_fraction=None, loop_lags_s=[], send_lags_s=[],
                                   open_loop=False)
    assert health.loop_lag_p99_s is None and health.send_lag_max_s is None
    assert not health.client_bound


async def test_garbage_collection_is_paused_while_timing_and_restored_after() -> None:
    assert gc.isenabled()
    pause = GcPause()
    pause.start()
    try:
        assert not gc.isenabled()
    finally:
        pause.stop()
    assert gc.isenabled()


async def test_paused_collection_still_collects_when_cycles_pile_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(clienthealth, "GC_YOUNG_LIMIT", 1_000)
    monkeypatch.setattr(clienthealth, "GC_CHECK_S", 0.01)

    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    gc.collect()
    pause = GcPause()
    pause.start()
    try:
        probe = weakref.ref(Node())
        for _ in range(2_000):
            Node()
        assert probe() is not None  # not collected yet: collection is paused
        for _ in range(200):  # the guard checks every 10 ms
            await asyncio.sleep(0.01)
            if probe() is None:
                break
        assert probe() is None  # the guard ran a collection
        assert not gc.isenabled()
    finally:
        pause.stop()


def test_late_requests_say_when_connections_had_to_be_opened_while_measuring() -> None:
    late = [0.05] * 10
    health = compute_client_health(cpu_fraction=0.2, loop_lags_s=[0.001], send_lags_s=late,
                                   open_loop=True, connections_opened=37)
    assert health.client_bound and health.reason is not None
    assert "37 connections had to be opened while measuring" in health.reason
    plain = compute_client_health(cpu_fraction=0.2, loop_lags_s=[0.001], send_lags_s=late,
                                  open_loop=True)
    assert plain.reason is not None and "connections" not in plain.reason


def test_a_client_bound_verdict_says_how_many_workers_would_have_been_needed() -> None:
    assert compute_workers_needed(0.99, 1) == 2  # one saturated process: at least one more
    assert compute_workers_needed(0.98, 4) == 6  # 4 x 0.98 spread at 70 % each
    assert compute_workers_needed(None, 3) == 4
    busy = compute_client_health(cpu_fraction=0.99, loop_lags_s=[], send_lags_s=[],
                                 open_loop=False, workers=2, cores=8)
    assert busy.reason is not None
    assert "2 worker processes were used: at least 3 would have been needed" in busy.reason
    assert "--workers 3" in busy.reason and "workers: 3" in busy.reason
    small = compute_client_health(cpu_fraction=0.99, loop_lags_s=[], send_lags_s=[],
                                  open_loop=False, workers=2, cores=2)
    assert small.reason is not None and "more than the 2 CPUs this client may use" in small.reason


def test_a_lagging_loop_with_an_idle_thread_is_starved_and_told_to_pin_not_to_add_workers() -> None:
    """The engine's busy-polling threads took the cores: the client used 3 % of a CPU and its
    loop still lagged, so more workers cannot help; separate cores can."""
    health = compute_client_health(cpu_fraction=0.03, loop_lags_s=[0.09] * 50, send_lags_s=[],
                                   open_loop=False, cores=2)
    assert health.client_bound and clienthealth.compute_bound_kind(health) is \
        clienthealth.BoundKind.STARVED
    assert health.reason is not None and "starved, not overloaded" in health.reason
    assert "taskset -c 0" in health.reason and "--workers" not in health.reason


def test_a_busy_loop_thread_is_overloaded_and_told_how_many_workers() -> None:
    health = compute_client_health(cpu_fraction=0.97, loop_lags_s=[0.05] * 50, send_lags_s=[],
                                   open_loop=False, cores=8)
    assert clienthealth.compute_bound_kind(health) is clienthealth.BoundKind.OVERLOADED
    assert health.reason is not None and "--workers 2" in health.reason


def test_a_dead_server_is_neither_overloaded_nor_starved() -> None:
    health = compute_client_health(cpu_fraction=0.99, loop_lags_s=[0.2] * 50,
                                   send_lags_s=[0.2] * 50, open_loop=True,
                                   planned_rate_per_s=100.0, succeeded=0)
    assert not health.client_bound and health.reason is None
    assert clienthealth.compute_bound_kind(health) is None
    assert health.loop_lag_p99_s is not None  # what was measured is kept
