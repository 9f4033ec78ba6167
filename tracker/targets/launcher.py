"""Launch a vLLM server for a config (``kind: vllm`` without ``base_url``), and always stop it.

``launch_server`` starts ``target.launch.command`` (``vllm serve`` by default) with the model, the
config's engine args as flags and ``--host 127.0.0.1 --port FREE_PORT``, in its own process group,
with its output in a log file (mode 0600), redacted as it is written (its supervisor copies it
through the one redaction, knowing the run's key and ``launch.env_from``'s values). The server gets
a minimal environment (``build_server_env``), never the tracker's whole one, which holds the
database URL, the webhook and API keys. With ``launch.cpus`` the server runs on those CPUs and the
tracker's client on the others while it runs (``tracker.targets.pinning``). It waits until
``/health`` and ``/v1/models`` answer, then reads the startup facts from ``/metrics`` and the log
(``tracker.targets.startup``). A fact that is missing is "not reported", not an error. A server
that exits or never gets healthy fails the launch with the root-cause line of its log
(``tracker.targets.root_cause``) and the log's path. On leaving, however that happens (the run
ends, an error, a timeout, Ctrl-C), the whole process group gets SIGTERM, then SIGKILL after a
grace period. When the tracker dies without leaving (SIGKILL), the server's supervisor
(``tracker.targets.supervisor``) stops the group, and a server whose supervisor died too is stopped
by the next launch through the pid file it left next to its log.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from tracker.errors import ConfigError, MeasurementError
from tracker.inputs.configs import LaunchSettings, LoadedConfig
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.load.generator import Endpoint
from tracker.redaction import is_secret_name, known_secrets, redact_one_line
from tracker.targets.pinning import Pinning, build_pinning_env, check_pinning, keep_client_off
from tracker.targets.root_cause import parse_program, read_root_cause
from tracker.targets.startup import StartupFacts, fetch_startup_facts, parse_startup_log
from tracker.targets.supervisor import is_group_alive as is_group_alive  # callers check LaunchRecord.pid
from tracker.targets.supervisor import reap_leftover_servers, stop_group

LOG_DIR_ENV = "TRACKER_LOG_DIR"
DEFAULT_LOG_DIR = "tracker-logs"
HOST = "127.0.0.1"
POLL_INTERVAL_S = 0.2
TERM_GRACE_S = 15.0
_RESERVED_FLAGS = ("host", "port")
# What a serving engine needs from the tracker's environment; the rest stays with the tracker.
_PASSED_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "PYTHONPATH", "VIRTUAL_ENV", "XDG_CACHE_HOME",
})
_PASSED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "NCCL_", "HF_", "HUGGING_FACE_", "TRANSFORMERS_",
                    "VLLM_", "TORCH_", "PYTORCH_", "TRITON_")


@dataclass(frozen=True, slots=True)
class LaunchRecord:
    command: tuple[str, ...]  # flags come from the config, which never holds a secret
    log_path: str
    port: int
    pid: int  # the process group's leader (and the group id)
    startup_s: float
    facts: StartupFacts
    pinning: Pinning | None = None  # launch.cpus: the server's CPUs and the client's

    def as_environment(self) -> dict[str, object]:
        cpus = (None, None) if self.pinning is None else \
            (sorted(self.pinning.server), sorted(self.pinning.client))
        return {"command": list(self.command), "log_path": self.log_path, "port": self.port,
                "pid": self.pid, "startup_s": round(self.startup_s, 3),
                "cpus": cpus[0], "client_cpus": cpus[1], **self.facts.as_environment()}


@dataclass(frozen=True, slots=True)
class LaunchedServer:
    base_url: str
    record: LaunchRecord


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


def _log_tail(path: Path, lines: int = 3, limit: int = 400) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(log unreadable)"
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return (" | ".join(redact_one_line(line) for line in tail) or "(log empty)")[-limit:]


def explain_failure(log_path: Path) -> str:
    """Where to look and what the log says: its root-cause line where it has one (``ValueError:
    …``, argparse's ``error:``), else its last lines, redacted."""
    cause = read_root_cause(log_path)
    if cause is None:
        return f"see its log {log_path}: {_log_tail(log_path)}"
    return f"{cause.text} (line {cause.line_number} of its log {log_path})"


def build_server_env(loaded: LoadedConfig,
                     environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The launched server's whole environment: from the tracker's, only what an engine needs
    (PATH, HOME, locale, CUDA/NCCL/Hugging Face/vLLM/torch settings) and no variable whose name
    says it holds a secret, then the variables named in ``launch.env_from`` (each must be set),
    then the literal ``launch.env``."""
    environ = os.environ if environ is None else environ
    launch = loaded.config.target.launch or LaunchSettings()
    env = {name: value for name, value in environ.items()
           if (name in _PASSED_NAMES or name.startswith(_PASSED_PREFIXES))
           and not is_secret_name(name)}
    for name in launch.env_from:
        if name not in environ:
            raise ConfigError(f"{loaded.path}: target.launch.env_from: {name} is not set in the "
                              "tracker's environment; export it before the run or remove it "
                              "from env_from")
        env[name] = environ[name]
    return {**env, "PYTHONUNBUFFERED": "1", **launch.env}


@dataclass(frozen=True, slots=True)
class ServerProcess:
    """A launched server: its supervisor (our child, which exits with the server's code) and
    the server's process group."""

    supervisor: subprocess.Popen[bytes]
    pgid: int
    name: str
    pid_path: Path

    def poll(self) -> int | None:
        return self.supervisor.poll()


def _open_log(log_path: Path) -> int:
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)  # an older file of the same name keeps no wider mode
    return fd


def _start(command: list[str], env: dict[str, str], log_path: Path,
           pinning: Pinning | None = None, secrets: Sequence[str] = ()) -> ServerProcess:
    """The server under its supervisor (on ``pinning.server``'s CPUs, when given), which says
    the server's pid (or why it cannot start) and hides ``secrets`` (and the tracker's own known
    ones) in the server's log. They go on its stdin, never in its arguments."""
    pid_path = log_path.with_suffix(".pid")
    cpus = [] if pinning is None else ["--cpus", ",".join(map(str, sorted(pinning.server)))]
    supervise = [sys.executable, "-m", "tracker.targets.supervisor", "--owner-pid", str(os.getpid()),
                 "--pid-file", str(pid_path), "--grace-s", str(TERM_GRACE_S), *cpus,
                 "--secrets-on-stdin", "--", *command]
    log_fd = _open_log(log_path)
    try:
        supervisor = subprocess.Popen(supervise, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=log_fd, env=env, start_new_session=True)
    finally:
        os.close(log_fd)
    assert supervisor.stdin is not None and supervisor.stdout is not None
    with suppress(OSError), supervisor.stdin:  # it may have exited already
        said_secrets = {"secrets": sorted({*known_secrets(), *secrets})}
        supervisor.stdin.write(json.dumps(said_secrets).encode() + b"\n")
    with supervisor.stdout:
        line = supervisor.stdout.readline()
    try:
        said = parse_untrusted_json(line)
    except UntrustedJSONError:
        said = {}
    if isinstance(said, dict) and isinstance(said.get("pid"), int):
        return ServerProcess(supervisor, said["pid"], parse_program(command), pid_path)
    code = supervisor.wait()
    if isinstance(said, dict) and said.get("cause") == "cpus":
        raise MeasurementError(
            f"launch: {redact_one_line(str(said.get('error')))}; this host (its cgroup's cpuset) "
            "does not let the server run there: list CPUs in target.launch.cpus that it allows "
            "(taskset -cp $$ shows them)")
    if isinstance(said, dict) and "error" in said:
        raise MeasurementError(
            f"launch: cannot start {command[0]!r}: {redact_one_line(str(said['error']))}; "
            "install vLLM (pip install vllm) or set target.launch.command to the server's command")
    raise MeasurementError(f"launch: the supervisor of {command[0]!r} exited with code {code} "
                           f"before starting it; {explain_failure(log_path)}")


def stop_server(server: ServerProcess, grace_s: float = TERM_GRACE_S) -> None:
    """Send SIGTERM to the server's group and SIGKILL to what is left after ``grace_s``. Then its
    supervisor exits (it is reaped) and the pid file goes."""
    stop_group(server.pgid, grace_s, server.poll)
    try:
        server.supervisor.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        server.supervisor.kill()
        server.supervisor.wait()
    server.pid_path.unlink(missing_ok=True)


async def _answers(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url) as response:
            await response.read()
            return response.status == 200
    except (TimeoutError, aiohttp.ClientError):
        return False


async def wait_until_healthy(base_url: str, process: ServerProcess, timeout_s: float,
                             log_path: Path, clock: Callable[[], float] = time.monotonic) -> None:
    """Poll ``/health`` then ``/v1/models``, and raise if the server exits or the time runs out."""
    deadline_s = clock() + timeout_s
    name = process.name
    timeout = aiohttp.ClientTimeout(total=5.0)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            code = process.poll()
            if code is not None:
                raise MeasurementError(
                    f"launch: {name} exited with code {code} before it was healthy on {base_url}: "
                    f"{explain_failure(log_path)}")
            if await _answers(session, base_url + "/health") and \
                    await _answers(session, base_url + "/v1/models"):
                return
            if clock() >= deadline_s:
                cause = read_root_cause(log_path)
                said = f"line {cause.line_number}: {cause.text}" if cause else \
                    f"last: {_log_tail(log_path, 1)}"
                raise MeasurementError(
                    f"launch: {name} was not healthy on {base_url}/health after {timeout_s:g} s "
                    f"and was stopped; see its log {log_path} ({said}); if the model needs "
                    "longer to load, raise target.launch.startup_timeout_s")
            await asyncio.sleep(POLL_INTERVAL_S)


async def fetch_version(base_url: str) -> str | None:
    """``/version`` of a vLLM-compatible server as "vllm X.Y", or ``None`` when it does not say."""
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


async def read_startup_facts(base_url: str, log_path: Path) -> StartupFacts:
    """``/metrics``' facts over the log's, with the version from ``/version`` when the log has
    none."""
    logged = parse_startup_log(log_path.read_text(encoding="utf-8", errors="replace"))
    facts = (await fetch_startup_facts(Endpoint(base_url))).merged_over(logged)
    if facts.engine_version is None:
        facts = replace(facts, engine_version=await fetch_version(base_url))
    return facts


@asynccontextmanager
async def launch_server(loaded: LoadedConfig,
                        log_dir: str | Path | None = None) -> AsyncIterator[LaunchedServer]:
    """The server for ``loaded``, healthy, and stopped (the whole process group) on leaving.
    With ``launch.cpus``, the tracker's threads stay off the server's CPUs until it is stopped."""
    launch = loaded.config.target.launch or LaunchSettings()
    pinning = check_pinning(loaded)
    env = build_server_env(loaded)
    port = find_free_port()
    command = build_command(loaded, port)
    if pinning is not None:
        env.update(await asyncio.to_thread(build_pinning_env, loaded, pinning, command, env))
    log_path = _log_path(loaded, resolve_log_dir(log_dir), port).resolve()
    if log_path.parent.is_dir():  # a server of a tracker killed with its supervisor: stop it
        await asyncio.to_thread(reap_leftover_servers, log_path.parent, TERM_GRACE_S)
    base_url = f"http://{HOST}:{port}"
    started_s = time.monotonic()
    secrets = [env[name] for name in launch.env_from if name in env]
    process = _start(command, env, log_path, pinning, secrets)
    def safety_net() -> None:  # if the interpreter exits before the finally below runs
        stop_server(process, 2.0)

    atexit.register(safety_net)
    try:
        with keep_client_off(pinning.server) if pinning is not None else nullcontext():
            try:
                await wait_until_healthy(base_url, process, launch.startup_timeout_s, log_path)
                startup_s = time.monotonic() - started_s
                facts = await read_startup_facts(base_url, log_path)
                yield LaunchedServer(base_url, LaunchRecord(
                    tuple(command), str(log_path), port, process.pgid, startup_s, facts, pinning))
            finally:
                stop_server(process)
    finally:
        atexit.unregister(safety_net)
