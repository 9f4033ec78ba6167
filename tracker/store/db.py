"""Database URLs, engines and the schema revision check.

Supported databases: a SQLite file (``sqlite:///path``, or just the path) and PostgreSQL through
psycopg 3 (``postgresql+psycopg://user@host/db``). The schema is owned by ``migrations/``
(installed as ``tracker._migrations``): an empty database is brought to the newest revision on
open. Any other revision mismatch is reported, never silently "fixed".
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from tracker.errors import StoreError, StoreLockedError
from tracker.inputs.package_data import find_checkout_folder
from tracker.redaction import register_url_credentials
from tracker.store.leases import reap_abandoned_runs_safely
from tracker.store.models import Base
from tracker.store.sqlite_files import sqlite_open_url
from tracker.store.storable import (
    describe_driver_error,
    dumps_storable_json,
    storable_parameters,
)

DEFAULT_DB_URL = "sqlite:///tracker.db"
DB_URL_ENV = "TRACKER_DB_URL"
SUPPORTED_FORMS = "a file path, sqlite:///path or postgresql+psycopg://user@host/db"
SQLITE_BUSY_TIMEOUT_S = 30.0
SQLITE_BUSY_TIMEOUT_ENV = "TRACKER_SQLITE_BUSY_TIMEOUT_S"
PG_LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of a lock_timeout
PG_CONNECT_TIMEOUT_S = 10
_DRIVERS = {
    "sqlite": "sqlite",
    "sqlite+pysqlite": "sqlite+pysqlite",
    "postgresql": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
}
# Tables other parts of the tracker may keep in the same database (APScheduler's job store);
# they are neither the tracker's schema nor a sign that the database is in use by it.
FOREIGN_TABLE_PREFIXES = ("apscheduler_",)
T = TypeVar("T")


# --- URLs ----------------------------------------------------------------------------------


def resolve_db_url(arg: str | None) -> str:
    """The database URL from ``--db``, else ``$TRACKER_DB_URL``, else ``sqlite:///tracker.db``.

    A value without ``://`` is a SQLite file path. Plain ``postgresql://`` means psycopg 3.
    """
    value = arg if arg is not None else os.environ.get(DB_URL_ENV) or DEFAULT_DB_URL
    register_url_credentials(value)  # its password is hidden in every text from now on
    if not value.strip():
        raise StoreError(f"empty database URL; give {SUPPORTED_FORMS}")
    if "://" not in value:
        return f"sqlite:///{os.path.expanduser(value)}"
    scheme, rest = value.split("://", 1)
    driver = _DRIVERS.get(scheme.lower())
    if driver is None:
        raise StoreError(
            f"unsupported database URL {redact_url(value)!r}: give {SUPPORTED_FORMS}"
        )
    url = f"{driver}://{rest}"
    parsed = _parse(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise StoreError(
            f"database URL {redact_url(value)!r} is in memory and would lose every run; "
            "give a file path such as sqlite:///tracker.db"
        )
    return url


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***``, safe to print."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


def _parse(url: str) -> URL:
    try:
        return make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise StoreError(f"cannot parse database URL {redact_url(url)!r} ({exc}); "
                         f"give {SUPPORTED_FORMS}") from None


# --- engines -------------------------------------------------------------------------------


def create_store_engine(url: str, *, foreign_keys: bool = True, pooled: bool = True) -> Engine:
    """An engine for ``url``: SQLite gets WAL, a busy timeout and (by default) enforced foreign
    keys. On every backend a lock held too long is a StoreLockedError, not a driver error."""
    parsed = _parse(url)
    kwargs: dict[str, Any] = {}
    if not pooled:
        kwargs["poolclass"] = NullPool
    busy_timeout_s: float | None = None
    if parsed.get_backend_name() == "sqlite":
        _check_sqlite_directory(url, parsed)
        busy_timeout_s = sqlite_busy_timeout_s()
        engine = create_engine(sqlite_open_url(parsed, redact_url(url)),
                               connect_args={"timeout": busy_timeout_s},
                               json_serializer=dumps_storable_json, **kwargs)
        _set_sqlite_foreign_keys(engine, foreign_keys)
        _use_sqlite_wal(engine)
    else:
        connect_args = {"connect_timeout": PG_CONNECT_TIMEOUT_S}
        engine = create_engine(parsed, pool_pre_ping=True, connect_args=connect_args,
                               json_serializer=dumps_storable_json, **kwargs)
    event.listen(engine, "before_cursor_execute", _storable_parameters, retval=True)
    _raise_store_errors(engine, url, busy_timeout_s)
    return engine


def _storable_parameters(_conn: Any, _cursor: Any, statement: str, parameters: Any,
                         _context: Any, _executemany: bool) -> tuple[str, Any]:
    """Every value written to the database passes the store's boundary (``tracker.store.
    storable``): no secret is ever stored, whichever table, column or code path it took (an
    echoed key in an error, a JSON body), no text either backend refuses, no integer past 64
    bits."""
    return statement, storable_parameters(statement, parameters)


def _check_sqlite_directory(url: str, parsed: URL) -> None:
    directory = Path(parsed.database or "").parent
    if not directory.is_dir():
        raise StoreError(
            f"cannot open database {redact_url(url)}: directory {directory} does not exist; "
            "create it or give another --db path"
        )


def _set_sqlite_foreign_keys(engine: Engine, enabled: bool) -> None:
    pragma = f"PRAGMA foreign_keys={'ON' if enabled else 'OFF'}"

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(pragma)
        finally:
            cursor.close()


def _use_sqlite_wal(engine: Engine) -> None:
    """Write-ahead logging (kept in the file): readers never block the writer, nor it them."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError:  # locked now: the file keeps its mode; the next try wins
            pass
        finally:
            cursor.close()


# --- locks ---------------------------------------------------------------------------------


def sqlite_busy_timeout_s() -> float:
    """How long a SQLite write waits for another process's lock: $TRACKER_SQLITE_BUSY_TIMEOUT_S,
    else ``SQLITE_BUSY_TIMEOUT_S``."""
    value = os.environ.get(SQLITE_BUSY_TIMEOUT_ENV, "").strip()
    if not value:
        return SQLITE_BUSY_TIMEOUT_S
    try:
        timeout_s = float(value)
    except ValueError:
        timeout_s = math.nan
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise StoreError(f"{SQLITE_BUSY_TIMEOUT_ENV}: must be a number of seconds > 0 "
                         f"(got {value!r}); unset it for the default {SQLITE_BUSY_TIMEOUT_S:g} s")
    return timeout_s


def is_lock_error(exc: BaseException) -> bool:
    """A driver error that says another connection held a lock too long: SQLite's "database is
    locked" (SQLITE_BUSY*, SQLITE_LOCKED*) or PostgreSQL's lock_not_available (lock_timeout)."""
    cause = getattr(exc, "orig", None) or exc
    name = getattr(cause, "sqlite_errorname", None)
    if isinstance(name, str):
        return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))
    return getattr(cause, "sqlstate", None) == PG_LOCK_NOT_AVAILABLE


def describe_lock(url: str, busy_timeout_s: float | None) -> str:
    """What a StoreLockedError says: the database, how long, and what to do."""
    if busy_timeout_s is None:
        return (f"database {redact_url(url)}: a lock was held by another session for longer "
                "than the lock_timeout; find the session holding it (pg_stat_activity) and "
                "run again")
    return (f"database {redact_url(url)} was locked by another process for over "
            f"{busy_timeout_s:g} s; find the process holding it (a long transaction: a "
            "sqlite3 shell, a backup, another tracker) and run again, or let writes wait "
            f"longer with {SQLITE_BUSY_TIMEOUT_ENV}=<seconds>")


def _raise_store_errors(engine: Engine, url: str, busy_timeout_s: float | None) -> None:
    """A lock held too long is a StoreLockedError. A full disk, a read-only or damaged file and
    a number past a column's range are one-line StoreErrors with the fix. The rest is left to
    the driver's error."""

    parsed = _parse(url)
    sqlite_path = parsed.database if parsed.get_backend_name() == "sqlite" else None

    @event.listens_for(engine, "handle_error")
    def _on_error(context: ExceptionContext) -> None:
        original = context.original_exception
        if is_lock_error(original):
            raise StoreLockedError(describe_lock(url, busy_timeout_s)) from original
        error = describe_driver_error(original, f"database {redact_url(url)}", context.statement,
                                      context.parameters, sqlite_path)
        if error is not None:
            raise error from original


def retry_when_locked(action: Callable[[], T], *, wait_s: float | None = None) -> T:
    """Run a transaction again while the database says it is locked, for up to ``wait_s``
    (default: the SQLite busy timeout), then raise the last StoreLockedError.

    SQLite waits up to its busy timeout for a lock, except when a transaction that has read
    wants to write while another connection writes: that fails at once. The transaction was
    rolled back, so running it again is safe. A try that waited out the busy timeout itself
    leaves no time for another unless ``wait_s`` is longer.
    """
    deadline = time.monotonic() + (sqlite_busy_timeout_s() if wait_s is None else wait_s)
    delay_s = 0.05
    while True:
        try:
            return action()
        except StoreLockedError:
            if time.monotonic() + delay_s > deadline:
                raise
            time.sleep(delay_s)
            delay_s = min(2 * delay_s, 1.0)


@contextmanager
def _store_errors(url: str, doing: str) -> Iterator[None]:
    """Turn driver and migration failures into one-line StoreErrors that name the redacted URL."""
    try:
        yield
    except SQLAlchemyError as exc:
        cause = getattr(exc, "orig", None) or exc
        raise StoreError(f"cannot {doing} {redact_url(url)}: {_one_line(cause, url)}") from None
    except CommandError as exc:
        raise StoreError(f"cannot {doing} {redact_url(url)}: {_one_line(exc, url)}") from None


def _one_line(exc: BaseException, url: str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    password = _parse(url).password
    if password:
        text = text.replace(str(password), "***")
    return text


# --- schema revision -----------------------------------------------------------------------


def migrations_location() -> str:
    """The revisions: the checkout's ``migrations/`` when the tracker runs from a source tree,
    else the installed package's (``tracker._migrations``). See ``find_checkout_folder``."""
    checkout = find_checkout_folder("migrations")
    if checkout is not None and (checkout / "env.py").is_file():
        return str(checkout)
    return str(resources.files("tracker._migrations"))


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` whose scripts are ``migrations_location()``."""
    config = Config()
    config.set_main_option("script_location", migrations_location())
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config(DEFAULT_DB_URL)).get_current_head()
    if head is None:  # pragma: no cover - the package always ships revisions
        raise StoreError("the tracker's migrations are missing; reinstall the tracker")
    return head


def _current_revision(connection: Connection) -> str | None:
    heads = MigrationContext.configure(connection).get_current_heads()
    return ",".join(sorted(heads)) if heads else None


def _is_empty(connection: Connection) -> bool:
    """No tracker table and no revision table: a new database (other tools' tables aside)."""
    names = set(inspect(connection).get_table_names())
    ours = set(Base.metadata.tables) | {"alembic_version"}
    return not names & ours


def read_revision(url: str) -> tuple[bool, str | None]:
    """(is the database empty, its current revision)."""
    engine = create_store_engine(url, pooled=False)
    try:
        with _store_errors(url, "open database"), engine.connect() as connection:
            return _is_empty(connection), _current_revision(connection)
    finally:
        engine.dispose()


def upgrade_database(url: str) -> tuple[str | None, str]:
    """Migrate the database to the newest revision and return (from revision, to revision).

    Each revision commits with its version row (a new database: all of them at once), so a
    kill leaves the database at the last whole revision. On SQLite a revision half-applied by
    an older tracker is completed (``tracker.store.migrating``).
    """
    empty, before = read_revision(url)
    _check_known(url, before)
    config = alembic_config(url)
    config.attributes["one_transaction"] = empty
    with _store_errors(url, "upgrade database"):
        command.upgrade(config, "head")
    _, after = read_revision(url)
    if after is None:  # pragma: no cover - alembic just stamped it
        raise StoreError(f"upgrade of {redact_url(url)} left no schema revision")
    return before, after


def _check_known(url: str, revision: str | None) -> None:
    if revision is None:
        return
    script = ScriptDirectory.from_config(alembic_config(url))
    known = {rev.revision for rev in script.walk_revisions()}
    unknown = [rev for rev in revision.split(",") if rev not in known]
    if unknown:
        raise StoreError(
            f"database {redact_url(url)} is at schema revision {revision}, which this tracker "
            "does not know: the database was created by a newer tracker; upgrade the tracker"
        )


def check_schema(url: str) -> None:
    """Bring an empty database to head, and raise StoreError unless the database is then at head."""
    empty, current = read_revision(url)
    if empty:
        upgrade_database(url)
        return
    _check_known(url, current)
    if current != head_revision():
        raise StoreError(
            f"database {redact_url(url)} is at schema revision {current or 'base (none)'}, "
            f"behind this tracker's {head_revision()}; run `tracker db upgrade --db "
            f"{redact_url(url)}`"
        )


def open_store(url: str) -> Engine:
    """An engine on a database whose schema is at this tracker's revision (dispose it when done).

    An empty database is migrated to the newest revision first. Raises StoreError when the
    database cannot be reached or its schema is at another revision. A run left ``running`` by
    a tracker that is gone (killed, its host lost) is marked partial (``tracker.store.leases``).
    """
    check_schema(url)
    engine = create_store_engine(url)
    reap_abandoned_runs_safely(engine)
    return engine
