"""What a command writes: result JSON and report files, through the one redaction, whole or not
at all; and the store session a read-only command reads from."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.errors import ExitCode, UsageError
from tracker.redaction import redact_data, redact_text
from tracker.results import RunResult, RunStatus

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def write_json(target: str, data: dict[str, Any], flag: str = "--json") -> None:
    """The JSON (every string redacted) to ``target``, or stdout for ``-``."""
    write_text(target, json.dumps(redact_data(data), indent=2, ensure_ascii=False) + "\n", flag)


def write_text(target: str, text: str, flag: str) -> None:
    """A report or result file, redacted, written whole or not at all (``-``: stdout)."""
    text = redact_text(text)
    if target == "-":
        sys.stdout.write(text)
        return
    path = Path(target)
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {target}: directory {path.parent} does not exist; create it "
                         "or choose another path")
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False,
                                     prefix=f".{path.name}.", suffix=".tmp") as handle:
        handle.write(text)
    os.replace(handle.name, path)


def run_exit_code(run: RunResult) -> int:
    """0 for a completed run; 3 (could not measure) for a partial or failed one."""
    return ExitCode.OK if run.status is RunStatus.COMPLETED else ExitCode.NOT_MEASURED


@contextmanager
def reading(db: str | None) -> Iterator[Session]:
    """A read-only session on the store named by ``--db`` (or its defaults)."""
    from sqlalchemy.orm import Session

    from tracker.store.db import open_store, resolve_db_url

    engine = open_store(resolve_db_url(db))
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()
