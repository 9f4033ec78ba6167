"""Migrations a kill cannot wedge: each revision commits with its version row (SQLite too), and
`tracker db upgrade` completes a revision an older tracker left half-applied on SQLite."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from tracker.cli.main import main
from tracker.errors import StoreError
from tracker.store import open_store, upgrade_database
from tracker.store.db import alembic_config, head_revision, read_revision
from tracker.store.runs import fetch_runs

KILL_SEED = 27
KILL_MOMENTS = 20
FIRST_COMMAND_MOMENTS = 10


def _execute(url: str, *statements: str) -> None:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.execute(text(statement))
    finally:
        engine.dispose()


def _columns(url: str, table: str) -> set[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return {column["name"] for column in inspect(connection).get_columns(table)}
    finally:
        engine.dispose()


def _opens_and_upgrades(url: str) -> None:
    """The database upgrades to head and a reading command works on it."""
    upgrade_database(url)
    assert read_revision(url)[1] == head_revision()
    engine = open_store(url)
    try:
        with Session(engine) as session:
            fetch_runs(session, 5)
    finally:
        engine.dispose()


# --- each revision in a transaction ----------------------------------------------------------

STOP_AT_0009 = {
    "sqlite": ["CREATE TRIGGER stop_at_0009 BEFORE UPDATE ON alembic_version "
               "WHEN NEW.version_num = '0009' BEGIN SELECT RAISE(ABORT, 'stopped at 0009'); END"],
    "postgresql": [
        "CREATE FUNCTION stop_at_0009() RETURNS trigger AS $$ BEGIN IF NEW.version_num = "
        "'0009' THEN RAISE EXCEPTION 'stopped at 0009'; END IF; RETURN NEW; END $$ "
        "LANGUAGE plpgsql",
        "CREATE TRIGGER stop_at_0009 BEFORE UPDATE ON alembic_version FOR EACH ROW "
        "EXECUTE FUNCTION stop_at_0009()"],
}
DROP_STOP = {"sqlite": ["DROP TRIGGER stop_at_0009"],
             "postgresql": ["DROP TRIGGER stop_at_0009 ON alembic_version",
                            "DROP FUNCTION stop_at_0009()"]}


def test_a_revision_that_fails_after_its_ddl_leaves_nothing_behind(db_url: str) -> None:
    """0009 adds its columns, then its version row fails (as a kill would cut it): the columns
    go with it, the revisions before it stay, and the next upgrade runs it whole."""
    command.upgrade(alembic_config(db_url), "0007")
    backend = "sqlite" if db_url.startswith("sqlite") else "postgresql"
    _execute(db_url, *STOP_AT_0009[backend])
    with pytest.raises(StoreError) as excinfo:
        upgrade_database(db_url)
    assert "stopped at 0009" in str(excinfo.value)
    assert read_revision(db_url)[1] == "0008"  # each revision commits on its own
    assert "energy_j" not in _columns(db_url, "workload_telemetry")  # 0009 left nothing
    _execute(db_url, *DROP_STOP[backend])
    _opens_and_upgrades(db_url)


# --- repairing what an older tracker left half-applied on SQLite -----------------------------


def test_db_upgrade_completes_a_revision_whose_columns_exist_but_not_its_version_row(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command.upgrade(alembic_config(sqlite_url), "0007")
    _execute(sqlite_url, "ALTER TABLE request_records ADD COLUMN cached_input_tokens INTEGER")
    assert main(["db", "upgrade", "--db", sqlite_url]) == 0, capsys.readouterr().err
    assert main(["runs", "--db", sqlite_url]) == 0, capsys.readouterr().err
    assert read_revision(sqlite_url)[1] == head_revision()


def test_db_upgrade_completes_a_first_revision_cut_short_on_a_new_file(sqlite_url: str) -> None:
    """A killed first command left the tables and an empty version table."""
    command.upgrade(alembic_config(sqlite_url), "0001")
    _execute(sqlite_url, "DELETE FROM alembic_version",
             "DROP INDEX ix_request_records_workload_result_id")
    _opens_and_upgrades(sqlite_url)


def test_db_upgrade_drops_the_copy_a_killed_table_rebuild_left(sqlite_url: str) -> None:
    command.upgrade(alembic_config(sqlite_url), "0010")
    _execute(sqlite_url, "CREATE TABLE _alembic_tmp_run_requests (id INTEGER PRIMARY KEY)")
    _opens_and_upgrades(sqlite_url)
    engine = create_engine(sqlite_url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            assert not [n for n in inspect(connection).get_table_names() if "_alembic_tmp" in n]
    finally:
        engine.dispose()


# --- SIGKILL at random moments -----------------------------------------------------------------


def _kill_at(args: list[str], moment_s: float) -> int | None:
    """Run ``tracker ARGS``, SIGKILL it ``moment_s`` after the start; its code if it ended first."""
    proc = subprocess.Popen([sys.executable, "-m", "tracker", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONWARNINGS": ""})
    try:
        return proc.wait(timeout=moment_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        return None


def _duration_s(args: list[str]) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "tracker", *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def test_sigkill_during_db_upgrade_never_wedges_the_database(tmp_path: Path) -> None:
    template = tmp_path / "template.db"
    command.upgrade(alembic_config(f"sqlite:///{template}"), "0001")
    probe = tmp_path / "probe.db"
    shutil.copy(template, probe)
    whole_s = _duration_s(["db", "upgrade", "--db", str(probe)])
    rng = random.Random(KILL_SEED)
    landed: list[str | None] = []
    for attempt in range(KILL_MOMENTS):
        db = tmp_path / f"kill{attempt}.db"
        shutil.copy(template, db)
        _kill_at(["db", "upgrade", "--db", str(db)], rng.uniform(0.3, 1.0) * whole_s)
        landed.append(read_revision(f"sqlite:///{db}")[1])
        _opens_and_upgrades(f"sqlite:///{db}")
    print(f"revisions where the {KILL_MOMENTS} kills left the database: {landed}")


def test_sigkill_during_the_first_command_on_a_new_file_never_wedges_it(tmp_path: Path) -> None:
    whole_s = _duration_s(["runs", "--db", str(tmp_path / "probe.db")])
    rng = random.Random(KILL_SEED + 1)
    for attempt in range(FIRST_COMMAND_MOMENTS):
        db = tmp_path / f"new{attempt}.db"
        _kill_at(["runs", "--db", str(db)], rng.uniform(0.3, 1.0) * whole_s)
        assert main(["runs", "--db", str(db)]) == 0  # a new file is created whole or not at all
