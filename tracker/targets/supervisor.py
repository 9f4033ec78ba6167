"""``python -m tracker.targets.supervisor --owner-pid PID --pid-file FILE [--cpus 0,1]
[--secrets-on-stdin] -- COMMAND``: a launched server that dies with its tracker, and whose log
holds no secret.

The launcher starts this small process (standard library and ``tracker.redaction`` only) for each
server it launches. It starts COMMAND in a process group of its own, writes FILE (who owns the
server, its group, the start times that tell a reused PID apart), tells the launcher the server's
PID on stdout, then watches. The server's output (stdout and stderr) comes through this process,
line by line, into its own stderr (the log file) through the one redaction: the secrets named by
the environment (``HF_TOKEN``…) and, with ``--secrets-on-stdin``, those the launcher writes as a
JSON line on stdin (the run's key, ``launch.env_from``'s values), never in its arguments. With
``--cpus`` it first moves itself onto those CPUs, and the server inherits them. When the tracker
that started it is gone, even killed with SIGKILL (when no ``finally`` or ``atexit`` runs), it
stops the server's whole group: SIGTERM, then SIGKILL after the grace period. When the server
exits, it stops what the server left in its group and exits with the server's code. The parent is
watched by polling ``os.getppid()``: ``PR_SET_PDEATHSIG`` fires when the launching *thread* exits,
which is not the tracker's end.

When the supervisor was killed too, FILE remains: the next launch on the host
(``reap_leftover_servers``) stops a group whose owner is gone and removes the file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import IO

from tracker.errors import ExitCode
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.redaction import redact_text, refresh_environment, register_secret

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.2
LOG_LINE_BYTES = 64 * 1024  # a longer line is copied in pieces of this size
COPY_DRAIN_S = 5.0  # how long the server's last output may take to reach the log once it exits
_PROC = Path("/proc")


# --- processes and groups ------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` from the state on (field 3 is index 0), or None without it."""
    try:
        return (_PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks since boot): a reused PID has another value."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def process_is_alive(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie waiting to be reaped has ended)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive
    fields = _stat_fields(pid)
    return fields is None or fields[0] != "Z"


def is_group_alive(pgid: int) -> bool:
    """True while any process of the group is alive (zombies waiting to be reaped do not count)."""
    if not _PROC.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for stat in _PROC.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def stop_group(pgid: int, grace_s: float, reap: Callable[[], object] = lambda: None) -> None:
    """Send SIGTERM to the whole group and SIGKILL to what is left after ``grace_s``.

    ``reap`` is called while waiting (a parent polls its child there, so the child does not stay
    a zombie)."""
    signal_group(pgid, signal.SIGTERM)
    deadline_s = time.monotonic() + grace_s
    while time.monotonic() < deadline_s:
        reap()
        if not is_group_alive(pgid):
            return
        time.sleep(0.05)
    signal_group(pgid, signal.SIGKILL)


# --- the pid file --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PidRecord:
    """Who owns a launched server: written by its supervisor, removed when the group is gone."""

    host: str
    owner_pid: int
    owner_start_ticks: int | None
    supervisor_pid: int
    supervisor_start_ticks: int | None
    server_pgid: int
    server_start_ticks: int | None
    command: str


def write_pid_file(path: Path, record: PidRecord) -> None:
    """``record`` to ``path`` (mode 0600), whole or not at all."""
    temporary = path.with_name(f".{path.name}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(asdict(record), handle)
    os.replace(temporary, path)


def read_pid_file(path: Path) -> PidRecord | None:
    """The record in ``path``, or None when it is unreadable or not one of ours."""
    try:
        return PidRecord(**parse_untrusted_json(path.read_text(encoding="utf-8")))
    except (OSError, UntrustedJSONError, TypeError):
        return None


def _still_running(pid: int, start_ticks: int | None) -> bool:
    return process_is_alive(pid) and (start_ticks is None or
                                      process_start_ticks(pid) in (None, start_ticks))


def reap_leftover_servers(directory: Path, grace_s: float) -> list[PidRecord]:
    """Stop the servers launched on this host whose tracker and supervisor are both gone (their
    pid files in ``directory``) and return what was reaped. Others' live servers are left alone."""
    reaped: list[PidRecord] = []
    for path in sorted(directory.glob("*.pid")):
        record = read_pid_file(path)
        if record is None or record.host != socket.gethostname():
            continue
        if _still_running(record.owner_pid, record.owner_start_ticks) or \
                _still_running(record.supervisor_pid, record.supervisor_start_ticks):
            continue  # its owner, or the supervisor that stops it, is alive
        leader_ticks = process_start_ticks(record.server_pgid)
        # a group id is never reused while the group lives; its leader's pid may be, once gone
        if is_group_alive(record.server_pgid) and leader_ticks in (None, record.server_start_ticks):
            log.warning("stopping %s (process group %d) left running by tracker pid %d, which "
                        "is gone", record.command, record.server_pgid, record.owner_pid)
            stop_group(record.server_pgid, grace_s)
        path.unlink(missing_ok=True)
        reaped.append(record)
    return reaped


# --- the supervisor ------------------------------------------------------------------------


def _cpu_ids(text: str) -> set[int]:
    return {int(part) for part in text.split(",")}


def _parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tracker.targets.supervisor", description=__doc__)
    parser.add_argument("--owner-pid", type=int, required=True, help="the tracker's pid")
    parser.add_argument("--pid-file", type=Path, required=True)
    parser.add_argument("--grace-s", type=float, default=15.0, help="SIGTERM to SIGKILL")
    parser.add_argument("--cpus", type=_cpu_ids, default=None,
                        help="comma-separated CPU ids: this supervisor and the server run on them")
    parser.add_argument("--secrets-on-stdin", action="store_true",
                        help='read {"secrets": [...]} (one JSON line) on stdin: hidden in the log')
    parser.add_argument("command", nargs="+", help="the server's command (after --)")
    return parser.parse_args(argv)


def _say(message: dict[str, object]) -> None:
    """One line to the launcher, then stdout is closed (nothing more goes that way)."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def read_secrets(source: IO[str]) -> None:
    """Register the secrets the launcher sends (one JSON line), if it sends any."""
    try:
        said = parse_untrusted_json(source.readline() or "{}")
    except (OSError, UntrustedJSONError):
        said = {}
    secrets = said.get("secrets") if isinstance(said, dict) else None
    if isinstance(secrets, list):
        register_secret(*(value for value in secrets if isinstance(value, str)))


def copy_redacted(source: IO[bytes], log: IO[bytes]) -> None:
    """The server's output to the log, line by line, each line through the one redaction."""
    with contextlib.suppress(OSError, ValueError):
        for line in iter(lambda: source.readline(LOG_LINE_BYTES), b""):
            log.write(redact_text(line.decode("utf-8", "replace")).encode("utf-8", "replace"))
            log.flush()


def _start_copying(server: subprocess.Popen[bytes]) -> threading.Thread:
    assert server.stdout is not None
    copier = threading.Thread(target=copy_redacted, args=(server.stdout, sys.stderr.buffer),
                              name="server-log", daemon=True)
    copier.start()
    return copier


def _exit_code(returncode: int) -> int:
    return returncode if returncode >= 0 else 128 - returncode  # killed by signal N: 128 + N


def _watch(server: subprocess.Popen[bytes], owner_pid: int, grace_s: float,
           stopping: list[int]) -> int:
    while True:
        code = server.poll()
        if code is not None:
            if is_group_alive(server.pid):
                stop_group(server.pid, grace_s)  # what the server left in its group
            return _exit_code(code)
        if os.getppid() != owner_pid or stopping:
            stop_group(server.pid, grace_s, server.poll)
            return _exit_code(server.wait())
        time.sleep(POLL_INTERVAL_S)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    stopping: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    if os.getppid() != args.owner_pid:
        _say({"error": "the tracker that launched it is already gone"})
        return ExitCode.CANNOT_EXECUTE
    if args.cpus is not None:  # the server inherits the affinity: its threads stay on them
        try:
            os.sched_setaffinity(0, args.cpus)
        except (AttributeError, OSError) as exc:
            cpus = ",".join(map(str, sorted(args.cpus)))
            _say({"error": f"cannot run on CPUs {cpus}: {getattr(exc, 'strerror', None) or exc}",
                  "cause": "cpus"})
            return ExitCode.CANNOT_EXECUTE
    refresh_environment()  # the server's environment: HF_TOKEN and the like
    if args.secrets_on_stdin:
        read_secrets(sys.stdin)
    try:  # stdout and stderr: through this supervisor, redacted, to the log it writes to
        server = subprocess.Popen(args.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        _say({"error": exc.strerror or str(exc)})
        return ExitCode.CANNOT_EXECUTE
    copier = _start_copying(server)
    try:
        write_pid_file(args.pid_file, PidRecord(
            socket.gethostname(), args.owner_pid, process_start_ticks(args.owner_pid),
            os.getpid(), process_start_ticks(os.getpid()), server.pid,
            process_start_ticks(server.pid), Path(args.command[0]).name))
    except OSError as exc:
        stop_group(server.pid, args.grace_s, server.poll)
        _say({"error": f"cannot write {args.pid_file}: {exc.strerror or exc}"})
        return ExitCode.CANNOT_EXECUTE
    try:
        with contextlib.suppress(OSError):  # the launcher is gone: the watch below sees it
            _say({"pid": server.pid})
        return _watch(server, args.owner_pid, args.grace_s, stopping)
    finally:
        copier.join(COPY_DRAIN_S)  # the server's last words reach the log before it is read
        args.pid_file.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
