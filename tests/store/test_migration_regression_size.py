"""Migration 0014: regression records get the interval of their change, and a status of their own
for improvements; the records an older tracker left open in the good direction become
improvements, and the downgrade opens them again. On SQLite and PostgreSQL, with this tree's
migrations."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import NullPool

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
BEFORE, AFTER = "0013", "0014_regression_size"
INSERT = ("INSERT INTO regressions (config_name, suite_name, workload, metric, location_index, "
          "before, after, rel_change, regressed, status, note, detected_at, updated_at) VALUES "
          "('c', 's', 'w', 'ttft_p99_s', :at, 0.1, :after, :rel, :regressed, :status, '', "
          "'2026-09-01 00:00:00+00:00', '2026-09-01 00:00:00+00:00')")


def _config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))  # this tree's, not the install's
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _insert(engine: Engine, at: int, regressed: bool | None, status: str) -> None:
    after = 0.2 if regressed else 0.05
    with engine.begin() as connection:
        connection.execute(text(INSERT), {"at": at, "after": after, "rel": after / 0.1 - 1.0,
                                          "regressed": regressed, "status": status})


def _statuses(engine: Engine) -> dict[int, str]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT location_index, status FROM regressions"))
        return {int(at): str(status) for at, status in rows}


def test_open_improvements_become_improvements_and_go_back_on_downgrade(db_url: str) -> None:
    command.upgrade(_config(db_url), BEFORE)
    engine = create_engine(db_url, poolclass=NullPool)
    try:
        _insert(engine, 1, True, "open")
        _insert(engine, 2, False, "open")  # an improvement an older tracker left open
        _insert(engine, 3, False, "expected")  # triaged: left as it is
        _insert(engine, 4, None, "open")
        with pytest.raises(IntegrityError):
            _insert(engine, 5, False, "improvement")  # not a status before 0014
        command.upgrade(_config(db_url), AFTER)
        assert _statuses(engine) == {1: "open", 2: "improvement", 3: "expected", 4: "open"}
        with engine.begin() as connection:
            connection.execute(text("UPDATE regressions SET rel_change_low = -0.6, "
                                    "rel_change_high = -0.4 WHERE location_index = 2"))
        _insert(engine, 6, False, "improvement")
        with pytest.raises(IntegrityError):
            _insert(engine, 7, False, "gone")
        command.downgrade(_config(db_url), BEFORE)
        assert _statuses(engine) == {1: "open", 2: "open", 3: "expected", 4: "open", 6: "open"}
        with engine.connect() as connection:
            columns = connection.execute(text("SELECT * FROM regressions")).keys()
        assert "rel_change_low" not in columns and "rel_change_high" not in columns
        command.upgrade(_config(db_url), AFTER)  # and up again
        assert _statuses(engine)[2] == "improvement"
    finally:
        engine.dispose()
