"""``tracker scheduler``: fires each schedule's slots and enqueues their run requests.

APScheduler 3 with its job store in the tracker's database (``apscheduler_jobs``), so jobs and
their next run times survive a restart: a job is added once and never replaced unless its
schedule's cron or time zone changed (replacing it would recompute the next run time and lose a
missed slot). Every job has ``coalesce=True`` and ``max_instances=1``: slots missed while the
scheduler was down run once, within ``misfire_grace_s``. APScheduler 3 runs a job once per
scheduler sharing a store, so a lock (PostgreSQL advisory lock, or a lock file beside a SQLite
database) keeps one scheduler per database and a second one refuses to start.

The scheduler runs in APScheduler's background thread. The main thread stays free to handle
SIGTERM/SIGINT (and, with ``--with-worker``, to run a worker). Stopping marks in-flight work
(a worker's current run is kept as partial and its request requeued, an enqueue in progress is
one transaction, and a slot is stored once) and calls ``shutdown(wait=False)``: with
``wait=True`` APScheduler 3.11 drops a running job.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.job import Job
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.scheduling.defaults import (
    DEFAULT_MISFIRE_GRACE_S,
    DEFAULT_STALE_AFTER_S,
    DEFAULT_SYNC_INTERVAL_S,
)
from tracker.scheduling.locks import DatabaseLock
from tracker.scheduling.queueing import enqueue_schedule, reap_stale, utc_now
from tracker.scheduling.schedules import build_trigger, compute_slot
from tracker.store.db import create_store_engine
from tracker.store.schedule_rows import ScheduleRow, fetch_schedule, fetch_schedules

log = logging.getLogger(__name__)

JOB_PREFIX = "schedule:"
JOBS_TABLE = "apscheduler_jobs"


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    misfire_grace_s: float = DEFAULT_MISFIRE_GRACE_S
    sync_interval_s: float = DEFAULT_SYNC_INTERVAL_S  # re-read schedules, reap dead workers
    stale_after_s: float = DEFAULT_STALE_AFTER_S


class _Runtime:
    """What the persisted job function needs and cannot be pickled into the job store: the
    engine of the scheduler active in this process (one per process, like the lock), and
    where it says what it did (its ``emit``)."""

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.emit: Callable[[str], None] = log.info
        self.in_flight: set[str] = set()
        self.lock = threading.Lock()


_RUNTIME = _Runtime()


def fire_schedule(name: str) -> None:
    """The APScheduler job (importable by reference): enqueue the slot of schedule ``name``,
    and say so in one line on the scheduler's output (its ``emit``)."""
    engine, emit = _RUNTIME.engine, _RUNTIME.emit
    if engine is None:
        log.error("schedule %s fired with no active scheduler in this process; skipped", name)
        return
    with _RUNTIME.lock:
        _RUNTIME.in_flight.add(name)
    try:
        now = utc_now()
        ids = enqueue_schedule(engine, name, slot=True, now=now)
        emit(render_fired_line(name, _slot_of(engine, name, now), ids))
    except Exception:  # the job boundary: log it (the schedule's last_error says it too)
        log.exception("schedule %s: could not enqueue its slot", name)
    finally:
        with _RUNTIME.lock:
            _RUNTIME.in_flight.discard(name)


def render_fired_line(name: str, slot: datetime, ids: list[int]) -> str:
    queued = (f"queued {len(ids)} request(s) ({', '.join(map(str, ids))})" if ids
              else "queued nothing (the slot was queued before)")
    return f"schedule {name}: slot {_when(slot)} fired: {queued}"


def _slot_of(engine: Engine, name: str, now: datetime) -> datetime:
    """The slot a firing at ``now`` belongs to, as ``enqueue_schedule`` computes it."""
    with Session(engine) as session:
        schedule = fetch_schedule(session, name)
    if schedule is None:
        return now
    return compute_slot(build_trigger(schedule.cron, schedule.timezone), now)


def _same_trigger(job: Job, trigger: CronTrigger) -> bool:
    old = job.trigger
    return (isinstance(old, CronTrigger) and str(old) == str(trigger)
            and str(old.timezone) == str(trigger.timezone))


class TrackerScheduler:
    def __init__(self, engine: Engine, url: str, settings: SchedulerSettings | None = None,
                 emit: Callable[[str], None] = log.info) -> None:
        self.engine = engine
        self.url = url
        self.settings = settings or SchedulerSettings()
        self.emit = emit
        self.lock = DatabaseLock(url, "scheduler", "only one scheduler may run per database "
                                 "(APScheduler would run every job once per scheduler); stop "
                                 "the other one first, or run workers instead")
        self._scheduler: BackgroundScheduler | None = None
        self._store_engine: Engine | None = None

    def start(self) -> None:
        """Take the lock (raises LockHeldError), load the persisted jobs and sync them."""
        self.lock.acquire()
        try:
            self._start_apscheduler()
        except BaseException:
            self.lock.release()
            raise

    def _start_apscheduler(self) -> None:
        self._store_engine = create_store_engine(self.url)
        scheduler = BackgroundScheduler(
            jobstores={"default": SQLAlchemyJobStore(engine=self._store_engine,
                                                     tablename=JOBS_TABLE),
                       "memory": MemoryJobStore()},
            executors={"default": ThreadPoolExecutor(4)},
            job_defaults={"coalesce": True, "max_instances": 1,
                          "misfire_grace_time": int(self.settings.misfire_grace_s)},
            timezone=UTC)
        _RUNTIME.engine, _RUNTIME.emit = self.engine, self.emit
        scheduler.start()
        self._scheduler = scheduler
        self.sync()
        scheduler.add_job(self.sync, "interval", seconds=self.settings.sync_interval_s,
                          id="tracker-sync", jobstore="memory", replace_existing=True)

    def sync(self) -> None:
        """Make the jobs match the schedules in the database, and reap dead workers' requests."""
        try:
            with Session(self.engine) as session:
                schedules = fetch_schedules(session)
            self._sync_jobs(schedules)
            reap_stale(self.engine, self.settings.stale_after_s)
        except Exception:  # a housekeeping pass that fails is retried at the next one
            log.exception("scheduler: syncing schedules failed")

    def _sync_jobs(self, schedules: list[ScheduleRow]) -> None:
        scheduler = self._require()
        wanted = {JOB_PREFIX + row.name: row for row in schedules}
        for job in scheduler.get_jobs(jobstore="default"):
            if job.id.startswith(JOB_PREFIX) and job.id not in wanted:
                job.remove()
                self.emit(f"schedule {job.name}: removed")
        for job_id, row in wanted.items():
            trigger = build_trigger(row.cron, row.timezone)
            job = scheduler.get_job(job_id, jobstore="default")
            if job is not None and _same_trigger(job, trigger):
                if job.misfire_grace_time != int(self.settings.misfire_grace_s):
                    job.modify(misfire_grace_time=int(self.settings.misfire_grace_s))
                continue
            job = scheduler.add_job(fire_schedule, trigger, args=[row.name], id=job_id,
                                    name=row.name, jobstore="default", replace_existing=True)
            self.emit(f"schedule {row.name}: cron {row.cron!r} ({row.timezone}), next slot "
                      f"{_when(job.next_run_time)}")

    def stop(self) -> None:
        """Mark in-flight work, ``shutdown(wait=False)``, release the lock."""
        scheduler, self._scheduler = self._scheduler, None
        if scheduler is not None:
            with _RUNTIME.lock:
                busy = sorted(_RUNTIME.in_flight)
            if busy:
                self.emit(f"scheduler: stopping while enqueuing {', '.join(busy)}; each slot is "
                          "one transaction and stored once, so nothing is half-queued")
            scheduler.shutdown(wait=False)
        if _RUNTIME.engine is self.engine:
            _RUNTIME.engine, _RUNTIME.emit = None, log.info
        if self._store_engine is not None:
            self._store_engine.dispose()
            self._store_engine = None
        self.lock.release()

    def _require(self) -> BackgroundScheduler:
        if self._scheduler is None:
            raise RuntimeError("the scheduler is not running")
        return self._scheduler


def _when(moment: datetime | None) -> str:
    return "none" if moment is None else f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
