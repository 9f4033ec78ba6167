"""Migrations that a kill cannot wedge (used by ``migrations/env.py``).

Each revision runs in a transaction of its own, its version row with it, on both backends. A new
database is created in one. PostgreSQL has transactional DDL. SQLite has it too, but Python's
``sqlite3`` commits each ``ALTER``/``CREATE`` on its own, so a kill between a revision's DDL and
its version row left "0007" in the version row beside 0008's columns, and every later upgrade
failed with "duplicate column name". ``create_migration_engine`` makes SQLite's transactions
real (``BEGIN IMMEDIATE``: one migrator at a time, the others wait for its lock).

A database a tracker before this change left half-migrated is repaired by
``HalfAppliedStepRepair``: on SQLite, the first revision an upgrade applies skips the columns,
tables and indexes that already exist (the ones its killed predecessor committed), and batch
tables left by a killed table rebuild (``_alembic_tmp_*``, never data) are dropped first.
"""

from __future__ import annotations

import logging
from typing import Any

from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Engine, Index, Table, event, inspect, text

log = logging.getLogger(__name__)

BATCH_TEMP_PREFIX = "_alembic_tmp_"


def use_real_sqlite_transactions(engine: Engine) -> None:
    """Let SQLAlchemy, not Python's ``sqlite3``, decide where transactions begin and end, so
    DDL is transactional. Each begins ``IMMEDIATE`` (it takes the write lock at once)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # no implicit BEGIN, no implicit COMMIT

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


class HalfAppliedStepRepair:
    """Lets the first revision of an upgrade on SQLite complete a step a kill cut short.

    Call ``install`` after ``context.configure`` (pass ``finished`` as its
    ``on_version_apply``). Until that first revision's version row is written, ``add_column``,
    ``create_table`` and ``create_index`` skip what already exists. Later revisions run
    unchanged.
    """

    def __init__(self) -> None:
        self._restore: list[str] = []
        self._impl: Any = None

    def install(self, migration: MigrationContext) -> None:
        connection = migration.connection
        if connection is None:  # offline (--sql): nothing to inspect
            return
        _drop_batch_leftovers(connection)
        impl = self._impl = migration.impl
        add_column, create_table, create_index = (impl.add_column, impl.create_table,
                                                  impl.create_index)

        def add_column_once(table_name: str, column: Any, **kw: Any) -> None:
            names = {c["name"] for c in inspect(connection).get_columns(table_name)}
            if column.name in names:
                log.warning("repairing a half-applied migration: %s.%s exists; kept",
                            table_name, column.name)
                return
            add_column(table_name, column, **kw)

        def create_table_once(table: Table, **kw: Any) -> None:
            if inspect(connection).has_table(table.name):
                log.warning("repairing a half-applied migration: table %s exists; kept",
                            table.name)
                return
            create_table(table, **kw)

        def create_index_once(index: Index, **kw: Any) -> None:
            table = index.table
            if table is not None and inspect(connection).has_table(table.name) and \
                    index.name in {i["name"] for i in inspect(connection).get_indexes(table.name)}:
                log.warning("repairing a half-applied migration: index %s exists; kept",
                            index.name)
                return
            create_index(index, **kw)

        for name, wrapper in (("add_column", add_column_once),
                              ("create_table", create_table_once),
                              ("create_index", create_index_once)):
            setattr(impl, name, wrapper)  # on this instance only
        self._restore = ["add_column", "create_table", "create_index"]

    def finished(self, **_kw: Any) -> None:
        """``on_version_apply``: after the first revision, every operation runs as written."""
        for name in self._restore:
            delattr(self._impl, name)  # the instance's wrapper; the class's method again
        self._restore = []


def _drop_batch_leftovers(connection: Connection) -> None:
    """Drop the ``_alembic_tmp_*`` copies a killed batch rebuild left (the rebuild copies the
    rows, drops the original and renames the copy in one transaction, so the original still
    holds every row whenever a copy is left over)."""
    for name in inspect(connection).get_table_names():
        if name.startswith(BATCH_TEMP_PREFIX) and \
                inspect(connection).has_table(name[len(BATCH_TEMP_PREFIX):]):
            log.warning("repairing a half-applied migration: dropping leftover table %s", name)
            connection.execute(text(f'DROP TABLE "{name}"'))
