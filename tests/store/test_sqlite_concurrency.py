"""SQLite shared with other processes: WAL, the busy timeout, and a lock held too long.

Another program's connection is a plain ``sqlite3`` connection on the same file; ``tracker run``
runs through ``tracker.cli.main.main`` on the embedded simulator.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from tests.simconfigs import FAST_SIM
from tracker.cli.main import main
from tracker.errors import StoreError, StoreLockedError
from tracker.pipeline import execute as pipeline
from tracker.results import RunStatus
from tracker.store.db import (
    SQLITE_BUSY_TIMEOUT_ENV,
    open_store,
    redact_url,
    retry_when_locked,
)
from tracker.store.runs import fetch_run, fetch_runs

QUICK_THEN_SLOW = """\
name: quick-then-slow
workloads:
  - name: quick
    prompts: {source: fixed, text: "hello"}
    max_tokens: 2
    concurrency: 1
    num_requests: 1
  - name: slow
    prompts: {source: fixed, text: "hello"}
    max_tokens: 100
    ignore_eos: true
    concurrency: 1
    num_requests: 1
"""


@pytest.fixture
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A migrated database file, a simulator config (about 1 s for the slow workload) and a
    suite; writes wait 1 s for another process's lock."""
    monkeypatch.setenv(SQLITE_BUSY_TIMEOUT_ENV, "1")
    config = tmp_path / "sim.yaml"
    config.write_text(FAST_SIM.replace("decode_base_s: 0.001", "decode_base_s: 0.01"),
                      encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text(QUICK_THEN_SLOW, encoding="utf-8")
    db = tmp_path / "tracker.db"
    open_store(f"sqlite:///{db}").dispose()  # the schema exists before anyone holds a lock
    return {"config": config, "suite": suite, "db": db}


@pytest.fixture
def other_process(paths: dict[str, Path]) -> Iterator[sqlite3.Connection]:
    """Another program's connection to the same file, in autocommit mode (it says BEGIN)."""
    connection = sqlite3.connect(paths["db"], isolation_level=None, timeout=10,
                                 check_same_thread=False)
    try:
        yield connection
    finally:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        connection.close()


def _run(paths: dict[str, Path]) -> int:
    return main(["run", "--config", str(paths["config"]), "--suite", str(paths["suite"]),
                 "--db", str(paths["db"]), "--quiet"])


def _only_run(db: Path) -> tuple[RunStatus, str | None, list[str]]:
    engine = open_store(f"sqlite:///{db}")
    try:
        with Session(engine) as session:
            (summary,) = fetch_runs(session, 10)
            run = fetch_run(session, summary.run_id)
    finally:
        engine.dispose()
    return run.status, run.status_reason, [w.name for w in run.workloads]


def _count(connection: sqlite3.Connection, table: str) -> int:
    value: int = connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    return value


def test_the_store_file_is_in_wal_mode(paths: dict[str, Path],
                                       other_process: sqlite3.Connection) -> None:
    assert other_process.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_reader_holding_a_transaction_does_not_stop_tracker_run_from_storing(
        paths: dict[str, Path], other_process: sqlite3.Connection,
        capsys: pytest.CaptureFixture[str]) -> None:
    other_process.execute("BEGIN")
    assert _count(other_process, "runs") == 0  # holds its read snapshot from here
    assert _run(paths) == 0, capsys.readouterr().err
    assert _count(other_process, "runs") == 0  # its snapshot is still the one it read
    other_process.execute("COMMIT")
    status, _, workloads = _only_run(paths["db"])
    assert status is RunStatus.COMPLETED and workloads == ["quick", "slow"]


def test_a_writer_holding_the_lock_past_the_busy_timeout_is_one_clear_error(
        paths: dict[str, Path], other_process: sqlite3.Connection,
        capsys: pytest.CaptureFixture[str]) -> None:
    other_process.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    code = _run(paths)
    waited_s = time.monotonic() - started
    other_process.execute("ROLLBACK")
    err = capsys.readouterr().err
    assert code == 3, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    url = redact_url(f"sqlite:///{paths['db']}")
    assert line.startswith(f"error: database {url} was locked by another process for over 1 s; "
                           "find the process")
    assert SQLITE_BUSY_TIMEOUT_ENV in line
    assert "internal error" not in err and "Traceback" not in err
    assert waited_s < 15  # the 1 s from the environment, not the 30 s default
    assert _count(other_process, "runs") == 0  # locked before the run began: nothing to keep


class _Seen(logging.Handler):
    """Sets ``event`` when a record containing ``needle`` is logged."""

    def __init__(self, needle: str) -> None:
        super().__init__(logging.WARNING)
        self.needle = needle
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.event.set()


def test_a_lock_taken_mid_run_keeps_the_run_as_partial_once_it_is_released(
        paths: dict[str, Path], other_process: sqlite3.Connection,
        capsys: pytest.CaptureFixture[str]) -> None:
    waiting = _Seen("waiting up to")
    logging.getLogger("tracker.pipeline.execute").addHandler(waiting)
    problems: list[str] = []

    def hold_the_lock_during_the_slow_workload() -> None:
        deadline = time.monotonic() + 60
        while _count(other_process, "workload_results") < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        other_process.execute("BEGIN IMMEDIATE")
        if _count(other_process, "workload_results") != 1:
            problems.append("the slow workload was stored before the lock was taken")
        if not waiting.event.wait(60):
            problems.append("tracker run never waited to store its final status")
        other_process.execute("ROLLBACK")

    holder = threading.Thread(target=hold_the_lock_during_the_slow_workload)
    holder.start()
    try:
        code = _run(paths)
    finally:
        holder.join(90)
        logging.getLogger("tracker.pipeline.execute").removeHandler(waiting)
    assert problems == []
    err = capsys.readouterr().err
    assert code == 3, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert "was locked by another process for over 1 s" in line
    assert line.endswith("run 1 kept as partial with what was measured (see `tracker show 1`)")
    assert "internal error" not in err and "Traceback" not in err
    status, reason, workloads = _only_run(paths["db"])
    assert status is RunStatus.PARTIAL and "locked by another process" in (reason or "")
    assert workloads == ["quick", "slow"]  # the slow one was stored once the lock was gone


def test_a_lock_that_outlasts_the_final_wait_leaves_the_run_running_and_says_so(
        paths: dict[str, Path], other_process: sqlite3.Connection,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "LOCKED_FINAL_WAIT_S", 2.0)  # instead of a minute
    done = threading.Event()
    taken: list[int] = []

    def hold_the_lock_until_tracker_run_returns() -> None:
        deadline = time.monotonic() + 60
        while _count(other_process, "workload_results") < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        other_process.execute("BEGIN IMMEDIATE")
        taken.append(_count(other_process, "workload_results"))
        done.wait(120)
        other_process.execute("ROLLBACK")

    holder = threading.Thread(target=hold_the_lock_until_tracker_run_returns)
    holder.start()
    try:
        started = time.monotonic()
        code = _run(paths)
        waited_s = time.monotonic() - started
    finally:
        done.set()
        holder.join(90)
    assert taken == [1]  # the lock was taken before the slow workload was stored
    err = capsys.readouterr().err
    assert code == 3, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.endswith("run 1 could not be marked partial (still locked after 2 s more) and "
                         "stays 'running' with what was saved (see `tracker show 1`)")
    assert waited_s < 30
    # read as it was left (opening the store could let a reaper of abandoned runs close it)
    assert other_process.execute("SELECT status FROM runs").fetchall() == [("running",)]
    assert other_process.execute("SELECT name FROM workload_results").fetchall() == [("quick",)]


def test_a_busy_timeout_that_is_not_a_positive_number_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SQLITE_BUSY_TIMEOUT_ENV, "soon")
    with pytest.raises(StoreError, match=rf"{SQLITE_BUSY_TIMEOUT_ENV}: must be a number of "
                       r"seconds > 0 \(got 'soon'\)"):
        open_store(f"sqlite:///{tmp_path / 'tracker.db'}")


def test_retry_when_locked_runs_a_transaction_again_until_the_lock_is_gone(
        paths: dict[str, Path], other_process: sqlite3.Connection) -> None:
    engine = open_store(f"sqlite:///{paths['db']}")
    tries: list[float] = []

    def write() -> int:
        tries.append(time.monotonic())
        if len(tries) == 2:
            other_process.execute("ROLLBACK")  # the other process is done after our first try
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE scratch (x INTEGER)"))
        return len(tries)

    try:
        other_process.execute("BEGIN IMMEDIATE")
        assert retry_when_locked(write, wait_s=10) == 2
        other_process.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreLockedError, match="locked by another process for over 1 s"):
            retry_when_locked(write, wait_s=0.5)
    finally:
        engine.dispose()
    assert tries[1] - tries[0] >= 0.9  # the first try waited out the 1 s busy timeout
