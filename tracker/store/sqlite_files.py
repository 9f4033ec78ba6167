"""A SQLite file the tracker may not write: opened read-only, so read commands still work.

A database in WAL mode (the tracker's) needs its ``-shm`` file to be read. SQLite creates it
beside the database, which a read-only directory (a read-only mount, a colleague's file) does
not allow, and the driver then says only "unable to open database file". So a file that this
process cannot write is opened ``mode=ro``. Where its directory cannot be written either and no
``-wal`` file holds recent commits, it is opened ``immutable=1`` (nobody can change it there).
Writes to such a database fail with SQLite's "readonly database", which
``tracker.store.storable`` turns into a one-line error with the fix.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import URL

from tracker.errors import StoreError


def sqlite_open_url(parsed: URL, shown: str) -> URL:
    """``parsed`` unchanged for a file this process can write (or a new one), else the same
    file opened read-only. ``shown`` names the database in the error for an unreadable one."""
    path = Path(parsed.database or "")
    if not path.exists() or (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        return parsed
    if not os.access(path, os.R_OK):
        raise StoreError(f"cannot open database {shown}: {path} is not readable by this user; "
                         f"give it read permission (chmod a+r {path}) or use a copy")
    query = {"mode": "ro", "uri": "true"}
    wal = path.with_name(path.name + "-wal")
    shm = path.with_name(path.name + "-shm")
    if not os.access(path.parent, os.W_OK) and not shm.exists():
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(
                f"cannot open database {shown}: it is read-only and its recent commits are in "
                f"{wal.name}, which SQLite cannot read without creating {shm.name} in the "
                f"read-only directory {path.parent}; copy {path.name} and {wal.name} to a "
                "writable directory and give --db that copy")
        query["immutable"] = "1"
    return parsed.set(database=f"file:{path}", query=query)
