"""Reading a dataset or trace file: streamed, hashed while it is read, errors that name the place.

A ``DataFile`` is read once, line by line (JSONL, CSV) or as one JSON array streamed item by item
(ShareGPT), never whole into memory. Its ``sha256`` is the digest of every byte read, complete
when the reading is. Every problem is a ``ConfigError`` of one line that names the file, the line,
the field, the bad value (short and redacted: it is outside text) and the fix.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tracker.errors import ConfigError
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.redaction import redact_one_line

_CHUNK_BYTES = 1 << 20  # a JSON array is read a MiB at a time
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def quote(value: Any) -> str:
    """A value from a data file, as an error message shows it: redacted, one line, short."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    short = redact_one_line(text, limit=43)
    return repr(short if len(short) <= 40 else short[:37] + "...")


def bad_field(where: str, field: str, problem: str, value: Any, fix: str) -> ConfigError:
    got = "null or nothing" if value is None else quote(value)
    return ConfigError(f"{where}: {field}: {problem} (got {got}); {fix}")


class DataFile:
    """One pass over a data file, whose ``sha256`` is complete once its lines or items are read."""

    def __init__(self, path: Path, what: str, key: str) -> None:
        if not path.exists():
            raise ConfigError(f"{path}: {what} file not found; check {key} (it is relative to "
                              "the suite file)")
        if not path.is_file():
            raise ConfigError(f"{path}: is not a file; {key} must name a {what} file")
        self.path = path
        self._digest = hashlib.sha256()

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def lines(self) -> Iterator[tuple[int, str]]:
        """(1-based line number, text without the line end), hashing each raw line."""
        with self.path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                self._digest.update(raw)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ConfigError(f"{self.path}:{number}: not UTF-8 text (byte {exc.start} "
                                      "of the line); save the file as UTF-8") from None
                yield number, text.rstrip("\r\n")

    def chunks(self) -> Iterator[str]:
        """The file as text, a MiB at a time (hashing the bytes)."""
        decoder = codecs.getincrementaldecoder("utf-8")()
        with self.path.open("rb") as handle:
            while True:
                raw = handle.read(_CHUNK_BYTES)
                self._digest.update(raw)
                try:
                    text = decoder.decode(raw, final=not raw)
                except UnicodeDecodeError:
                    raise ConfigError(f"{self.path}: not UTF-8 text; save the file as UTF-8") \
                        from None
                if text:
                    yield text
                if not raw:
                    return


def parse_json_line(text: str, where: str, what: str) -> Mapping[str, Any]:
    """One JSONL line as an object (``what`` names it in the fix)."""
    try:
        data = parse_untrusted_json(text)
    except UntrustedJSONError as exc:
        raise ConfigError(f"{where}: JSON nested too deeply; refused" if exc.too_deep else
                          f"{where}: not JSON ({exc.msg} at column {exc.colno}); each line "
                          f"must be one JSON object ({what})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: each line must be a JSON object ({what}); got a "
                          f"{type(data).__name__}")
    return data


def iter_json_array(file: DataFile, what: str) -> Iterator[tuple[int, Any]]:
    """The items of a file holding one JSON array, each with the line it starts on, without
    reading the whole file at once (the buffer holds at most a few items)."""
    stream = _ArrayStream(file, what)
    yield from stream.items()


class _ArrayStream:
    """A JSON array decoded item by item from a growing buffer of the file's text."""

    def __init__(self, file: DataFile, what: str) -> None:
        self.file, self.what = file, what
        self.chunks = file.chunks()
        self.buffer, self.pos = "", 0
        self.line, self.counted = 1, 0  # the line at buffer[counted]
        self.decoder = json.JSONDecoder()

    def items(self) -> Iterator[tuple[int, Any]]:
        if self._next_char() != "[":
            raise self._error(f"expected a JSON array ([...]) of {self.what}; check the file "
                              "and its format")
        self.pos += 1
        if self._next_char() == "]":
            self.pos += 1
        else:
            while True:
                self._next_char()  # the decoder wants the value's first character
                yield self._line_here(), self._value()
                sep = self._next_char()
                self.pos += 1
                if sep == "]":
                    break
                if sep != ",":
                    self.pos -= 1
                    raise self._error("expected ',' or ']' after an item of the JSON array; "
                                      "fix the file")
        if self._next_char() != "":
            raise self._error("text after the JSON array; a file holds one array")

    def _value(self) -> Any:
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError:
                if self._read_more(len(self.buffer) - self.pos):
                    continue
                raise self._invalid() from None
            except RecursionError:
                raise self._error("JSON nested too deeply; refused") from None
            if end == len(self.buffer) and self._read_more(0):
                continue  # a number may go on in the next chunk: decode it again
            self.pos = end
            return value

    def _invalid(self) -> ConfigError:
        """Why the item at ``pos`` is not JSON, on the line where the decoder stopped."""
        try:
            self.decoder.raw_decode(self.buffer, self.pos)
        except json.JSONDecodeError as exc:
            line = self._line_here() + self.buffer.count("\n", self.pos, exc.pos)
            return ConfigError(f"{self.file.path}:{line}: invalid JSON ({exc.msg}); fix the file "
                               f"(one JSON array of {self.what})")
        return self._error("invalid JSON")  # pragma: no cover (it failed a moment ago)

    def _next_char(self) -> str:
        """The next character that is not JSON whitespace ("" at the end of the file)."""
        while True:
            match = _WHITESPACE.match(self.buffer, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self._read_more(0):
                return ""

    def _read_more(self, pending: int) -> bool:
        """Drop what was consumed and append more than ``pending`` characters (so a long item is
        decoded a few times, not once per chunk). False at the end of the file."""
        self._line_here()
        self.buffer, self.pos, self.counted = self.buffer[self.pos:], 0, 0
        added = 0
        while added <= pending:
            chunk = next(self.chunks, None)
            if chunk is None:
                break
            self.buffer += chunk
            added += len(chunk)
        return added > 0

    def _line_here(self) -> int:
        self.line += self.buffer.count("\n", self.counted, self.pos)
        self.counted = self.pos
        return self.line

    def _error(self, problem: str) -> ConfigError:
        return ConfigError(f"{self.file.path}:{self._line_here()}: {problem}")
