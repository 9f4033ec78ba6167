"""The run-request queue: enqueue, claim, heartbeat, finish, release, and the reaper of requests
whose worker went silent. Every function takes a Session, and the caller owns the transaction (as
in ``tracker.store.runs``).

Claiming is safe with many workers: on PostgreSQL the candidate row is locked with
``SELECT … FOR UPDATE SKIP LOCKED`` (workers never wait on each other), and on every backend the
claim is a guarded ``UPDATE … WHERE status = 'queued'`` that only one worker can win.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from tracker.results import RunStatus
from tracker.store.models import RunModel, WorkloadResultModel
from tracker.store.models_scheduling import RunRequestModel
from tracker.store.runs import finish_run

MAX_ATTEMPTS = 2  # a request whose worker died is requeued once, then marked failed


class RequestKind(StrEnum):
    RUN = "run"  # a config x suite run
    BISECT = "bisect"  # a bisection between two stored config versions (``job``)


class RequestStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestedRun:
    """What a request asks a worker to run: a config and a suite, as they were when queued."""

    config_name: str
    config_path: str
    config_body: Mapping[str, Any]
    suite_name: str
    suite_path: str
    suite_body: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class NewRequest(RequestedRun):
    position: int
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest(RequestedRun):
    id: int
    schedule_name: str | None
    slot_at: datetime | None
    position: int
    labels: Mapping[str, str]
    status: RequestStatus
    attempts: int
    worker_id: str | None
    gpus: str | None
    enqueued_at: datetime
    claimed_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None
    run_id: int | None
    error: str | None
    kind: RequestKind = RequestKind.RUN
    job: Mapping[str, Any] | None = None  # what a non-run job needs
    job_key: str | None = None
    bisection_id: int | None = None


@dataclass(frozen=True, slots=True)
class ReapedRequest:
    """A running request whose worker stopped heartbeating, and what was done about it."""

    request_id: int
    worker_id: str | None
    run_id: int | None
    run_status: RunStatus | None  # what its cut-short run was marked, if it had begun one
    requeued: bool


def labels_match(required: Mapping[str, str], offered: Mapping[str, str]) -> bool:
    """A worker may take a request when it carries every label the request asks for."""
    return all(offered.get(key) == value for key, value in required.items())


# --- enqueue -------------------------------------------------------------------------------


def enqueue_requests(session: Session, schedule_name: str | None, slot_at: datetime | None,
                     requests: Sequence[NewRequest], now: datetime) -> list[int]:
    """Queue ``requests``. A (schedule, slot, position) already queued is skipped, so a slot
    fired twice still runs once. Returns the ids of the requests queued now."""
    ids: list[int] = []
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    for request in requests:
        values = _request_values(request, schedule_name, slot_at, now)
        statement = dialect.insert(RunRequestModel).values(**values).on_conflict_do_nothing(
            index_elements=["schedule_name", "slot_at", "position"]).returning(RunRequestModel.id)
        inserted = session.execute(statement).scalar_one_or_none()
        if inserted is not None:
            ids.append(inserted)
    return ids


def enqueue_job(session: Session, schedule_name: str | None, request: NewRequest,
                kind: RequestKind, job: Mapping[str, Any], job_key: str, now: datetime
                ) -> int | None:
    """Queue one job of ``kind`` (not a slot's run) once per ``job_key``: None when a job with
    that key was ever queued (whatever became of it), else its id."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    values = {**_request_values(request, schedule_name, None, now), "kind": kind.value,
              "job": dict(job), "job_key": job_key}
    statement = dialect.insert(RunRequestModel).values(**values).on_conflict_do_nothing(
        index_elements=["job_key"]).returning(RunRequestModel.id)
    inserted: int | None = session.execute(statement).scalar_one_or_none()
    return inserted


def _request_values(request: NewRequest, schedule_name: str | None, slot_at: datetime | None,
                    now: datetime) -> dict[str, Any]:
    return {
        "schedule_name": schedule_name, "slot_at": slot_at, "position": request.position,
        "config_name": request.config_name, "config_path": request.config_path,
        "config_body": dict(request.config_body), "suite_name": request.suite_name,
        "suite_path": request.suite_path, "suite_body": dict(request.suite_body),
        "labels": dict(request.labels), "status": RequestStatus.QUEUED.value, "attempts": 0,
        "worker_id": None, "gpus": None, "enqueued_at": now, "claimed_at": None,
        "heartbeat_at": None, "finished_at": None, "run_id": None, "error": None,
    }


# --- claim, heartbeat, finish --------------------------------------------------------------


def claim_request(session: Session, worker_id: str, labels: Mapping[str, str], gpus: str | None,
                  now: datetime) -> RunRequest | None:
    """Take the oldest queued request this worker's labels allow, or None."""
    queued = RequestStatus.QUEUED.value
    candidates = session.execute(select(RunRequestModel.id, RunRequestModel.labels)
                                 .where(RunRequestModel.status == queued)
                                 .order_by(RunRequestModel.id)).all()
    matching = [request_id for request_id, required in candidates if labels_match(required, labels)]
    if not matching:
        return None
    row = session.scalars(select(RunRequestModel)
                          .where(RunRequestModel.id.in_(matching), RunRequestModel.status == queued)
                          .order_by(RunRequestModel.id).limit(1)
                          .with_for_update(skip_locked=True)).first()
    if row is None:
        return None
    claimed = session.execute(
        update(RunRequestModel)
        .where(RunRequestModel.id == row.id, RunRequestModel.status == queued)
        .values(status=RequestStatus.RUNNING.value, attempts=RunRequestModel.attempts + 1,
                worker_id=worker_id, gpus=gpus, claimed_at=now, heartbeat_at=now, run_id=None,
                error=None)
        .execution_options(synchronize_session=False))
    if not getattr(claimed, "rowcount", 0):
        return None  # another worker won the race (SQLite path)
    session.refresh(row)
    return _request(row)


def _owned(request_id: int, worker_id: str) -> Any:
    return ((RunRequestModel.id == request_id) & (RunRequestModel.worker_id == worker_id)
            & (RunRequestModel.status == RequestStatus.RUNNING.value))


def heartbeat_request(session: Session, request_id: int, worker_id: str, now: datetime) -> bool:
    """Record that the worker is alive, or return False when the request is no longer this
    worker's."""
    result = session.execute(update(RunRequestModel).where(_owned(request_id, worker_id))
                             .values(heartbeat_at=now))
    return bool(getattr(result, "rowcount", 0))


def link_run(session: Session, request_id: int, worker_id: str, run_id: int) -> bool:
    result = session.execute(update(RunRequestModel).where(_owned(request_id, worker_id))
                             .values(run_id=run_id))
    return bool(getattr(result, "rowcount", 0))


def link_bisection(session: Session, request_id: int, bisection_id: int) -> None:
    """The bisection a ``bisect`` request stored (kept even if the request was reaped since)."""
    session.execute(update(RunRequestModel).where(RunRequestModel.id == request_id)
                    .values(bisection_id=bisection_id))


def finish_request(session: Session, request_id: int, worker_id: str, status: RequestStatus,
                   run_id: int | None, error: str | None, now: datetime) -> bool:
    """Mark the request done or failed, or return False when it was taken from this worker
    meanwhile."""
    result = session.execute(
        update(RunRequestModel).where(_owned(request_id, worker_id))
        .values(status=status.value, run_id=run_id, error=error, finished_at=now, heartbeat_at=now))
    return bool(getattr(result, "rowcount", 0))


def release_request(session: Session, request_id: int, worker_id: str, reason: str,
                    now: datetime, max_attempts: int = MAX_ATTEMPTS) -> bool | None:
    """Give a running request back (its worker is stopping): requeued (True) unless it has used
    its attempts (False, marked failed). It is None when it is no longer this worker's."""
    row = session.scalar(select(RunRequestModel).where(_owned(request_id, worker_id)))
    if row is None:
        return None
    return _requeue_or_fail(session, row, reason, now, max_attempts)


def _requeue_or_fail(session: Session, row: RunRequestModel, reason: str, now: datetime,
                     max_attempts: int) -> bool | None:
    """Requeue (True) or fail (False) the running request ``row`` as last read, or return None
    when it changed since (another reaper or its worker got there first)."""
    requeue = row.attempts < max_attempts
    outcome = "requeued" if requeue else f"failed after {row.attempts} attempts"
    values: dict[str, Any] = {
        "status": (RequestStatus.QUEUED if requeue else RequestStatus.FAILED).value,
        "error": f"{reason}; {outcome}",
        "finished_at": None if requeue else now,
    }
    if requeue:
        values["worker_id"] = None
    guard = ((RunRequestModel.id == row.id)
             & (RunRequestModel.status == RequestStatus.RUNNING.value)
             & (RunRequestModel.attempts == row.attempts)
             & (RunRequestModel.heartbeat_at == row.heartbeat_at))
    result = session.execute(update(RunRequestModel).where(guard).values(**values)
                             .execution_options(synchronize_session=False))
    return requeue if getattr(result, "rowcount", 0) else None


def requeue_dead_workers_request(session: Session, run_id: int, reason: str,
                                 now: datetime) -> bool | None:
    """The running request behind run ``run_id`` whose worker is known dead (its PID is gone on
    this host): requeued (True) or failed (False) as the stale-worker reaper would. It is None when
    there is no such request (or another reaper got there first)."""
    row = session.scalars(select(RunRequestModel)
                          .where(RunRequestModel.run_id == run_id,
                                 RunRequestModel.status == RequestStatus.RUNNING.value)).first()
    if row is None:
        return None
    return _requeue_or_fail(session, row, reason, now, MAX_ATTEMPTS)


# --- stale workers -------------------------------------------------------------------------


def reap_stale_requests(session: Session, stale_before: datetime, now: datetime,
                        max_attempts: int = MAX_ATTEMPTS) -> list[ReapedRequest]:
    """Requests running on a worker silent since before ``stale_before``: the cut-short run is
    kept and marked partial (or failed when nothing was measured), the request requeued once."""
    rows = session.scalars(select(RunRequestModel)
                           .where(RunRequestModel.status == RequestStatus.RUNNING.value,
                                  RunRequestModel.heartbeat_at < stale_before)
                           .order_by(RunRequestModel.id)
                           .with_for_update(skip_locked=True)).all()
    reaped: list[ReapedRequest] = []
    for row in rows:
        silent_since = row.heartbeat_at or row.claimed_at or now
        reason = (f"worker {row.worker_id} stopped heartbeating (last at "
                  f"{silent_since:%Y-%m-%d %H:%M:%S} UTC) during request {row.id}")
        worker_id, run_id = row.worker_id, row.run_id
        requeued = _requeue_or_fail(session, row, reason, now, max_attempts)
        if requeued is None:
            continue
        run_status = _close_cut_short_run(session, run_id, reason, silent_since)
        reaped.append(ReapedRequest(row.id, worker_id, run_id, run_status, requeued))
    return reaped


def _close_cut_short_run(session: Session, run_id: int | None, reason: str,
                         ended_at: datetime) -> RunStatus | None:
    """Mark a run left ``running`` by a dead worker: its saved workloads are kept."""
    if run_id is None:
        return None
    status = session.scalar(select(RunModel.status).where(RunModel.id == run_id))
    if status != RunStatus.RUNNING.value:
        return None if status is None else RunStatus(status)
    measured = session.scalar(select(func.count()).select_from(WorkloadResultModel)
                              .where(WorkloadResultModel.run_id == run_id,
                                     WorkloadResultModel.completed > 0)) or 0
    new_status = RunStatus.PARTIAL if measured else RunStatus.FAILED
    finish_run(session, run_id, new_status, ended_at,
               f"{reason}; kept {measured} measured workload{'s' if measured != 1 else ''}")
    return new_status


# --- listing -------------------------------------------------------------------------------


def count_open_requests(session: Session, labels: Mapping[str, str]) -> int:
    """Queued or running requests this worker's labels allow (what it may still have to do)."""
    open_statuses = (RequestStatus.QUEUED.value, RequestStatus.RUNNING.value)
    rows = session.scalars(select(RunRequestModel.labels)
                           .where(RunRequestModel.status.in_(open_statuses))).all()
    return sum(1 for required in rows if labels_match(required, labels))


def fetch_requests(session: Session, statuses: Sequence[RequestStatus] | None = None,
                   limit: int = 100) -> list[RunRequest]:
    """Requests, oldest first, of all statuses when ``statuses`` is None."""
    query = select(RunRequestModel).order_by(RunRequestModel.id)
    if statuses is not None:
        query = query.where(RunRequestModel.status.in_([s.value for s in statuses]))
    return [_request(row) for row in session.scalars(query.limit(limit)).all()]


def fetch_request(session: Session, request_id: int) -> RunRequest | None:
    """One request by its id, whatever its status, or None when there is none."""
    row = session.get(RunRequestModel, request_id)
    return None if row is None else _request(row)


def fetch_job_request(session: Session, job_key: str) -> RunRequest | None:
    """The first request queued under this job key (a bisection's), or None."""
    row = session.scalars(select(RunRequestModel).where(RunRequestModel.job_key == job_key)
                          .order_by(RunRequestModel.id).limit(1)).first()
    return None if row is None else _request(row)


def _request(row: RunRequestModel) -> RunRequest:
    return RunRequest(
        id=row.id, schedule_name=row.schedule_name, slot_at=row.slot_at, position=row.position,
        config_name=row.config_name, config_path=row.config_path, config_body=row.config_body,
        suite_name=row.suite_name, suite_path=row.suite_path, suite_body=row.suite_body,
        labels=dict(row.labels), status=RequestStatus(row.status), attempts=row.attempts,
        worker_id=row.worker_id, gpus=row.gpus, enqueued_at=row.enqueued_at,
        claimed_at=row.claimed_at, heartbeat_at=row.heartbeat_at, finished_at=row.finished_at,
        run_id=row.run_id, error=row.error, kind=RequestKind(row.kind), job=row.job,
        job_key=row.job_key, bisection_id=row.bisection_id)
