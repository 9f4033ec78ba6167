"""The launch supervisor with real processes: a server dies with its tracker, leftovers are reaped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tracker.targets.supervisor import (
    PidRecord,
    is_group_alive,
    process_is_alive,
    process_start_ticks,
    read_pid_file,
    reap_leftover_servers,
    write_pid_file,
)

# a "server" that starts a child in its group, and both ignore nothing: SIGTERM stops them
SERVER = ("import subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
          "time.sleep(60)")


def _wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline_s = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline_s, f"timed out waiting until {what}"
        time.sleep(0.05)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _supervise(owner_pid: int, pid_file: Path, *command: str) -> list[str]:
    return [sys.executable, "-m", "tracker.targets.supervisor", "--owner-pid", str(owner_pid),
            "--pid-file", str(pid_file), "--grace-s", "2", "--", *command]


def test_the_server_group_is_stopped_when_the_tracker_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    # the "tracker": starts the supervisor, says the server's pid, then waits to be killed
    owner_script = (
        "import os, subprocess, sys, time; "
        "command = [sys.executable, '-m', 'tracker.targets.supervisor', '--owner-pid', str(os.getpid()), "
        "'--pid-file', sys.argv[1], '--grace-s', '2', '--', sys.executable, '-c', sys.argv[2]]; "
        "supervisor = subprocess.Popen(command, stdout=subprocess.PIPE, start_new_session=True); "
        "print(supervisor.stdout.readline().decode(), end='', flush=True); time.sleep(60)")
    owner = subprocess.Popen([sys.executable, "-c", owner_script, str(pid_file), SERVER],
                             stdout=subprocess.PIPE)
    try:
        assert owner.stdout is not None
        server_pid = json.loads(owner.stdout.readline())["pid"]
        assert is_group_alive(server_pid)
        record = read_pid_file(pid_file)
        assert record is not None and record.owner_pid == owner.pid
        assert record.server_pgid == server_pid and record.host == socket.gethostname()
        owner.kill()  # SIGKILL: no finally, no atexit in the tracker
        owner.wait()
        _wait_until(lambda: not is_group_alive(server_pid), 10, "the server group is gone")
        _wait_until(lambda: not pid_file.exists(), 5, "the supervisor removed its pid file")
        # it removes the file just before it exits: on a busy machine the exit may lag a moment
        _wait_until(lambda: not process_is_alive(record.supervisor_pid), 5,
                    "the supervisor exited")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()


def test_when_the_server_exits_its_group_is_stopped_and_its_code_returned(
        tmp_path: Path) -> None:
    server = ("import os, subprocess, sys; "
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              "print(child.pid, flush=True); sys.exit(3)")
    pid_file = tmp_path / "server.pid"
    supervisor = subprocess.run(_supervise(os.getpid(), pid_file, sys.executable, "-c", server),
                                capture_output=True, timeout=30, check=False)
    said = json.loads(supervisor.stdout.decode().splitlines()[0])
    assert supervisor.returncode == 3
    assert not is_group_alive(said["pid"])  # the child it left behind was stopped
    assert not pid_file.exists()


def test_a_command_that_cannot_start_is_reported_on_the_handshake(tmp_path: Path) -> None:
    supervisor = subprocess.run(_supervise(os.getpid(), tmp_path / "s.pid", "/nonexistent/vllm"),
                                capture_output=True, timeout=30, check=False)
    assert supervisor.returncode == 127
    assert json.loads(supervisor.stdout) == {"error": "No such file or directory"}


def _leftover(tmp_path: Path, owner_pid: int, ticks_offset: int = 0
              ) -> tuple[subprocess.Popen[bytes], Path]:
    server = subprocess.Popen([sys.executable, "-c", SERVER], start_new_session=True)
    _wait_until(lambda: process_start_ticks(server.pid) is not None, 5, "the server runs")
    ticks = process_start_ticks(server.pid)
    assert ticks is not None
    path = tmp_path / "left.pid"
    write_pid_file(path, PidRecord(socket.gethostname(), owner_pid, None, _dead_pid(), None,
                                   server.pid, ticks + ticks_offset, "vllm"))
    return server, path


def _stop(server: subprocess.Popen[bytes]) -> None:
    if is_group_alive(server.pid):
        os.killpg(server.pid, signal.SIGKILL)
    server.wait()


def test_a_server_left_by_a_dead_tracker_and_supervisor_is_reaped(tmp_path: Path) -> None:
    server, path = _leftover(tmp_path, _dead_pid())
    try:
        (reaped,) = reap_leftover_servers(tmp_path, 2.0)
        assert reaped.server_pgid == server.pid
        server.wait(5)  # our child: reap it so that the group is gone
        assert not is_group_alive(server.pid) and not path.exists()
    finally:
        _stop(server)


def test_a_server_whose_tracker_is_alive_is_left_alone(tmp_path: Path) -> None:
    server, path = _leftover(tmp_path, os.getpid())
    try:
        assert reap_leftover_servers(tmp_path, 2.0) == []
        assert is_group_alive(server.pid) and path.exists()
    finally:
        _stop(server)


def test_a_group_leader_pid_reused_by_another_process_is_not_killed(tmp_path: Path) -> None:
    server, path = _leftover(tmp_path, _dead_pid(), ticks_offset=1)  # started at another time
    try:
        assert len(reap_leftover_servers(tmp_path, 2.0)) == 1
        assert is_group_alive(server.pid)  # not the server the file named
        assert not path.exists()  # the file is stale either way
    finally:
        _stop(server)
