"""What a command writes (result JSON and report files, through the one redaction, whole or not
at all) and the store session a read-only command reads from. (Its printed lines go through
``tracker.redaction.say``, its log lines through the handler ``tracker.cli.main`` sets up.)"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.errors import ExitCode, OutputWriteError, UsageError
from tracker.redaction import redact_data, redact_text, say
from tracker.results import RunResult, RunStatus

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def write_json(target: str, data: dict[str, Any], flag: str = "--json") -> None:
    """The JSON (every string redacted) to ``target``, or stdout for ``-``."""
    write_text(target, json.dumps(redact_data(data), indent=2, ensure_ascii=False) + "\n", flag)


def write_text(target: str, text: str, flag: str) -> None:
    """A report or result file, redacted, written whole or not at all (``-``: stdout)."""
    if target == "-":
        say(text, end="")
        return
    text = redact_text(text)
    path = Path(target)
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {target}: directory {path.parent} does not exist; create it "
                         "or choose another path")
    if path.is_dir():
        raise UsageError(f"{flag} {target}: is a directory; give a file path such as "
                         f"{path / ('result' + (path.suffix or _SUFFIXES.get(flag, '.txt')))}")
    _write_whole(path, text, flag)


_SUFFIXES = {"--json": ".json", "--markdown": ".md", "--junit": ".xml", "--out": ".json"}
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _write_whole(path: Path, text: str, flag: str) -> None:
    """Write beside ``path`` and rename over it. On any failure the temporary file is removed
    and the error is one line: the file, the cause and the fix."""
    temporary: str | None = None
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False,
                                         prefix=f".{path.name}.", suffix=".tmp") as handle:
            temporary = handle.name
            handle.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        cause = exc.strerror or type(exc).__name__
        if exc.errno in _FULL:
            raise OutputWriteError(f"{flag} {path}: cannot write it ({cause}); free space on "
                                   "that disk or choose another path; nothing was written "
                                   "there") from None
        raise UsageError(f"{flag} {path}: cannot write it ({cause}); choose a path you can "
                         "write") from None


def run_exit_code(run: RunResult) -> int:
    """The exit code: 0 for a completed run, 3 (could not measure) for a partial or failed one."""
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
