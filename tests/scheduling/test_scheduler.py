"""The scheduler on a real clock: one enqueue per slot, coalescing after a restart, one scheduler
per database."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from tests.scheduling.conftest import add_schedule, requests_of, spawn_tracker
from tests.waiting import wait_for
from tracker.errors import LockHeldError
from tracker.scheduling.scheduler import SchedulerSettings, TrackerScheduler
from tracker.store.db import alembic_config, open_store
from tracker.store.schedule_rows import delete_schedule

EVERY_2_S = "*/2 * * * * *"
SETTINGS = SchedulerSettings(misfire_grace_s=60, sync_interval_s=0.5, stale_after_s=60)


def _even_seconds(after: datetime, until: datetime) -> set[datetime]:
    """The slots of EVERY_2_S in (after, until]."""
    slot = after.replace(microsecond=0) + timedelta(seconds=1)
    slots = set()
    while slot <= until:
        if slot.second % 2 == 0:
            slots.add(slot)
        slot += timedelta(seconds=1)
    return slots


def _run_until(scheduler: TrackerScheduler, condition: Callable[[datetime], bool],
               what: str) -> tuple[datetime, datetime, datetime]:
    """Run the scheduler until ``condition(started)`` holds. When start was called, when it
    returned (its jobs exist from then: a loaded machine starts slowly), and when it stopped."""
    asked = datetime.now(UTC)
    scheduler.start()
    started = datetime.now(UTC)
    try:
        wait_for(lambda: condition(started), 20.0, what)
    finally:
        scheduler.stop()
    return asked, started, datetime.now(UTC)


def _slots(engine: Engine) -> list[datetime]:
    return [r.slot_at for r in requests_of(engine) if r.slot_at is not None]


def _job_rows(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM apscheduler_jobs")).scalar_one())


def test_one_enqueue_per_slot_and_missed_slots_coalesce_after_a_restart(
        engine: Engine, db_url: str, files: dict[str, Path]) -> None:
    add_schedule(engine, "every2", files["fast"], files["tiny"], cron=EVERY_2_S, repeats=2)

    def slot_behind_us(started: datetime) -> bool:  # a slot fired while running, well past
        now = datetime.now(UTC)
        return any(started < slot <= now - timedelta(seconds=0.5) for slot in _slots(engine))

    first_asked, first_start, first_stop = _run_until(
        TrackerScheduler(engine, db_url, SETTINGS), slot_behind_us, "a slot fired while running")
    wait_for(lambda: len(_even_seconds(first_stop, datetime.now(UTC))) >= 2, 20.0,
             "two slots to pass while no scheduler runs")
    second_start, _, second_stop = _run_until(
        TrackerScheduler(engine, db_url, SETTINGS),
        lambda _started: any(slot > first_stop for slot in _slots(engine)),
        "the slots missed while down to be enqueued, once")

    slots = _slots(engine)
    counts = {slot: slots.count(slot) for slot in slots}
    assert set(counts.values()) == {2}, counts  # each slot: its 2 repeats, once
    running = _even_seconds(first_start, first_stop - timedelta(seconds=0.3))
    assert running <= set(counts) and len(running) >= 1
    missed = _even_seconds(first_stop, second_start)
    assert len(missed) >= 2
    assert {s for s in counts if first_stop < s <= second_start} == {max(missed)}
    assert all(first_asked <= s <= second_stop for s in counts)
    assert _job_rows(engine) == 1  # the job was loaded again, not added twice


def test_a_removed_schedule_loses_its_job_and_the_store_stays_consistent(
        engine: Engine, db_url: str, files: dict[str, Path]) -> None:
    add_schedule(engine, "nightly", files["fast"], files["tiny"])
    scheduler = TrackerScheduler(engine, db_url, SETTINGS)
    scheduler.start()
    try:
        assert _job_rows(engine) == 1
        with Session(engine) as session, session.begin():
            delete_schedule(session, "nightly")
        wait_for(lambda: _job_rows(engine) == 0, 5, "the job to be removed")
    finally:
        scheduler.stop()
    command.check(alembic_config(db_url))  # APScheduler's table is not schema drift


def test_a_second_scheduler_in_one_process_is_refused(engine: Engine, db_url: str) -> None:
    first = TrackerScheduler(engine, db_url, SETTINGS)
    first.start()
    try:
        with pytest.raises(LockHeldError, match="another tracker scheduler is already active"):
            TrackerScheduler(engine, db_url, SETTINGS).start()
    finally:
        first.stop()
    again = TrackerScheduler(engine, db_url, SETTINGS)  # released: the next one starts
    again.start()
    again.stop()


def _wait_active(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "scheduler active" in line:
            return "".join(lines)
    raise AssertionError(f"scheduler never became active: {''.join(lines)} "
                         f"{process.stderr.read() if process.stderr else ''}")


@pytest.mark.postgres
def test_a_second_scheduler_process_refuses_to_start_on_postgres(postgres_url: str) -> None:
    args = ("scheduler", "--db", postgres_url, "--sync-interval-s", "1")
    first = spawn_tracker(*args)
    try:
        _wait_active(first)
        second = spawn_tracker(*args)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2
        assert "another tracker scheduler is already active" in err
        assert "tracker-scheduler pid" in err  # who holds it
        assert err.count("\n") == 1  # one line, no traceback
    finally:
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert "scheduler stopped" in out
    third = spawn_tracker(*args)  # the lock died with the first one
    try:
        _wait_active(third)
    finally:
        third.send_signal(signal.SIGINT)
        third.communicate(timeout=60)
    assert third.returncode == 0


def test_scheduler_with_worker_runs_the_slots_on_one_machine(sqlite_url: str,
                                                             files: dict[str, Path]) -> None:
    schedules = files["fast"].parent / "schedules.yaml"
    schedules.write_text(f"schedules:\n  - name: every2\n    cron: '{EVERY_2_S}'\n"
                         "    configs: [fast.yaml]\n    suites: [tiny.yaml]\n", encoding="utf-8")
    process = spawn_tracker("scheduler", "--db", sqlite_url, "--schedules", schedules,
                            "--with-worker", "--poll-s", "0.1", "--sync-interval-s", "1")
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if re.search(r"request \d+: run \d+ completed", line):
                break
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "scheduler stopped" in out
    engine = open_store(sqlite_url)
    try:
        requests = requests_of(engine)
    finally:
        engine.dispose()
    assert requests and requests[0].status.value == "done" and requests[0].slot_at is not None
