"""The gate's report where a person reads it: on a terminal as text (no Markdown escapes, no
HTML entities or tags), piped or redirected as the Markdown a PR comment takes."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time

from sqlalchemy.orm import Session

from tests.demo_run import DemoOutput
from tracker.store.db import open_store
from tracker.store.runs import fetch_runs


def _gate_command(demo: DemoOutput) -> list[str]:
    engine = open_store(demo.db_url)
    try:
        with Session(engine) as session:
            runs = fetch_runs(session)
    finally:
        engine.dispose()
    first, last = min(r.run_id for r in runs), max(r.run_id for r in runs)
    return [sys.executable, "-m", "tracker", "gate", "--db", demo.db_url, "--base-run",
            str(first), "--head-run", str(last)]


def _on_a_terminal(command: list[str], cwd: str) -> str:
    """The command's stdout through a real pseudo-terminal."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(command, stdout=terminal, stderr=subprocess.DEVNULL, cwd=cwd)
    os.close(terminal)
    chunks = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=60)
    os.close(controller)
    return b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")


def test_the_gate_prints_text_on_a_terminal_and_markdown_when_redirected(demo: DemoOutput) -> None:
    command = _gate_command(demo)
    piped = subprocess.run(command, capture_output=True, text=True, cwd=demo.folder, timeout=120)
    assert piped.returncode in (0, 1), piped.stderr
    assert piped.stdout.startswith("## tracker gate:")
    assert "\\-" in piped.stdout or "\\." in piped.stdout  # the Markdown keeps outside text literal
    assert "<sub>" in piped.stdout
    shown = _on_a_terminal(command, demo.folder)
    assert shown.startswith("## tracker gate:"), shown[:200]
    for escaped in ("\\-", "\\.", "\\_", "&gt;", "&lt;", "&amp;", "<sub>", "</sub>"):
        assert escaped not in shown, (escaped, shown)
    assert "\\(demo\\-chat@" in piped.stdout and "(demo-chat@" in shown
    # the same rows, each a table line still: cells split on "|" alike
    table = [line for line in piped.stdout.splitlines() if line.startswith("| ")]
    seen = [line for line in shown.splitlines() if line.startswith("| ")]
    assert len(table) == len(seen) > 3
    assert [line.count("|") - line.count("\\|") for line in table] == \
        [line.count("|") - line.count("\\|") for line in seen]
