"""Alembic environment for the tracker's schema (installed as ``tracker._migrations``).

The URL is the config's ``sqlalchemy.url`` when the caller set one, else ``$TRACKER_DB_URL``,
else ``sqlite:///tracker.db``. SQLite migrates in batch mode with foreign keys OFF: a batch
table rebuild with them ON would delete child rows through ``ON DELETE CASCADE``.

Each revision runs in its own transaction with its version row, on SQLite too, so a kill cannot
leave a revision half-applied; a new database (the caller sets the ``one_transaction``
attribute) is created in one. On SQLite the first revision of an upgrade completes a step that a
kill cut short under an older tracker (``tracker.store.migrating``).
"""

from __future__ import annotations

from logging.config import fileConfig
from pathlib import Path
from typing import Any

from alembic import context
from sqlalchemy.engine import make_url

from tracker.store.db import FOREIGN_TABLE_PREFIXES, create_store_engine, resolve_db_url
from tracker.store.migrating import HalfAppliedStepRepair, use_real_sqlite_transactions
from tracker.store.models import Base, UTCDateTime

config = context.config
if config.config_file_name is not None and Path(config.config_file_name).is_file():
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _include_name(name: str | None, type_: str, _parent_names: object) -> bool:
    """Leave out tables other tools keep in the same database (APScheduler's job store)."""
    return not (type_ == "table" and name is not None and name.startswith(FOREIGN_TABLE_PREFIXES))


def _render_item(type_: str, obj: object, autogen_context: Any) -> str | bool:
    """Render the tracker's column types as plain SQLAlchemy types: revisions never import it."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _options(url: str) -> dict[str, Any]:
    return {
        "target_metadata": target_metadata,
        "render_as_batch": make_url(url).get_backend_name() == "sqlite",
        "include_name": _include_name,
        "compare_type": True,
        "render_item": _render_item,
    }


def run_migrations_offline(url: str) -> None:
    context.configure(url=url, literal_binds=True, **_options(url))
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online(url: str) -> None:
    engine = create_store_engine(url, foreign_keys=False, pooled=False)
    sqlite = make_url(url).get_backend_name() == "sqlite"
    if sqlite:
        use_real_sqlite_transactions(engine)
    repair = HalfAppliedStepRepair()
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection, transactional_ddl=True,
                transaction_per_migration=not config.attributes.get("one_transaction", False),
                on_version_apply=[repair.finished], **_options(url))
            if sqlite:
                repair.install(context.get_context())
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


_url = resolve_db_url(config.get_main_option("sqlalchemy.url"))
if context.is_offline_mode():
    run_migrations_offline(_url)
else:
    run_migrations_online(_url)
