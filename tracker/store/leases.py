"""Who runs a ``running`` run, and what becomes of a run whose tracker is gone.

While a run is measured it carries its owner (``runs.owner_pid`` on ``runs.host``) and a lease
(``runs.lease_until``) that a heartbeat thread (``RunLease``) renews every ``LEASE_S / 4``.
Finishing the run clears both. Every command that opens the store (``open_store``) reaps the
runs whose owner is gone:

- On this host, the owner's PID no longer runs (the tracker was killed, even with SIGKILL).
- On any host, the lease ran out more than ``LEASE_GRACE_S`` ago (a host that went away, a PID
  that another process reused, a tracker stopped with SIGSTOP).

A reaped run keeps what was measured: ``partial`` with the reason, ``failed`` when nothing was.
A run that a worker makes for a queued request that is still ``running`` is left to the queue's
reaper (``tracker.store.run_queue``), which closes it the same way when it requeues the request,
so the request and its run end together. Each reaper closes only a run that is still
``running``, so no run is closed twice. One exception: a worker whose PID is gone on this host
is known dead, so whoever reads the store next requeues its request (or fails it, as the queue's
reaper would) and closes its run at once: a lone worker killed on a SQLite host leaves nothing
``running`` for the dashboard to show until another worker or the scheduler starts.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, exists, func, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from tracker.errors import StoreLockedError
from tracker.redaction import redact_one_line
from tracker.results import RunStatus
from tracker.store.models import RunModel, SuiteModel, WorkloadResultModel
from tracker.store.models_scheduling import RunRequestModel
from tracker.store.run_queue import requeue_dead_workers_request
from tracker.targets.supervisor import process_is_alive

log = logging.getLogger(__name__)

LEASE_S = 60.0  # a heartbeat vouches for the run this long
LEASE_GRACE_S = 60.0  # how long past its lease a run on another host is still given
_RUNNING = RunStatus.RUNNING.value
_SUBCOMMAND = re.compile(r"[a-z][a-z-]*")


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ReapedRun:
    run_id: int
    status: RunStatus
    reason: str


@dataclass(frozen=True, slots=True)
class _Running:
    """A running run as the reaper reads it."""

    id: int
    owner_pid: int
    host: str
    lease_until: datetime | None
    started_at: datetime
    suite_id: int


# --- the owner's side ----------------------------------------------------------------------


def take_run_lease(session: Session, run_id: int, owner_pid: int, now: datetime,
                   lease_s: float = LEASE_S) -> None:
    """Record that process ``owner_pid`` (on the run's host) runs ``run_id`` until renewed."""
    session.execute(update(RunModel).where(RunModel.id == run_id)
                    .values(owner_pid=owner_pid, lease_until=now + timedelta(seconds=lease_s))
                    .execution_options(synchronize_session=False))


def renew_run_lease(session: Session, run_id: int, owner_pid: int, now: datetime,
                    lease_s: float = LEASE_S) -> bool:
    """Extend the lease, or return False when the run is no longer running under ``owner_pid``."""
    result = session.execute(
        update(RunModel)
        .where(RunModel.id == run_id, RunModel.status == _RUNNING,
               RunModel.owner_pid == owner_pid)
        .values(lease_until=now + timedelta(seconds=lease_s))
        .execution_options(synchronize_session=False))
    return bool(getattr(result, "rowcount", 0))


class RunLease:
    """A daemon thread that renews a run's lease every ``lease_s / 4`` until ``stop``."""

    def __init__(self, engine: Engine, run_id: int, owner_pid: int, lease_s: float = LEASE_S,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.engine = engine
        self.run_id = run_id
        self.owner_pid = owner_pid
        self.lease_s = lease_s
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"run-lease-{run_id}",
                                        daemon=True)

    def start(self) -> RunLease:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.lease_s / 4):
            try:
                with Session(self.engine) as session, session.begin():
                    held = renew_run_lease(session, self.run_id, self.owner_pid, self.clock(),
                                           self.lease_s)
            except (SQLAlchemyError, StoreLockedError) as exc:  # not fatal; the next may pass
                log.warning("run %d: lease renewal failed: %s", self.run_id,
                            redact_one_line(str(exc), 200))
                continue
            if not held:
                log.warning("run %d was closed by another command while this tracker ran it "
                            "(taken for abandoned); its lease is no longer renewed", self.run_id)
                return


# --- everyone else's side ------------------------------------------------------------------


def describe_command() -> str:
    """This process as a reason names it: "`tracker runs` (pid 12 on host h)"."""
    path = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("python")
    name = path.name
    if name == "tracker" or (name == "__main__.py" and path.parent.name == "tracker"):
        sub = sys.argv[1] if len(sys.argv) > 1 else ""
        name = f"tracker {sub}" if _SUBCOMMAND.fullmatch(sub) else "tracker"
    return f"`{name}` (pid {os.getpid()} on host {socket.gethostname()})"


def reap_abandoned_runs(session: Session, now: datetime, reaped_by: str, *,
                        host: str | None = None,
                        is_alive: Callable[[int], bool] = process_is_alive,
                        grace_s: float = LEASE_GRACE_S) -> list[ReapedRun]:
    """Close the running runs whose owner is gone (see the module) and return what was closed."""
    host = socket.gethostname() if host is None else host
    queued = exists().where(RunRequestModel.run_id == RunModel.id,
                            RunRequestModel.status == _RUNNING)  # the queue's reaper closes it
    rows = session.execute(
        select(RunModel.id, RunModel.owner_pid, RunModel.host, RunModel.lease_until,
               RunModel.started_at, RunModel.suite_id, queued.label("queued"))
        .where(RunModel.status == _RUNNING, RunModel.owner_pid.is_not(None))
        .order_by(RunModel.id)).all()
    reaped: list[ReapedRun] = []
    for run_id, pid, run_host, lease, started_at, suite_id, in_queue in rows:
        if pid is None:
            continue
        row = _Running(run_id, pid, run_host, lease, started_at, suite_id)
        closed = (_reap_dead_workers_run(session, row, now, reaped_by, host, is_alive) if in_queue
                  else _reap_owned_run(session, row, now, reaped_by, host, is_alive, grace_s))
        if closed is not None:
            reaped.append(closed)
    return reaped


def _reap_owned_run(session: Session, row: _Running, now: datetime, reaped_by: str, host: str,
                    is_alive: Callable[[int], bool], grace_s: float) -> ReapedRun | None:
    cause = _why_abandoned(row, now, host, is_alive, grace_s)
    return None if cause is None else _close_abandoned(session, row, cause, now, reaped_by)


def _reap_dead_workers_run(session: Session, row: _Running, now: datetime, reaped_by: str,
                           host: str, is_alive: Callable[[int], bool]) -> ReapedRun | None:
    """A queued request's run whose worker's PID is gone on this host: the request requeued or
    failed, the run closed (a lease that ran out is the queue's reaper's to judge)."""
    if row.host != host or is_alive(row.owner_pid):
        return None
    cause = (f"the worker running it (pid {row.owner_pid} on host {row.host}) stopped without "
             "finishing (killed?)")
    outcome = requeue_dead_workers_request(session, row.id, cause, now)
    if outcome is None:
        return None
    return _close_abandoned(session, row, cause + ("; its request requeued" if outcome
                                                    else "; its request failed"), now, reaped_by)


def _why_abandoned(row: _Running, now: datetime, host: str, is_alive: Callable[[int], bool],
                   grace_s: float) -> str | None:
    owner = f"the tracker running it (pid {row.owner_pid} on host {row.host})"
    if row.host == host and not is_alive(row.owner_pid):
        return f"{owner} stopped without finishing (killed?)"
    if row.lease_until is not None and row.lease_until < now - timedelta(seconds=grace_s):
        return (f"{owner} has not renewed its lease since "
                f"{_last_heard(row, now):%Y-%m-%d %H:%M:%S} UTC (its host went away, or it "
                "was stopped?)")
    return None


def _last_heard(row: _Running, now: datetime) -> datetime:
    """The owner's last renewal (its lease less a lease), within [started_at, now]."""
    if row.lease_until is None:
        return min(row.started_at, now)
    heard = row.lease_until - timedelta(seconds=LEASE_S)
    return max(row.started_at, min(heard, now))


def _close_abandoned(session: Session, row: _Running, cause: str, now: datetime,
                     reaped_by: str) -> ReapedRun | None:
    measured = session.scalar(select(func.count()).select_from(WorkloadResultModel)
                              .where(WorkloadResultModel.run_id == row.id,
                                     WorkloadResultModel.completed > 0)) or 0
    canonical = session.scalar(select(SuiteModel.canonical).where(SuiteModel.id == row.suite_id))
    planned = len(canonical.get("workloads", [])) if isinstance(canonical, dict) else 0
    status = RunStatus.PARTIAL if measured else RunStatus.FAILED
    reason = (f"{cause}; marked {status.value} by {reaped_by} at {now:%Y-%m-%d %H:%M:%S} UTC; "
              f"{measured} measured workload result{'s' if measured != 1 else ''} kept "
              f"(the suite plans {planned})")
    lease = (RunModel.lease_until.is_(None) if row.lease_until is None
             else RunModel.lease_until == row.lease_until)
    result = session.execute(
        update(RunModel)
        .where(RunModel.id == row.id, RunModel.status == _RUNNING,
               RunModel.owner_pid == row.owner_pid, lease)  # unchanged since read: not renewed
        .values(status=status.value, status_reason=reason, ended_at=_last_heard(row, now),
                owner_pid=None, lease_until=None)
        .execution_options(synchronize_session=False))
    return ReapedRun(row.id, status, reason) if getattr(result, "rowcount", 0) else None


def reap_abandoned_runs_safely(engine: Engine) -> list[ReapedRun]:
    """``reap_abandoned_runs`` in its own transaction, for ``open_store``: never fatal (the
    command the user asked for must not fail because this housekeeping did, which is logged)."""
    try:
        with Session(engine) as session, session.begin():
            reaped = reap_abandoned_runs(session, utc_now(), describe_command())
    except Exception as exc:  # a housekeeping boundary: log it, let the command go on
        log.warning("could not check for runs left running by a stopped tracker: %s: %s",
                    type(exc).__name__, redact_one_line(str(exc), 200))
        return []
    for run in reaped:
        log.warning("run %d marked %s: %s", run.run_id, run.status.value, run.reason)
    return reaped
