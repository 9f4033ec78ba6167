"""Why a launched server did not start: the root-cause line of its log, and which program failed.

vLLM's log on a failed start ends with generic lines ("RuntimeError: Engine core initialization
failed. See root cause above", a resource_tracker ``UserWarning``), and the cause sits tens of
lines up, in the engine's own traceback (``ValueError: No common block size for 16 (CPU_ATTN:
[MultipleOf(32)]).``) or as argparse's line (``vllm: error: unrecognized arguments: --swap-space
4``). ``find_root_cause`` takes the first such line of the log, vLLM's prefixes (``(Worker pid=N)
ERROR 12-02 07:34:02 [file.py:12]``) left out. INFO and WARNING lines and the wrappers that only
point elsewhere are skipped (a wrapper is the answer only when nothing else is there).
``parse_program`` names the program that failed, behind ``taskset``/``env``/``numactl``/``nice``
wrappers. The line is the server's text: it is redacted before it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tracker.redaction import redact_one_line

# ``[rank0]: `` (torch's multi-process prefix), ``(Worker pid=9) ``, ``ERROR 12-02 07:34:02 [x.py:1] ``
_PREFIX = re.compile(r"^(?:\[rank\d+\]:\s*)?(?:\([^)]*\)\s+)?"
                     r"(?:(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
                     r"\d\d-\d\d\s+[\d:.]+\s+\[[^\]]*\]\s?)?")
_QUIET_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "WARN"})
# ``ValueError: …``, ``torch.OutOfMemoryError: …``, ``pydantic_core._pydantic_core.ValidationError: …``
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): \S")
_ARGPARSE = re.compile(r"^[\w.-]+(?: [\w.-]+){0,2}: error: \S")
# lines that only say "the cause is elsewhere"
_WRAPPERS = re.compile(r"Engine core initialization failed|See root cause above|"
                       r"check the stack trace above|EngineCore failed to start", re.IGNORECASE)
_VALIDATION = re.compile(r"\d+ validation errors? for ")
_MAX_CHARS = 300


@dataclass(frozen=True, slots=True)
class RootCause:
    line_number: int  # 1-based, in the log
    text: str  # redacted, one line


def _message(raw: str) -> str | None:
    """The line without vLLM's prefix, or None for an INFO/WARNING line."""
    found = _PREFIX.match(raw)
    assert found is not None  # the pattern matches the empty prefix
    if found["level"] in _QUIET_LEVELS:
        return None
    return raw[found.end():].rstrip()


def _details(messages: Sequence[str | None], start: int) -> str:
    """pydantic's "1 validation error for ModelConfig" says what in the next lines: two of them."""
    following = [m.strip() for m in messages[start + 1:start + 4] if m and m.strip()]
    return " | ".join(following[:2])


def find_root_cause(text: str) -> RootCause | None:
    """The first exception or argparse error line of a server's log (a wrapper only when it is
    all there is), or None when the log has neither."""
    # numbered as an editor numbers them; a progress bar's \r-separated updates: the last shown
    lines = [line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n")]
    messages = [_message(line) for line in lines]
    wrapper: RootCause | None = None
    for index, message in enumerate(messages):
        if message is None or not (_EXCEPTION.match(message) or _ARGPARSE.match(message)):
            continue
        if _VALIDATION.search(message) and (details := _details(messages, index)):
            message = f"{message}: {details}"
        cause = RootCause(index + 1, redact_one_line(message, _MAX_CHARS))
        if not _WRAPPERS.search(message):
            return cause
        wrapper = wrapper or cause
    return wrapper


# wrapper -> (options that take the next item as their value, positional items before the program)
_LAUNCH_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "taskset": (frozenset(), 1),  # taskset [-a] [-c] MASK|LIST PROGRAM
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}), 0),
    "numactl": (frozenset({"-C", "--physcpubind", "-N", "--cpunodebind", "-m", "--membind",
                           "-p", "--preferred", "-i", "--interleave", "-w",
                           "--weighted-interleave", "-P", "--preferred-many"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
}


def _skip_wrapper(name: str, command: Sequence[str], at: int) -> int:
    """The index of the item after wrapper ``name``'s own options and arguments."""
    takes_value, positionals = _LAUNCH_WRAPPERS[name]
    while at < len(command):
        item = command[at]
        if item in takes_value:
            at += 2
        elif item.startswith("-") and item != "-":
            at += 1
        elif name == "env" and "=" in item:
            at += 1  # NAME=VALUE
        elif positionals:
            positionals -= 1
            at += 1
        else:
            break
    return at


def find_program(command: Sequence[str]) -> int:
    """The index of the program a launch command runs, past any wrappers (0 when the wrappers
    leave nothing)."""
    at = 0
    while at < len(command):
        if Path(command[at]).name not in _LAUNCH_WRAPPERS:
            return at
        at = _skip_wrapper(Path(command[at]).name, command, at + 1)
    return 0


def parse_program(command: Sequence[str]) -> str:
    """The program's name: ``vllm`` for ``taskset -c 0 /venv/bin/vllm serve``."""
    return Path(command[find_program(command)]).name if command else "the server"


def read_root_cause(log_path: Path) -> RootCause | None:
    """``find_root_cause`` of a log file (its \r kept: they are not line ends there)."""
    try:
        with open(log_path, encoding="utf-8", errors="replace", newline="") as log:
            return find_root_cause(log.read())
    except OSError:
        return None
