"""URLs, opening a store and the schema revision check, on real SQLite files and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.pool import NullPool

from tracker.errors import StoreError
from tracker.results import RunStatus
from tracker.store import open_store, redact_url, resolve_db_url, upgrade_database
from tracker.store.db import DB_URL_ENV, alembic_config, head_revision
from tracker.store.models import RUN_STATUSES, Base

REPO_ROOT = Path(__file__).resolve().parents[2]


def _execute(url: str, sql: str) -> None:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text(sql))
    finally:
        engine.dispose()


def _table_names(url: str) -> set[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return set(inspect(connection).get_table_names())
    finally:
        engine.dispose()


# --- resolve_db_url / redact_url -----------------------------------------------------------


def test_resolve_db_url_defaults_to_tracker_db_in_cwd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DB_URL_ENV, raising=False)
    assert resolve_db_url(None) == "sqlite:///tracker.db"


def test_resolve_db_url_reads_env_when_no_arg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DB_URL_ENV, "postgresql+psycopg://u@db.example/runs")
    assert resolve_db_url(None) == "postgresql+psycopg://u@db.example/runs"


def test_resolve_db_url_prefers_arg_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DB_URL_ENV, "postgresql+psycopg://u@db.example/runs")
    assert resolve_db_url("runs.db") == "sqlite:///runs.db"


@pytest.mark.parametrize(("arg", "expected"), [
    ("runs.db", "sqlite:///runs.db"),
    ("/var/lib/tracker/runs.db", "sqlite:////var/lib/tracker/runs.db"),
    ("sqlite:///runs.db", "sqlite:///runs.db"),
    ("postgresql://u:pw@db.example:5433/runs", "postgresql+psycopg://u:pw@db.example:5433/runs"),
    ("postgresql+psycopg://u@db.example/runs", "postgresql+psycopg://u@db.example/runs"),
])
def test_resolve_db_url_accepts_paths_sqlite_and_postgres(arg: str, expected: str) -> None:
    assert resolve_db_url(arg) == expected


@pytest.mark.parametrize("arg", [
    "mysql://u:hunter2@db.example/runs",
    "postgresql+psycopg2://u:hunter2@db.example/runs",
    "http://db.example/runs",
])
def test_resolve_db_url_rejects_other_schemes_naming_the_forms(arg: str) -> None:
    with pytest.raises(StoreError) as excinfo:
        resolve_db_url(arg)
    message = str(excinfo.value)
    assert arg.split("://")[0] in message
    assert "hunter2" not in message
    assert "sqlite:///path" in message and "postgresql+psycopg://user@host/db" in message


@pytest.mark.parametrize("arg", ["sqlite://", "sqlite:///:memory:", ""])
def test_resolve_db_url_rejects_in_memory_and_empty(arg: str) -> None:
    with pytest.raises(StoreError):
        resolve_db_url(arg)


def test_redact_url_hides_the_password() -> None:
    redacted = redact_url("postgresql+psycopg://tracker:s3cret@db.example:5432/runs")
    assert "s3cret" not in redacted
    assert redacted == "postgresql+psycopg://tracker:***@db.example:5432/runs"
    assert redact_url("sqlite:///runs.db") == "sqlite:///runs.db"


# --- open_store and revisions --------------------------------------------------------------


def test_open_store_upgrades_an_empty_database_to_head(db_url: str) -> None:
    engine = open_store(db_url)
    engine.dispose()
    assert set(Base.metadata.tables) <= _table_names(db_url)
    assert upgrade_database(db_url) == (head_revision(), head_revision())


def test_open_store_uses_a_database_already_at_head(db_url: str) -> None:
    open_store(db_url).dispose()
    engine = open_store(db_url)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one() \
            == head_revision()
    engine.dispose()


def test_open_store_refuses_a_database_behind_head_with_the_upgrade_hint(db_url: str) -> None:
    open_store(db_url).dispose()
    command.downgrade(alembic_config(db_url), "base")

    with pytest.raises(StoreError) as excinfo:
        open_store(db_url)

    assert f"run `tracker db upgrade --db {redact_url(db_url)}`" in str(excinfo.value)
    assert upgrade_database(db_url) == (None, head_revision())
    open_store(db_url).dispose()


def test_open_store_refuses_a_revision_from_a_newer_tracker(db_url: str) -> None:
    open_store(db_url).dispose()
    _execute(db_url, "UPDATE alembic_version SET version_num = '9999'")

    with pytest.raises(StoreError, match="created by a newer tracker"):
        open_store(db_url)
    with pytest.raises(StoreError, match="created by a newer tracker"):
        upgrade_database(db_url)


def test_open_store_treats_a_database_with_only_scheduler_tables_as_empty(db_url: str) -> None:
    _execute(db_url, "CREATE TABLE apscheduler_jobs (id VARCHAR(191) PRIMARY KEY)")
    open_store(db_url).dispose()
    command.check(alembic_config(db_url))  # the scheduler's table is not drift


def test_alembic_check_finds_no_drift_between_models_and_migrations(db_url: str) -> None:
    open_store(db_url).dispose()
    command.check(alembic_config(db_url))  # raises AutoGenerateDiffsDetected on drift


def test_upgrade_database_reports_from_and_to_revisions(db_url: str) -> None:
    assert upgrade_database(db_url) == (None, head_revision())


def test_run_status_constraint_lists_every_run_status() -> None:
    assert set(RUN_STATUSES) == {status.value for status in RunStatus}


def test_open_store_reports_unreachable_postgres_in_one_line_without_password() -> None:
    url = "postgresql+psycopg://tracker:s3cret@127.0.0.1:1/runs"
    with pytest.raises(StoreError) as excinfo:
        open_store(url)
    message = str(excinfo.value)
    assert "s3cret" not in message
    assert "postgresql+psycopg://tracker:***@127.0.0.1:1/runs" in message
    assert "\n" not in message
    assert excinfo.value.__cause__ is None and excinfo.value.__suppress_context__


def test_open_store_reports_a_sqlite_path_in_a_missing_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing' / 'tracker.db'}"
    with pytest.raises(StoreError, match=r"directory .*missing does not exist"):
        open_store(url)


def test_alembic_cli_upgrades_and_checks_from_the_repo_root(tmp_path: Path) -> None:
    env = {**os.environ, DB_URL_ENV: f"sqlite:///{tmp_path / 'cli.db'}"}
    alembic = [sys.executable, "-m", "alembic"]
    for args in (["upgrade", "head"], ["check"]):
        done = subprocess.run([*alembic, *args], cwd=REPO_ROOT, env=env, capture_output=True,
                              text=True, check=False, timeout=120)
        assert done.returncode == 0, done.stderr
    assert "No new upgrade operations detected" in done.stdout
