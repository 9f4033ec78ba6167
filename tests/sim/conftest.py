"""Fixtures for the simulator tests: real servers on ephemeral ports, a real aiohttp client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest_asyncio

from tracker.inputs.configs import ServingConfig
from tracker.sim import SimServer

ServerFactory = Callable[[ServingConfig], Awaitable[SimServer]]


@pytest_asyncio.fixture
async def start_server() -> AsyncIterator[ServerFactory]:
    servers: list[SimServer] = []

    async def start(config: ServingConfig) -> SimServer:
        server = SimServer(config)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest_asyncio.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as client:
        yield client
