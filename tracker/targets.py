"""Bring a serving config to life as an endpoint the load generator can reach.

- ``sim``: the embedded simulator, started in-process on 127.0.0.1 (or attached via base_url);
- ``openai``: any OpenAI-compatible endpoint, the key read from the named environment variable;
- ``vllm``: attach to a running server named by base_url.
The key is read from the environment at run time, sent only in the Authorization header and
never stored, logged or echoed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import tracker
from tracker.config import LoadedConfig
from tracker.errors import ConfigError
from tracker.loadgen import Endpoint


@dataclass(frozen=True, slots=True)
class TargetHandle:
    endpoint: Endpoint
    supports_ignore_eos: bool
    simulated: bool
    engine: str | None  # engine name and version where known


def resolve_headers(loaded: LoadedConfig) -> dict[str, str]:
    name = loaded.config.target.api_key_env
    if name is None:
        return {}
    value = os.environ.get(name)
    if value is None or not value.strip():
        raise ConfigError(
            f"{loaded.path}: target.api_key_env: the environment variable {name} is not set; "
            f"export it before running (export {name}=<your key>)"
        )
    return {"Authorization": f"Bearer {value.strip()}"}


@asynccontextmanager
async def open_target(loaded: LoadedConfig) -> AsyncIterator[TargetHandle]:
    target = loaded.config.target
    headers = resolve_headers(loaded)
    if target.base_url is not None:
        engine = f"tracker-sim {tracker.__version__}" if target.kind == "sim" else None
        yield TargetHandle(Endpoint(target.base_url, headers), target.kind != "openai",
                           target.kind == "sim", engine)
        return
    if target.kind == "vllm":
        raise ConfigError(
            f"{loaded.path}: target: launching vLLM from a config is not supported yet; "
            "start the server yourself and set target.base_url (e.g. http://127.0.0.1:8000)"
        )
    async with _embedded_simulator(loaded) as base_url:
        yield TargetHandle(Endpoint(base_url, headers), True, True,
                           f"tracker-sim {tracker.__version__}")


@asynccontextmanager
async def _embedded_simulator(loaded: LoadedConfig) -> AsyncIterator[str]:
    from tracker.sim.server import ThreadedSimServer

    server = ThreadedSimServer(loaded.config)
    await asyncio.to_thread(server.start)
    try:
        yield server.base_url
    finally:
        await asyncio.to_thread(server.stop)
