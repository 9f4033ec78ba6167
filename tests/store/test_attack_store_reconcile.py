"""Runs left `running` by a tracker that is gone are closed by whoever reads the store next, the
dashboard too; a full disk ends a run with one clear line and the run closed, not `running`."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.cli.test_main import SMALL_SUITE
from tests.simconfigs import FAST_SIM
from tests.store.test_runs import _config, _suite
from tracker.dashboard import data
from tracker.results import RunStatus
from tracker.store import begin_run, fetch_run, fetch_runs, open_store, save_config_version, save_suite
from tracker.store.leases import take_run_lease

# A disk that fills up: SQLite's own limit on the file's pages gives the error a full disk gives
# (SQLITE_FULL, "database or disk is full"), without a filesystem to fill.
FULL_DISK = """\
import sys
from sqlalchemy import event
from sqlalchemy.pool import Pool

@event.listens_for(Pool, "connect")
def _full(dbapi_connection, _record):
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA max_page_count = {int(sys.argv[1])}")
    cursor.close()

from tracker.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _run_left_running(engine: Engine) -> int:
    """A run whose tracker was SIGKILLed: `running`, its owner's PID gone, on this host."""
    now = datetime.now(UTC)
    with Session(engine) as session, session.begin():
        run_id = begin_run(session, config_version_id=save_config_version(session, _config()),
                           suite_id=save_suite(session, _suite()), started_at=now,
                           host=socket.gethostname(), tracker_version="0.1.0", simulated=True,
                           environment={})
        take_run_lease(session, run_id, _dead_pid(), now)
    return run_id


def test_the_dashboard_closes_a_run_whose_tracker_was_killed(store: Engine, db_url: str) -> None:
    run_id = _run_left_running(store)
    data.clear_caches()
    state = data.query_database_state(db_url)
    assert state.ready, state.message
    with Session(store) as session:
        run = fetch_run(session, run_id)
    assert run.status is RunStatus.FAILED  # nothing was measured
    assert run.status_reason is not None and "killed?" in run.status_reason


def test_a_full_disk_is_one_line_exit_3_and_the_run_is_not_left_running(tmp_path: Path) -> None:
    (tmp_path / "sim.yaml").write_text(FAST_SIM, encoding="utf-8")
    big = SMALL_SUITE.replace("num_requests: 6", "num_requests: 400")
    (tmp_path / "suite.yaml").write_text(big, encoding="utf-8")
    db = tmp_path / "t.db"
    open_store(f"sqlite:///{db}").dispose()
    with sqlite3.connect(db) as connection:
        connection.execute("VACUUM")  # no free page left: every new row needs a new page
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
    full = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(pages), "run", "--config", str(tmp_path / "sim.yaml"),
         "--suite", str(tmp_path / "suite.yaml"), "--db", str(db), "--quiet"],
        capture_output=True, text=True, timeout=120)
    assert full.returncode == 3, full.stderr
    lines = full.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), full.stderr
    assert "full" in lines[0] and "Traceback" not in full.stderr
    engine = open_store(f"sqlite:///{db}")  # the next reader
    try:
        with Session(engine) as session:
            listing = fetch_runs(session, 5)
    finally:
        engine.dispose()
    assert [run.status for run in listing] in ([RunStatus.FAILED], [RunStatus.PARTIAL])
