"""Bring a serving config to life as an endpoint the load generator can reach.

- ``sim``: the embedded simulator, started in-process on 127.0.0.1 (or attached via base_url).
- ``openai``: any OpenAI-compatible endpoint (e.g. the TaoToken gateway), the key read from the
  named environment variable. Its latencies include the network round trip, and the run says so.
- ``vllm``: attach to a running server named by base_url (never stopped by us), or launch one
  with ``tracker.targets.launcher`` (always stopped, the whole process group).
A server the tracker did not build in-process (attached, or launched once it is healthy) is
checked against the config before the first request (``tracker.targets.server_check``): a model
it does not serve is an error, an engine field it runs otherwise a warning, and a server whose
``/version`` says it is the tracker's simulator makes the run simulated. A remote ``openai``
gateway is not asked.
The key is read from the environment at run time, sent only in the Authorization header and
never stored, logged or echoed.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import tracker
from tracker.errors import ConfigError
from tracker.http_client.client import find_proxy, strip_credentials
from tracker.inputs.configs import LoadedConfig
from tracker.load.generator import Endpoint
from tracker.redaction import CONVENTIONAL_ENV_NAME, register_secret
from tracker.targets.launcher import LaunchRecord, build_server_env, launch_server
from tracker.targets.pinning import check_pinning
from tracker.targets.server_check import SIM_VERSION_PREFIX, ServerCheck, run_server_check

SIM_ENGINE = f"tracker-sim {tracker.__version__}"


@dataclass(frozen=True, slots=True)
class TargetHandle:
    endpoint: Endpoint
    supports_ignore_eos: bool
    simulated: bool
    engine: str | None  # engine name and version where known
    launch: LaunchRecord | None = None  # set when the tracker started the server
    network_note: str | None = None  # set for remote targets: what the latencies include
    sim_run_factor: float | None = None  # the embedded simulator's speed draw for this run
    server_check: ServerCheck | None = None  # the server against the config; None: not asked

    @property
    def warnings(self) -> tuple[str, ...]:
        """Where the server contradicts the config (each a fact and a remedy)."""
        return () if self.server_check is None else self.server_check.warnings

    def environment_facts(self) -> dict[str, object]:
        """What the run's environment should record about the target (nothing secret)."""
        facts: dict[str, object] = {"engine": self.engine}
        if self.launch is not None:
            facts["launch"] = self.launch.as_environment()
        if self.network_note is not None:
            facts["network_note"] = self.network_note
        if self.server_check is not None:
            facts.update(self.server_check.environment_facts())
        return facts


def resolve_headers(loaded: LoadedConfig) -> dict[str, str]:
    name = loaded.config.target.api_key_env
    if name is None:
        return {}
    value = os.environ.get(name)
    if (value is None or not value.strip()) and not CONVENTIONAL_ENV_NAME.fullmatch(name):
        register_secret(name)  # a key pasted where its variable's name belongs: never echo it
        raise ConfigError(f"{loaded.path}: target.api_key_env: names a variable that is not set "
                          "(name hidden: it is not an UPPER_CASE name and may be a pasted key); "
                          "export the key in a variable such as TAOTOKEN_API_KEY and name that")
    where = f"{loaded.path}: target.api_key_env: the environment variable {name}"
    if value is None or not value.strip():
        raise ConfigError(f"{where} is not set; export it before running (export {name}=<your key>)")
    key = value.strip()
    register_secret(key, value)  # hidden in every text redacted from now on
    if key.lower().startswith("bearer "):
        raise ConfigError(f"{where} starts with 'Bearer ' (value hidden); the tracker adds that "
                          f"prefix itself: export only the key (export {name}=<your key>)")
    if any(char.isspace() for char in key):
        raise ConfigError(f"{where} contains spaces or line breaks inside the key (value hidden); "
                          "it was probably pasted with extra text: export the key alone")
    return {"Authorization": f"Bearer {key}"}


def check_target_inputs(loaded: LoadedConfig) -> dict[str, str]:
    """Everything the target needs from the environment, checked before a run is recorded: the
    key (returns the headers) and, for a server the tracker launches, the ``env_from`` variables
    and the ``cpus``."""
    headers = resolve_headers(loaded)
    target = loaded.config.target
    if target.kind == "vllm" and target.base_url is None:
        build_server_env(loaded)
        check_pinning(loaded)  # launch.cpus against this host's CPUs
    return headers


def describe_network(base_url: str) -> str:
    host = urlsplit(base_url).hostname or base_url
    note = (f"remote target {host}: TTFT and every latency include the network round trip "
            "(and the gateway's own queueing); compare only runs over the same network")
    proxy = find_proxy(base_url)
    if proxy is not None:
        note += f"; requests go through the proxy {strip_credentials(proxy[1])} ({proxy[0]})"
    return note


@asynccontextmanager
async def open_target(loaded: LoadedConfig, log_dir: str | Path | None = None, *,
                      run_ordinal: int | None = None) -> AsyncIterator[TargetHandle]:
    """The target, up. ``run_ordinal`` numbers the run for the embedded simulator's run-to-run
    speed draw (None: a fresh draw, as a real server varies from run to run)."""
    target = loaded.config.target
    headers = resolve_headers(loaded)
    if target.base_url is not None:
        yield await _attach(loaded, headers)
        return
    if target.kind == "vllm":
        async with launch_server(loaded, log_dir) as server:
            record = server.record
            endpoint = Endpoint(server.base_url, headers)
            check = await run_server_check(endpoint, loaded)
            engine = record.facts.engine_version or check.facts.engine
            yield TargetHandle(endpoint, True, _says_simulator(engine), engine, launch=record,
                               server_check=check)
        return
    async with _embedded_simulator(loaded, run_ordinal) as (base_url, factor):
        yield TargetHandle(Endpoint(base_url, headers), True, True, SIM_ENGINE,
                           sim_run_factor=factor)


async def _attach(loaded: LoadedConfig, headers: dict[str, str]) -> TargetHandle:
    """A server someone else runs: we measure it and never stop it."""
    target = loaded.config.target
    base_url = target.base_url
    assert base_url is not None
    endpoint = Endpoint(base_url, headers)
    if target.kind == "openai":
        return TargetHandle(endpoint, False, False, None, network_note=describe_network(base_url))
    check = await run_server_check(endpoint, loaded)
    if target.kind == "sim":
        return TargetHandle(endpoint, True, True, check.facts.engine or SIM_ENGINE,
                            server_check=check)
    engine = check.facts.engine
    return TargetHandle(endpoint, True, _says_simulator(engine), engine, server_check=check)


def _says_simulator(engine: str | None) -> bool:
    """A server that says it is the tracker's simulator ("tracker-sim X"): a simulated run."""
    return engine is not None and engine.startswith(SIM_VERSION_PREFIX)


@asynccontextmanager
async def _embedded_simulator(loaded: LoadedConfig,
                              run_ordinal: int | None) -> AsyncIterator[tuple[str, float]]:
    from tracker.sim.sampling import draw_run_ordinal
    from tracker.sim.server import ThreadedSimServer

    ordinal = draw_run_ordinal() if run_ordinal is None else run_ordinal
    server = ThreadedSimServer(loaded.config, run_ordinal=ordinal)
    await asyncio.to_thread(server.start)
    try:
        yield server.base_url, server.run_factor
    finally:
        await asyncio.to_thread(server.stop)
