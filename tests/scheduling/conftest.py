"""Fixtures for the scheduling tests: fast simulator configs, tiny suites, tracker processes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.simconfigs import FAST_SIM
from tracker.scheduling.queueing import utc_now
from tracker.scheduling.schedules import CLI_SOURCE, ScheduleSpec, build_schedule_row
from tracker.store.db import open_store
from tracker.store.run_queue import RunRequest, fetch_requests
from tracker.store.schedule_rows import save_schedule

ROOT = Path(__file__).resolve().parents[2]


SLOW_SIM = FAST_SIM.replace("name: fast-sim", "name: slow-sim").replace(
    "decode_base_s: 0.001", "decode_base_s: 0.005")

TINY_SUITE = """\
name: tiny
workloads:
  - name: one
    prompts: {source: fixed, text: "hello"}
    max_tokens: 2
    concurrency: 1
    num_requests: 1
"""

# a quick first workload, then one long enough (~1.5 s) to be cut short
TWO_PART_SUITE = """\
name: two-part
workloads:
  - name: quick
    prompts: {source: fixed, text: "hello"}
    max_tokens: 2
    concurrency: 1
    num_requests: 2
  - name: long
    prompts: {source: fixed, text: "hello"}
    max_tokens: 8
    ignore_eos: true
    concurrency: 1
    num_requests: 36
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {}
    for name, text in (("fast", FAST_SIM), ("slow", SLOW_SIM), ("tiny", TINY_SUITE),
                       ("two_part", TWO_PART_SUITE)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        paths[name] = path
    return paths


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    store = open_store(db_url)
    try:
        yield store
    finally:
        store.dispose()


def add_schedule(engine: Engine, name: str, config: Path, suite: Path, *,
                 cron: str = "0 2 * * *", repeats: int = 1,
                 labels: dict[str, str] | None = None) -> None:
    spec = ScheduleSpec(name=name, cron=cron, configs=[str(config)], suites=[str(suite)],
                        repeats=repeats, labels=labels or {})
    row = build_schedule_row(spec, config.parent, CLI_SOURCE)
    with Session(engine) as session, session.begin():
        save_schedule(session, row, utc_now())


def requests_of(engine: Engine) -> list[RunRequest]:
    with Session(engine) as session:
        return fetch_requests(session, None, limit=10_000)


def spawn_tracker(*args: str | Path) -> subprocess.Popen[str]:
    """``python -m tracker ARGS`` from the repository root, output captured."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("TRACKER_ALERT_WEBHOOK_URL", None)
    return subprocess.Popen([sys.executable, "-m", "tracker", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
