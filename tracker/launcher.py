"""Launch a vLLM server for a config (``kind: vllm`` without ``base_url``), and always stop it.

``launch_server`` starts ``target.launch.command`` (``vllm serve`` by default) with the model, the
config's engine args as flags and ``--host 127.0.0.1 --port FREE_PORT``, in its own process group,
with ``target.launch.env`` added to the environment and its output in a log file. It waits until
``/health`` and ``/v1/models`` answer, then reads the startup facts the server printed (version,
weights memory, KV-cache memory and tokens, maximum concurrency); a line that is missing is "not
reported", not an error. On leaving, however that happens (the run ends, an error, a timeout,
Ctrl-C), the whole process group gets SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from tracker.config import LaunchSettings, LoadedConfig
from tracker.errors import ConfigError, MeasurementError

LOG_DIR_ENV = "TRACKER_LOG_DIR"
DEFAULT_LOG_DIR = "tracker-logs"
HOST = "127.0.0.1"
POLL_INTERVAL_S = 0.2
TERM_GRACE_S = 15.0
_RESERVED_FLAGS = ("host", "port")
_GIB = 1024**3


@dataclass(frozen=True, slots=True)
class StartupFacts:
    """What the server said about itself while starting; ``None``: it did not say."""

    engine_version: str | None = None
    weights_memory_bytes: int | None = None
    model_load_s: float | None = None
    kv_cache_memory_bytes: int | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None


@dataclass(frozen=True, slots=True)
class LaunchRecord:
    command: tuple[str, ...]  # flags come from the config, which never holds a secret
    log_path: str
    port: int
    pid: int  # the process group's leader (and the group id)
    startup_s: float
    facts: StartupFacts

    def as_environment(self) -> dict[str, object]:
        return {"command": list(self.command), "log_path": self.log_path, "port": self.port,
                "pid": self.pid, "startup_s": round(self.startup_s, 3), **asdict(self.facts)}


@dataclass(frozen=True, slots=True)
class LaunchedServer:
    base_url: str
    record: LaunchRecord


_VERSION = re.compile(r"(?P<name>vLLM|tracker-sim) API server version:?\s*v?(?P<version>[\w.+-]+)")
_WEIGHTS = re.compile(r"Model loading took\s+(?P<gib>[\d.]+)\s*GiB(?: memory)? and\s+"
                      r"(?P<s>[\d.]+)\s*s")
_KV_MEMORY = re.compile(r"Available KV cache memory:\s*(?P<gib>[\d.]+)\s*GiB")
_KV_TOKENS = re.compile(r"GPU KV cache size:\s*(?P<tokens>[\d,]+)\s*tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for\s+[\d,]+\s+tokens per request:\s*"
                          r"(?P<x>[\d.]+)\s*x")


def parse_startup_log(text: str) -> StartupFacts:
    """The startup facts in a vLLM log; the last statement of each wins (a restart repeats them)."""
    def last(pattern: re.Pattern[str]) -> re.Match[str] | None:
        found = list(pattern.finditer(text))
        return found[-1] if found else None

    version, weights, kv_memory = last(_VERSION), last(_WEIGHTS), last(_KV_MEMORY)
    kv_tokens, concurrency = last(_KV_TOKENS), last(_CONCURRENCY)
    name = {"vLLM": "vllm"}.get(version["name"], version["name"]) if version else None
    return StartupFacts(
        engine_version=f"{name} {version['version']}" if version else None,
        weights_memory_bytes=int(float(weights["gib"]) * _GIB) if weights else None,
        model_load_s=float(weights["s"]) if weights else None,
        kv_cache_memory_bytes=int(float(kv_memory["gib"]) * _GIB) if kv_memory else None,
        kv_cache_tokens=int(kv_tokens["tokens"].replace(",", "")) if kv_tokens else None,
        max_concurrency=float(concurrency["x"]) if concurrency else None,
    )


def build_command(loaded: LoadedConfig, port: int) -> list[str]:
    """``COMMAND MODEL FLAGS --host 127.0.0.1 --port PORT``."""
    config = loaded.config
    for name in _RESERVED_FLAGS:
        if name in config.engine.extra_args:
            raise ConfigError(f"{loaded.path}: engine.extra_args.{name}: the launcher chooses the "
                              f"{name} itself (127.0.0.1 and a free port); remove it")
    launch = config.target.launch or LaunchSettings()
    return [*launch.command, config.target.model, *config.engine.as_flags(),
            "--host", HOST, "--port", str(port)]


def find_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def resolve_log_dir(log_dir: str | Path | None = None) -> Path:
    return Path(log_dir or os.environ.get(LOG_DIR_ENV) or DEFAULT_LOG_DIR)


def is_group_alive(pgid: int) -> bool:
    """True while any process of the group is alive (zombies waiting to be reaped do not count)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_process_group(process: subprocess.Popen[bytes], grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM to the whole group, SIGKILL to what is left after ``grace_s``; reaps the leader."""
    pgid = process.pid  # start_new_session: the leader's pid is the group id
    _signal_group(pgid, signal.SIGTERM)
    deadline_s = time.monotonic() + grace_s
    while time.monotonic() < deadline_s:
        process.poll()
        if not is_group_alive(pgid):
            break
        time.sleep(0.05)
    else:
        _signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5.0)


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _log_tail(path: Path, lines: int = 3, limit: int = 400) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(log unreadable)"
    tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return (" | ".join(tail) or "(log empty)")[-limit:]


def _start(command: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        try:
            return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
        except OSError as exc:
            raise MeasurementError(
                f"launch: cannot start {command[0]!r}: {exc.strerror or exc}; install vLLM "
                "(pip install vllm) or set target.launch.command to the server's command"
            ) from exc


async def _answers(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url) as response:
            await response.read()
            return response.status == 200
    except (TimeoutError, aiohttp.ClientError):
        return False


async def wait_until_healthy(base_url: str, process: subprocess.Popen[bytes], timeout_s: float,
                             log_path: Path, clock: Callable[[], float] = time.monotonic) -> None:
    """Poll ``/health`` then ``/v1/models``; raise if the server exits or the time runs out."""
    deadline_s = clock() + timeout_s
    name = Path(str(process.args[0] if isinstance(process.args, list) else process.args)).name
    timeout = aiohttp.ClientTimeout(total=5.0)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            code = process.poll()
            if code is not None:
                raise MeasurementError(
                    f"launch: {name} exited with code {code} before it was healthy on {base_url}; "
                    f"see its log {log_path}: {_log_tail(log_path)}")
            if await _answers(session, base_url + "/health") and \
                    await _answers(session, base_url + "/v1/models"):
                return
            if clock() >= deadline_s:
                raise MeasurementError(
                    f"launch: {name} was not healthy on {base_url}/health after {timeout_s:g} s "
                    f"and was stopped; see its log {log_path} (last: {_log_tail(log_path, 1)}); "
                    "if the model needs longer to load, raise target.launch.startup_timeout_s")
            await asyncio.sleep(POLL_INTERVAL_S)


async def fetch_version(base_url: str) -> str | None:
    """``/version`` of a vLLM-compatible server as "vllm X.Y"; ``None`` when it does not say."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3.0)) as session, \
                session.get(base_url.rstrip("/") + "/version") as response:
            body = await response.json(content_type=None) if response.status == 200 else None
    except (TimeoutError, aiohttp.ClientError, ValueError):
        return None
    version = body.get("version") if isinstance(body, dict) else None
    if not isinstance(version, str) or not version:
        return None
    return version if " " in version else f"vllm {version}"


def _log_path(loaded: LoadedConfig, log_dir: Path, port: int) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return log_dir / f"{loaded.config.name}-{stamp}-{port}.log"


@asynccontextmanager
async def launch_server(loaded: LoadedConfig,
                        log_dir: str | Path | None = None) -> AsyncIterator[LaunchedServer]:
    """The server for ``loaded``, healthy; stopped (the whole process group) on leaving."""
    launch = loaded.config.target.launch or LaunchSettings()
    port = find_free_port()
    command = build_command(loaded, port)
    log_path = _log_path(loaded, resolve_log_dir(log_dir), port).resolve()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **launch.env}
    base_url = f"http://{HOST}:{port}"
    started_s = time.monotonic()
    process = _start(command, env, log_path)
    def safety_net() -> None:  # if the interpreter exits before the finally below runs
        stop_process_group(process, 2.0)

    atexit.register(safety_net)
    try:
        await wait_until_healthy(base_url, process, launch.startup_timeout_s, log_path)
        startup_s = time.monotonic() - started_s
        facts = parse_startup_log(log_path.read_text(encoding="utf-8", errors="replace"))
        if facts.engine_version is None:
            facts = _with_version(facts, await fetch_version(base_url))
        yield LaunchedServer(base_url, LaunchRecord(tuple(command), str(log_path), port,
                                                    process.pid, startup_s, facts))
    finally:
        stop_process_group(process)
        atexit.unregister(safety_net)


def _with_version(facts: StartupFacts, version: str | None) -> StartupFacts:
    values = asdict(facts)
    values["engine_version"] = version
    return StartupFacts(**values)
