"""No run left behind: a `tracker run` killed with SIGKILL mid-workload leaves neither a run
``running`` forever nor its launched server."""

from __future__ import annotations

import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.targets.test_launcher import make_loaded
from tracker.targets.launcher import is_group_alive

ROOT = Path(__file__).resolve().parents[2]
SUITE = """\
name: short-then-long
workloads:
  - name: warm
    prompts: {source: synthetic, input_tokens: 16}
    max_tokens: 4
    concurrency: 2
    num_requests: 4
  - name: long
    prompts: {source: synthetic, input_tokens: 16}
    max_tokens: 2000
    ignore_eos: true
    concurrency: 2
    num_requests: 50
"""


def _wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline_s = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline_s, f"timed out waiting until {what}"
        time.sleep(0.1)


def _stored_workloads(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as connection:
            return int(connection.execute("SELECT count(*) FROM workload_results").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is being created
        return 0


def _listens(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _tracker(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracker", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_run_killed_mid_workload_is_partial_with_a_reason_and_leaves_no_server(
        tmp_path: Path) -> None:
    config, suite, db, log_dir = (tmp_path / "launched.yaml", tmp_path / "suite.yaml",
                                  tmp_path / "runs.db", tmp_path / "logs")
    config.write_text(yaml.safe_dump(
        make_loaded().config.model_dump(mode="json", exclude_defaults=True)))
    suite.write_text(SUITE)
    env = {**os.environ, "TRACKER_LOG_DIR": str(log_dir)}
    tracker = subprocess.Popen(
        [sys.executable, "-m", "tracker", "run", "--config", str(config), "--suite", str(suite),
         "--db", f"sqlite:///{db}", "--quiet"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_until(lambda: _stored_workloads(db) >= 1, 60, "the first workload is stored")
        tracker.kill()  # SIGKILL, mid-way through the long workload
        tracker.wait()
    finally:
        if tracker.poll() is None:
            tracker.kill()
            tracker.wait()
    (log_path,) = log_dir.glob("*.log")
    log = log_path.read_text()
    server_pid = int(re.search(r"\[tracker-sim pid=(\d+)\]", log).group(1))  # type: ignore[union-attr]
    port = int(re.search(r"server on http://127\.0\.0\.1:(\d+)", log).group(1))  # type: ignore[union-attr]

    listing = _tracker("runs", "--db", f"sqlite:///{db}", env=env)
    assert listing.returncode == 0, listing.stderr
    (row,) = [line for line in listing.stdout.splitlines() if line.lstrip().startswith("1 ")]
    assert "partial" in row
    shown = _tracker("show", "1", "--db", f"sqlite:///{db}", env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"the tracker running it (pid {tracker.pid} on host {socket.gethostname()}) " \
           "stopped without finishing (killed?); marked partial by `tracker runs`" in shown.stdout
    assert "1 measured workload result kept (the suite plans 2)" in shown.stdout

    _wait_until(lambda: not is_group_alive(server_pid), 20, "the launched server's group is gone")
    assert not _listens(port)
    _wait_until(lambda: not list(log_dir.glob("*.pid")), 5, "its supervisor is gone")
