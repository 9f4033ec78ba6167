"""Migration 0015: a run's source becomes a column, filled for every stored run by the one rule
(the tool it was imported from, else who ran it apart from the history, else native), and the
store's listings and series read it. On SQLite and PostgreSQL, with this tree's migrations."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from tracker.results import compute_run_source
from tracker.store.runs import fetch_runs

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
BEFORE, AFTER = "0014_regression_size", "0015_run_source"
ENVIRONMENTS = {
    1: {"host": "gpu-1"},
    2: {"import": {"tool": "guidellm", "sha256": "ab"}},
    3: {"origin": {"kind": "gate"}},
    4: {"origin": {"kind": "bisect"}, "cpu": "x"},
    5: {"import": {"tool": "vllm"}, "origin": {"kind": "gate"}},  # the first field wins
    6: {"origin": "gate"},  # not the rule's shape: native
}


def _config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _insert_runs(engine: Engine) -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC).isoformat(sep=" ")
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO config_versions (id, name, version, canonical, source_path, "
            "first_seen_at) VALUES (1, 'c', 'v', '{}', '-', :now)"), {"now": now})
        connection.execute(text(
            "INSERT INTO suites (id, name, version, canonical, prompts_digest, source_path, "
            "first_seen_at) VALUES (1, 's', 'v', '{}', 'd', '-', :now)"), {"now": now})
        for run_id, environment in ENVIRONMENTS.items():
            connection.execute(text(
                "INSERT INTO runs (id, config_version_id, suite_id, status, started_at, host, "
                "tracker_version, simulated, environment, schema_version) VALUES "
                "(:id, 1, 1, 'completed', :now, 'h', 't', false, :env, 1)"),
                {"id": run_id, "now": now, "env": json.dumps(environment)})


def test_the_upgrade_fills_each_runs_source_by_the_one_rule(db_url: str) -> None:
    command.upgrade(_config(db_url), BEFORE)
    engine = create_engine(db_url, poolclass=NullPool)
    try:
        _insert_runs(engine)
        command.upgrade(_config(db_url), AFTER)
        with engine.connect() as connection:
            stored = dict(connection.execute(text("SELECT id, source FROM runs")).all())
        assert stored == {run_id: compute_run_source(environment)
                          for run_id, environment in ENVIRONMENTS.items()}
        assert stored == {1: "native", 2: "guidellm", 3: "gate", 4: "bisect", 5: "vllm",
                          6: "native"}
        command.upgrade(_config(db_url), "head")
        with Session(engine) as session:  # the listing reads the column
            assert {r.run_id: r.source for r in fetch_runs(session, 10)} == stored
        command.downgrade(_config(db_url), BEFORE)
        with engine.connect() as connection:
            columns = connection.execute(text("SELECT * FROM runs")).keys()
        assert "source" not in columns
    finally:
        engine.dispose()
