"""What the store accepts, checked where every value enters it: the statement's parameters.

- Text: every string passes the one redaction. A NUL (which PostgreSQL's text refuses) and a
  lone surrogate (which neither driver can encode as UTF-8) are stored as the visible escapes
  ``\\u0000`` and ``\\udXXX``, never dropped, so a server's error body or an imported file's
  string stores the same on SQLite and PostgreSQL. JSON columns are written the same way.
- Integers: outside the 64-bit range of SQLite and PostgreSQL they are refused with a
  ``StoreError`` (exit 2) that names the table and the value, before the driver sees them.
- Driver failures a user can cause (a full disk, a read-only or damaged file, a number past a
  column's range) become one-line ``StoreError``s with the cause and the fix
  (``describe_driver_error``). ``tracker.store.db`` raises them from the engine's error hook.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tracker.errors import StoreError, StoreWriteError
from tracker.redaction import MIN_SECRET_CHARS, redact_text

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_JSON_ESCAPED_UNSTORABLE = re.compile(r"\\u(?:0000|d[89a-f][0-9a-f]{2})")
_TABLE = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM|FROM)\s+\"?(\w+)", re.IGNORECASE)
PG_NUMERIC_OUT_OF_RANGE = "22003"
PG_DISK_FULL = "53100"


def make_storable(text: str) -> str:
    """``text`` with each NUL and lone surrogate written as its ``\\uXXXX`` escape."""
    if text.isascii() and "\x00" not in text:
        return text
    return _UNSTORABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def make_storable_data(value: Any) -> Any:
    """A JSON-like value with every string (keys too) made storable."""
    if isinstance(value, str):
        return make_storable(value)
    if isinstance(value, dict):
        return {make_storable_data(key): make_storable_data(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [make_storable_data(item) for item in value]
    return value


def dumps_storable_json(value: Any) -> str:
    """The engine's JSON serializer: ``json.dumps`` (SQLAlchemy's default) of the storable value."""
    text = json.dumps(value)
    if "\\u" in text and _JSON_ESCAPED_UNSTORABLE.search(text):  # a NUL, a surrogate, an emoji
        text = json.dumps(make_storable_data(value))
    return text


def storable_parameters(statement: str, parameters: Any) -> Any:
    """One statement's parameters (a row, or the rows of an executemany), redacted and made
    storable. It raises StoreError for an integer no backend can hold."""
    kind = type(parameters)
    if kind is tuple or kind is list:
        return kind([_storable(statement, item) for item in parameters])
    if kind is dict:
        return {key: _storable(statement, item, key) for key, item in parameters.items()}
    return parameters


def _storable(statement: str, value: Any, name: str | None = None) -> Any:
    kind = type(value)
    if kind is str:
        text = redact_text(value) if len(value) >= MIN_SECRET_CHARS else value
        return make_storable(text)
    if kind is int:
        if not INT64_MIN <= value <= INT64_MAX:
            raise _out_of_range(statement, value, name)
        return value
    if kind is tuple or kind is list or kind is dict:
        return storable_parameters(statement, value)
    return value


def _out_of_range(statement: str, value: int, name: str | None) -> StoreError:
    shown = str(value) if len(str(value)) <= 40 else f"{str(value)[:37]}..."
    column = f" ({name})" if name and not name.startswith(("param_", "id_")) else ""
    return StoreError(f"cannot store {shown} in {table_of(statement)}{column}: integers must lie "
                      f"within {INT64_MIN}..{INT64_MAX} (64 bits); correct the input that "
                      "gave it (a count, a token number, an id)")


def table_of(statement: str) -> str:
    """The table a statement writes or reads first, for a message ("table runs")."""
    match = _TABLE.search(statement)
    return f"table {match.group(1)}" if match else "the database"


def describe_driver_error(exc: BaseException, where: str, statement: str | None,
                          parameters: Any, sqlite_path: str | None = None) -> StoreError | None:
    """A StoreError (cause and fix) for a driver failure the user can cause, else None.
    ``where`` names the database, and ``sqlite_path`` is its file (for the fix) on SQLite."""
    cause = getattr(exc, "orig", None) or exc
    name = getattr(cause, "sqlite_errorname", None)
    sqlstate = getattr(cause, "sqlstate", None)
    text = " ".join(str(cause).split())
    if name == "SQLITE_FULL" or sqlstate == PG_DISK_FULL:
        return StoreWriteError(
            f"cannot write to {where}: the disk (or the database's size limit) is full "
            f"({text}); free space where the database lives and run again; what was stored "
            "before is kept")
    if isinstance(name, str) and name.startswith("SQLITE_READONLY"):
        return StoreWriteError(
            f"cannot write to {where}: the database is read-only ({text}); give the tracker "
            "write permission on the file and its directory (SQLite keeps -wal and -shm files "
            "beside it), or read a writable copy")
    if isinstance(name, str) and name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        file = sqlite_path or "FILE"
        return StoreError(
            f"cannot read {where}: the file {file} is damaged or not a tracker database "
            f"({text}); restore it from a backup, or recover what is readable with "
            f"`sqlite3 {file} .recover | sqlite3 {file}.recovered` and give --db "
            f"{file}.recovered")
    if name == "SQLITE_CANTOPEN":
        return StoreError(
            f"cannot open {where} ({text}): SQLite could not open the file or create its "
            "-wal/-shm files beside it; check that the file and its directory exist and that "
            "this user may read the file and write the directory")
    if sqlstate == PG_NUMERIC_OUT_OF_RANGE or isinstance(cause, OverflowError):
        value = _largest_int(parameters)
        shown = "" if value is None else f" {value}"
        return StoreError(
            f"cannot store the number{shown} in {table_of(statement or '')} of {where}: it is "
            f"past the column's range ({text}); correct the input that gave it")
    return None


def _largest_int(parameters: Any) -> int | None:
    values: list[int] = []

    def collect(value: Any) -> None:
        if type(value) is int:
            values.append(value)
        elif isinstance(value, list | tuple):
            for item in value:
                collect(item)
        elif isinstance(value, dict):
            for item in value.values():
                collect(item)

    collect(parameters)
    return max(values, key=abs) if values else None
