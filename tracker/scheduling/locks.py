"""One holder per database: a PostgreSQL advisory lock, or a lock file beside a SQLite database.

APScheduler 3 runs every job once per scheduler sharing a job store, so only one scheduler may be
active per database. SQLite takes one worker. Both locks die with their process (the advisory lock
with its connection, the ``flock`` with its file descriptor), so a crashed holder never blocks the
next start.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import make_url

from tracker.errors import LockHeldError
from tracker.store.db import create_store_engine, redact_url


def _holder_text() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()} since {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC"


def advisory_key(purpose: str) -> int:
    """A stable signed 64-bit key for ``pg_try_advisory_lock`` (locks are per database)."""
    digest = hashlib.sha256(f"tracker:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class DatabaseLock:
    """A lock held from ``acquire()`` to ``release()``, named by ``purpose`` (``scheduler``,
    ``worker``)."""

    def __init__(self, url: str, purpose: str, refusal_hint: str) -> None:
        self.url = url
        self.purpose = purpose
        self.refusal_hint = refusal_hint
        self._engine: Engine | None = None
        self._connection: Connection | None = None
        self._file: IO[str] | None = None

    @property
    def is_sqlite(self) -> bool:
        return make_url(self.url).get_backend_name() == "sqlite"

    def lock_file_path(self) -> Path:
        database = make_url(self.url).database or "tracker.db"
        return Path(f"{database}.{self.purpose}.lock")

    def acquire(self) -> None:
        if self.is_sqlite:
            self._acquire_file()
        else:
            self._acquire_advisory()

    def release(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.truncate(0)
                fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
        if self._connection is not None:
            with contextlib.suppress(Exception):  # the session lock ends with the connection anyway
                self._connection.execute(text("SELECT pg_advisory_unlock(:key)"),
                                         {"key": advisory_key(self.purpose)})
            self._connection.close()
            self._connection = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def _refuse(self, holder: str) -> LockHeldError:
        return LockHeldError(f"another tracker {self.purpose} is already active on "
                             f"{redact_url(self.url)} ({holder}); {self.refusal_hint}")

    def _acquire_file(self) -> None:
        path = self.lock_file_path()
        handle = path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "holder unknown"
            handle.close()
            raise self._refuse(f"{holder}; lock file {path}") from None
        handle.seek(0)
        handle.truncate(0)
        handle.write(_holder_text())
        handle.flush()
        self._file = handle

    def _acquire_advisory(self) -> None:
        engine = create_store_engine(self.url, pooled=False)
        connection = engine.connect()
        name = f"tracker-{self.purpose} {_holder_text()}"[:63]
        connection.execute(text("SELECT set_config('application_name', :name, false)"),
                           {"name": name})
        got = connection.execute(text("SELECT pg_try_advisory_lock(:key)"),
                                 {"key": advisory_key(self.purpose)}).scalar_one()
        connection.commit()
        if not got:
            holder = self._advisory_holder(connection)
            connection.close()
            engine.dispose()
            raise self._refuse(holder)
        self._engine, self._connection = engine, connection

    def _advisory_holder(self, connection: Connection) -> str:
        key = advisory_key(self.purpose)
        row = connection.execute(text(
            "SELECT a.application_name, a.client_addr, a.pid FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
            "AND l.granted AND l.database = (SELECT oid FROM pg_database "
            "WHERE datname = current_database()) AND l.classid = :hi AND l.objid = :lo"),
            {"hi": (key >> 32) & 0xFFFFFFFF, "lo": key & 0xFFFFFFFF}).first()
        if row is None:
            return "holder unknown"
        name, address, backend = row
        return f"{name or 'unnamed'}, connected from {address or 'local socket'}, backend pid {backend}"
