"""The run queue seen from the scheduler and the workers: enqueue a slot, heartbeat, reap.

A slot enqueues one request per config x suite x repeat, each with the canonical config and suite
as they were when the slot fired (the suite with the items of its quality set), so a worker on
another host needs none of the files and runs exactly what ``tracker run`` of the same files
runs: the same suite version, quality set included. A (schedule, slot, position) is stored once:
a slot fired twice still runs once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from tracker.errors import ConfigError, StoreLockedError, TrackerError
from tracker.inputs.configs import LoadedConfig, ServingConfig, build_loaded_config, load_config
from tracker.inputs.suites import LoadedSuite, Suite, build_loaded_suite, load_suite
from tracker.quality.set_files import load_quality_set
from tracker.quality.sets import QualityItem, QualitySet, compute_set_version
from tracker.scheduling.schedules import build_trigger, compute_slot
from tracker.store.db import retry_when_locked
from tracker.store.run_queue import (
    NewRequest,
    ReapedRequest,
    RunRequest,
    enqueue_requests,
    heartbeat_request,
    reap_stale_requests,
)
from tracker.store.schedule_rows import ScheduleRow, fetch_schedule, mark_schedule_fired

log = logging.getLogger(__name__)
T = TypeVar("T")

QUALITY_SET_KEY = "_quality_set"  # in a request's suite body: not a suite key, the set's items


def utc_now() -> datetime:
    return datetime.now(UTC)


def build_requests(schedule: ScheduleRow) -> list[NewRequest]:
    """One request per config x suite x repeat, in that order (raises ConfigError)."""
    configs = [load_config(path) for path in schedule.configs]
    suites = [load_suite(path) for path in schedule.suites]
    requests: list[NewRequest] = []
    for config in configs:
        for suite in suites:
            for _ in range(schedule.repeats):
                requests.append(NewRequest(
                    position=len(requests), config_name=config.config.name,
                    config_path=config.path, config_body=dict(config.canonical),
                    suite_name=suite.suite.name, suite_path=suite.path,
                    suite_body=compute_suite_body(suite), labels=dict(schedule.labels)))
    return requests


def enqueue_schedule(engine: Engine, name: str, *, slot: bool, now: datetime | None = None
                     ) -> list[int]:
    """Queue the requests of schedule ``name``: for the slot due at ``now`` (``slot=True``, what
    the scheduler does), or as a one-off (``run-now``). Returns the ids queued."""
    now = now or utc_now()
    with Session(engine) as session:
        schedule = fetch_schedule(session, name)
    if schedule is None:
        raise ConfigError(f"schedule {name!r} not found; list them with `tracker schedule list`")
    slot_at = compute_slot(build_trigger(schedule.cron, schedule.timezone), now) if slot else None
    try:
        requests = build_requests(schedule)
    except TrackerError as exc:
        with Session(engine) as session, session.begin():
            mark_schedule_fired(session, name, now, str(exc))
        raise

    def enqueue() -> list[int]:
        with Session(engine) as session, session.begin():
            ids = enqueue_requests(session, name, slot_at, requests, now)
            mark_schedule_fired(session, name, now, None)
        return ids

    return retry_when_locked(enqueue)


def compute_suite_body(suite: LoadedSuite) -> dict[str, Any]:
    """What a request stores of its suite: the canonical form, and the quality set's items
    under ``QUALITY_SET_KEY`` (the set is part of the suite's version)."""
    body = dict(suite.canonical)
    if suite.quality is not None:
        quality = suite.quality
        body[QUALITY_SET_KEY] = {
            "name": quality.name, "path": quality.path, "version": quality.version,
            "items": [item.model_dump(mode="json", exclude_defaults=True)
                      for item in quality.items]}
    return body


def load_request_inputs(request: RunRequest) -> tuple[LoadedConfig, LoadedSuite]:
    """The config and suite a request was queued with (its stored canonical forms)."""
    config = build_loaded_config(ServingConfig.model_validate(request.config_body),
                                 request.config_path)
    body = dict(request.suite_body)
    stored_set = body.pop(QUALITY_SET_KEY, None)
    suite = Suite.model_validate(body)
    if suite.quality is None:
        quality = None
    elif stored_set is None:  # queued by a tracker that did not store the set: read it here
        quality = load_quality_set(Path(request.suite_path).parent / suite.quality.path)
    else:
        quality = _stored_quality_set(request, stored_set)
    return config, build_loaded_suite(suite, request.suite_path, quality)


def _stored_quality_set(request: RunRequest, stored: Any) -> QualitySet:
    where = f"request {request.id} ({request.suite_name})"
    try:
        items = tuple(QualityItem.model_validate(item) for item in stored["items"])
        name, path, version = str(stored["name"]), str(stored["path"]), str(stored["version"])
    except (KeyError, TypeError, ValidationError) as exc:
        raise ConfigError(f"{where}: the stored quality set is unreadable "
                          f"({type(exc).__name__}); queue the suite again") from None
    if compute_set_version(items) != version:
        raise ConfigError(f"{where}: the stored quality set {name} does not match its version "
                          f"{version[:12]} (changed in the database since it was queued); "
                          "queue the suite again")
    return QualitySet(name, version, path, items)


def reap_stale(engine: Engine, stale_after_s: float, now: datetime | None = None
               ) -> list[ReapedRequest]:
    """Requeue (once) the requests whose worker has been silent for ``stale_after_s``."""
    now = now or utc_now()

    def reap() -> list[ReapedRequest]:
        with Session(engine) as session, session.begin():
            return reap_stale_requests(session, now - timedelta(seconds=stale_after_s), now)

    reaped = retry_when_locked(reap)
    for item in reaped:
        log.warning("request %d: worker %s stopped heartbeating; run %s marked %s; request %s",
                    item.request_id, item.worker_id, item.run_id,
                    item.run_status.value if item.run_status else "-",
                    "requeued" if item.requeued else "failed (no attempts left)")
    return reaped


class Heartbeat:
    """A daemon thread that stamps ``heartbeat_at`` every ``interval_s`` while a request runs.

    ``lost`` is set when the request stopped being this worker's (it was reaped meanwhile).
    """

    def __init__(self, engine: Engine, request_id: int, worker_id: str, interval_s: float,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.engine = engine
        self.request_id = request_id
        self.worker_id = worker_id
        self.interval_s = interval_s
        self.clock = clock
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{request_id}",
                                        daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                with Session(self.engine) as session, session.begin():
                    alive = heartbeat_request(session, self.request_id, self.worker_id,
                                              self.clock())
            except (SQLAlchemyError, StoreLockedError) as exc:  # a missed beat is not fatal
                log.warning("request %d: heartbeat failed: %s", self.request_id,
                            " ".join(str(exc).split())[:200])
                continue
            if not alive:
                log.error("request %d is no longer held by %s (taken for dead and requeued)",
                          self.request_id, self.worker_id)
                self.lost.set()
                return
