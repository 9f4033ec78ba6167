"""`tracker demo`, run once per test session as a user runs it: ``python -m tracker demo`` from
an empty directory, no ``--db``. tests/demo/test_story.py, tests/cli/test_main.py and the
dashboard's tests read the same run (the ``demo`` fixture in tests/conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tracker.store.db import DB_URL_ENV, open_store
from tracker.store.regressions import RegressionRecord, fetch_regressions

DEMO_TIMEOUT_S = 600  # the demo takes about a minute here; a slow CI machine gets room


@dataclass(frozen=True, slots=True)
class DemoOutput:
    folder: str  # where `tracker demo` ran (its current directory)
    returncode: int
    stdout: str
    stderr: str

    @property
    def db_url(self) -> str:
        return f"sqlite:///{Path(self.folder) / 'tracker.db'}"

    @property
    def report(self) -> Path:
        return Path(self.folder) / "tracker-demo-gate.md"


def run_demo_once(factory: pytest.TempPathFactory) -> DemoOutput:
    """`python -m tracker demo` from an empty directory, once per test session (the outcome is
    kept in the session's temporary folder, so every test module reads the same run)."""
    base = factory.getbasetemp()
    saved = base / "tracker-demo.json"
    if saved.exists():
        return DemoOutput(**json.loads(saved.read_text(encoding="utf-8")))
    folder = base / "tracker-demo"
    shutil.rmtree(folder, ignore_errors=True)  # an earlier attempt that did not finish
    folder.mkdir()
    env = {key: value for key, value in os.environ.items() if key != DB_URL_ENV}
    done = subprocess.run([sys.executable, "-m", "tracker", "demo"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=DEMO_TIMEOUT_S, check=False)
    output = DemoOutput(str(folder), done.returncode, done.stdout, done.stderr)
    saved.write_text(json.dumps(asdict(output)), encoding="utf-8")
    return output


def fetch_demo_records(url: str) -> list[RegressionRecord]:
    """Every regression record of the demo's database (every status)."""
    engine = open_store(url)
    try:
        with Session(engine) as session:
            return fetch_regressions(session, limit=1000)
    finally:
        engine.dispose()
