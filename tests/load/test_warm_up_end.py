"""Where the warm-up ends: ``on_warmed`` runs once every warm-up request has finished and before
the first measured one is sent (the server telemetry's first scrape goes there), on one process
and on a worker pool; against the scripted server, counting what it received."""

from __future__ import annotations

import pytest

from tests.load.test_generator import spec
from tests.scripted_server import ServerFactory, token_stream
from tracker.load.generator import Endpoint, LoadGenerator, LoadPlan
from tracker.load.workers import WorkerPool

PLAN = LoadPlan("/v1/chat/completions", warmup=[spec()] * 3, measured=[spec()] * 6,
                concurrency=2)


@pytest.mark.parametrize("workers", [1, 2])
async def test_the_warmed_callback_sits_between_the_warm_up_and_the_measured_requests(
        scripted: ServerFactory, workers: int) -> None:
    server = await scripted(lambda _i, _body: token_stream(3, ttft_s=0.0, itl_s=0.001))
    received_then: list[int] = []

    async def warmed() -> None:
        received_then.append(len(server.served))

    generator = (LoadGenerator(Endpoint(server.url), PLAN, on_warmed=warmed) if workers == 1
                 else WorkerPool(Endpoint(server.url), PLAN, workers, on_warmed=warmed))
    outcome = await generator.run()
    assert received_then == [3]  # the warm-up, all answered; nothing measured yet
    assert len(server.served) == 9 and len(outcome.records) == 6
