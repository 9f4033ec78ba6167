"""Open loop, concurrency caps, duration and the client-health check, against a real server."""

from __future__ import annotations

import math

import pytest

from tests.load.test_generator import spec
from tests.scripted_server import ServerFactory, scripted_servers, token_stream
from tracker.eventloop import event_loop_name, run_async
from tracker.load import generator as loadgen
from tracker.load.generator import Endpoint, LoadGenerator, LoadPlan
from tracker.load.shapes import compute_arrivals
from tracker.load.summary import compute_workload_summary

PATH = "/v1/chat/completions"


async def test_open_loop_sends_on_schedule_and_records_the_plan(scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(3, ttft_s=0.01, itl_s=0.002))
    arrivals = compute_arrivals(40.0, 1.0, 12, seed=2)
    plan = LoadPlan(PATH, [], [spec()] * 12, concurrency=12, arrivals_s=arrivals)
    outcome = await LoadGenerator(Endpoint(server.url), plan).run()
    assert [r.scheduled_start_s for r in outcome.records] == list(arrivals)
    for record in outcome.records:
        assert record.ok and record.scheduled_start_s is not None
        assert record.start_s >= record.scheduled_start_s
        assert record.start_s - record.scheduled_start_s < 0.05  # on time, within the loop
        assert record.scheduled_ttft_s is not None and record.ttft_s is not None
        assert record.scheduled_ttft_s >= record.ttft_s
    summary = compute_workload_summary(outcome.records, outcome.duration_s,
                                       client=outcome.client)
    assert summary.scheduled_ttft is not None and summary.scheduled_ttft.count == 12
    assert summary.client is not None and summary.client.send_lag_p99_s is not None


def test_open_loop_never_sends_before_the_planned_start() -> None:
    """Timers may wake early (uvloop's are whole milliseconds): a request sent before its plan
    would make its latency from the planned start shorter than its TTFT. On the commands' loop."""
    async def measure() -> list[float]:
        async with scripted_servers() as make:
            server = await make(lambda i, b: token_stream(2, ttft_s=0.001, itl_s=0.0))
            arrivals = compute_arrivals(500.0, 1.0, 300, seed=4)
            plan = LoadPlan(PATH, [], [spec()] * 300, concurrency=300, arrivals_s=arrivals)
            outcome = await LoadGenerator(Endpoint(server.url), plan).run()
        assert len(outcome.records) == 300
        return [r.scheduled_start_s - r.start_s for r in outcome.records
                if r.scheduled_start_s is not None and r.start_s < r.scheduled_start_s]

    assert event_loop_name() == "uvloop"
    assert run_async(measure()) == []


async def test_waiting_for_a_slot_shows_in_the_scheduled_latency(scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(2, ttft_s=0.05, itl_s=0.0))
    plan = LoadPlan(PATH, [], [spec()] * 4, concurrency=1, arrivals_s=(0.0,) * 4)
    outcome = await LoadGenerator(Endpoint(server.url), plan).run()
    assert server.max_in_flight == 1
    waits = [r.scheduled_ttft_s - r.ttft_s for r in outcome.records  # type: ignore[operator]
             if r.scheduled_ttft_s is not None and r.ttft_s is not None]
    assert len(waits) == 4 and waits[0] < 0.03
    assert waits[3] >= 3 * 0.045  # three requests of >= 50 ms went first
    assert outcome.client is not None and not outcome.client.client_bound  # the cap is the plan


async def test_a_rate_the_client_cannot_sustain_is_marked_client_bound(
    scripted: ServerFactory,
) -> None:
    server = await scripted(lambda i, b: token_stream(2, ttft_s=0.0, itl_s=0.0))
    count = 1000
    arrivals = compute_arrivals(1_000_000.0, 1.0, count, seed=1)  # 1000 requests in ~1 ms
    plan = LoadPlan(PATH, [], [spec()] * count, concurrency=count, arrivals_s=arrivals)
    outcome = await LoadGenerator(Endpoint(server.url), plan).run()
    assert len(outcome.records) == count
    assert outcome.client is not None and outcome.client.client_bound
    assert outcome.client.reason is not None and "could not keep the schedule" in \
        outcome.client.reason
    assert outcome.client.send_lag_p99_s is not None and outcome.client.send_lag_p99_s > 0.01


async def test_closed_loop_with_a_duration_cycles_prompts_until_it_ends(
    scripted: ServerFactory,
) -> None:
    server = await scripted(lambda i, b: token_stream(2, ttft_s=0.02, itl_s=0.0))
    plan = LoadPlan(PATH, [], [spec()] * 3, concurrency=2, duration_s=0.3)
    outcome = await LoadGenerator(Endpoint(server.url), plan).run()
    assert len(outcome.records) > 3  # more requests than prompts
    assert all(r.start_s < 0.3 + 0.05 for r in outcome.records)
    assert all(r.scheduled_start_s is None for r in outcome.records)
    assert server.max_in_flight <= 2


def test_open_loop_plan_knows_its_shape() -> None:
    plan = LoadPlan(PATH, [], [spec()] * 2, concurrency=2, arrivals_s=(0.0, 0.5, 1.0))
    assert plan.open_loop and plan.planned_requests == 3
    closed = LoadPlan(PATH, [], [spec()] * 2, concurrency=2)
    assert not closed.open_loop and closed.planned_requests == 2
    assert math.isfinite(plan.request_timeout_s)


async def test_connections_opened_beyond_the_warmed_pool_are_counted(
    scripted: ServerFactory, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(loadgen, "MAX_WARM_CONNECTIONS", 2)
    server = await scripted(lambda i, b: token_stream(2, ttft_s=0.2, itl_s=0.0))
    plan = LoadPlan(PATH, [], [spec()] * 10, concurrency=10, arrivals_s=[0.0] * 10)
    generator = LoadGenerator(Endpoint(server.url), plan)
    outcome = await generator.run()
    assert all(r.ok for r in outcome.records)
    assert generator.connections_opened == 8  # 10 in flight at once, 2 warmed
