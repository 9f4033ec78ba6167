"""`tracker mcp` as an agent starts it: a subprocess on stdio, driven by the SDK's own client.

``demo_copy`` is a copy of the session's `tracker demo` database (``tests/demo_run.py``) that a
test may write to (queue, triage) without touching the one the other tests read. ``connect``
starts ``python -m tracker mcp --db URL`` with the arguments given and yields a connected
``mcp.Client``; the server's stderr is kept in a file the test can read afterwards.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult

from tests.demo_run import DemoOutput

ROOT = Path(__file__).resolve().parents[2]
CONNECT_TIMEOUT_S = 120.0  # the server imports the store and the analysis before it answers


@dataclass(frozen=True, slots=True)
class DemoCopy:
    path: Path

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite database (its WAL included), as the backup API takes it."""
    with sqlite3.connect(source) as origin, sqlite3.connect(target) as copy:
        origin.backup(copy)
    origin.close()
    copy.close()


@pytest.fixture
def demo_copy(demo: DemoOutput, tmp_path: Path) -> DemoCopy:
    path = tmp_path / "demo-copy.db"
    copy_database(Path(demo.folder) / "tracker.db", path)
    return DemoCopy(path)


@asynccontextmanager
async def connect(url: str, *args: str, stderr: Path, env: dict[str, str] | None = None,
                  cwd: Path = ROOT, mode: str = "auto") -> AsyncIterator[Client]:
    """A client connected to ``tracker mcp --db URL ARGS`` on stdio (what an agent runs)."""
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "tracker", "mcp", "--db", url, *args],
                                   env=env, cwd=str(cwd))
    with stderr.open("a", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode,
                          read_timeout_seconds=CONNECT_TIMEOUT_S) as client:
            yield client


def answer(result: CallToolResult) -> dict[str, Any]:
    """A successful call's JSON (its text and its structured content agree)."""
    assert not result.is_error, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    parsed: dict[str, Any] = json.loads(text)
    assert parsed == result.structured_content
    return parsed


def refusal(result: CallToolResult) -> str:
    """A refused call's one line."""
    assert result.is_error, result.structured_content
    text: str = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("error: ") and "\n" not in text, text
    return text
