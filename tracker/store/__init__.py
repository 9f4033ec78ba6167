"""The store: runs, workloads and request records in SQLite or PostgreSQL (SQLAlchemy 2).

The schema is owned by ``migrations/`` (Alembic). ORM rows never leave this package: callers
get ``tracker.results`` values and the small listings in ``tracker.store.listings``.
"""

from tracker.errors import NotFoundError
from tracker.store.db import open_store, redact_url, resolve_db_url, upgrade_database
from tracker.store.listings import ConfigVersionRow, RunListing
from tracker.store.runs import (
    begin_run,
    fetch_config_versions,
    fetch_run,
    fetch_runs,
    finish_run,
    save_config_version,
    save_suite,
    save_workload,
)

__all__ = [
    "ConfigVersionRow",
    "NotFoundError",
    "RunListing",
    "begin_run",
    "fetch_config_versions",
    "fetch_run",
    "fetch_runs",
    "finish_run",
    "open_store",
    "redact_url",
    "resolve_db_url",
    "save_config_version",
    "save_suite",
    "save_workload",
    "upgrade_database",
]
