"""Wiring: load the inputs, open the store, run the suite, read the stored run back.

The runner measures and the store keeps. This module connects them and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Concatenate, ParamSpec, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

import tracker
from tracker.errors import RunInterrupted, StoreLockedError
from tracker.eventloop import run_async
from tracker.inputs.configs import LoadedConfig
from tracker.inputs.suites import LoadedSuite
from tracker.quality.sets import QualitySet
from tracker.results import (
    ORIGIN_KEY,
    QualityResult,
    RunOrigin,
    RunResult,
    RunStatus,
    WorkloadResult,
)
from tracker.runner.suite_runner import Progress, RunOutcome, SuiteRunner
from tracker.store.db import retry_when_locked
from tracker.store.leases import RunLease, take_run_lease, utc_now
from tracker.store.quality import fetch_quality, find_quality_to_reuse, save_quality
from tracker.store.runs import (
    begin_run,
    fetch_run,
    finish_run,
    save_config_version,
    save_suite,
    save_workload,
)
from tracker.targets.resolve import check_target_inputs
from tracker.targets.vllm_install import check_vllm_engine
from tracker.telemetry import TelemetrySettings

log = logging.getLogger(__name__)
LOCKED_FINAL_WAIT_S = 60.0  # how long a run's final status waits for a lock to be released

Sink = TypeVar("Sink", bound="StoreSink")
P = ParamSpec("P")
R = TypeVar("R")


def _retried_when_locked(method: Callable[Concatenate[Sink, P], R]
                         ) -> Callable[Concatenate[Sink, P], R]:
    """A write that is retried while the database is locked, up to the busy timeout. A lock
    held longer is raised, and raised again at once if the write is asked for again."""

    def write(self: Sink, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.lock_error is not None:
            raise self.lock_error
        try:
            return retry_when_locked(lambda: method(self, *args, **kwargs))
        except StoreLockedError as exc:
            self.lock_error = exc
            raise

    return write


def _kept_when_locked(method: Callable[Concatenate[Sink, P], None]
                      ) -> Callable[Concatenate[Sink, P], None]:
    """A measurement's write: when the lock outlasts the busy timeout, it is kept for
    ``finish`` to store once the lock is gone, and the run stops (StoreLockedError)."""

    def write(self: Sink, /, *args: P.args, **kwargs: P.kwargs) -> None:
        redo = functools.partial(method, self, *args, **kwargs)
        if self.lock_error is not None:
            self.pending.append(redo)
            raise self.lock_error
        try:
            retry_when_locked(redo)
        except StoreLockedError as exc:
            self.lock_error = exc
            self.pending.append(redo)
            raise

    return write


def _stored_after_lock(method: Callable[[Sink, RunStatus, str | None, datetime], None]
                       ) -> Callable[[Sink, RunStatus, str | None, datetime], None]:
    """The final status, retried until a lock is gone (``LOCKED_FINAL_WAIT_S`` at most). A run
    cut short by a lock gets its kept writes first and ends ``partial``. The lock is then
    raised, saying what was kept."""

    def write(self: Sink, status: RunStatus, reason: str | None, ended_at: datetime) -> None:
        locked = self.lock_error
        if locked is not None:
            status = RunStatus.PARTIAL
            log.warning("run %s: waiting up to %g s for the lock to store what was measured",
                        self.run_id, LOCKED_FINAL_WAIT_S)

        def store() -> None:
            while self.pending:
                self.pending[0]()
                self.pending.pop(0)
            method(self, status, reason, ended_at)

        try:
            retry_when_locked(store, wait_s=LOCKED_FINAL_WAIT_S)
        except StoreLockedError as exc:
            raise StoreLockedError(
                f"{exc}; run {self.run_id} could not be marked {status.value} (still locked "
                f"after {LOCKED_FINAL_WAIT_S:g} s more) and stays 'running' with what was "
                f"saved (see `tracker show {self.run_id}`)") from None
        if locked is not None:
            raise StoreLockedError(f"{locked}; run {self.run_id} kept as partial with what was "
                                   f"measured (see `tracker show {self.run_id}`)") from None

    return write


class StoreSink:
    """Saves each piece of a run in its own transaction, as soon as it is measured."""

    def __init__(self, engine: Engine, config_version_id: int, suite_id: int,
                 origin: RunOrigin | None = None) -> None:
        self.engine = engine
        self.config_version_id = config_version_id
        self.suite_id = suite_id
        self.origin = origin  # None: a run of the config's history
        self.run_id: int | None = None
        self.lock_error: StoreLockedError | None = None  # a write that waited out the lock
        self.pending: list[Callable[[], None]] = []  # writes to store once the lock is gone
        self.lease: RunLease | None = None  # renews the run's lease while it runs

    @_retried_when_locked
    def begin(self, *, started_at: datetime, simulated: bool,
              environment: dict[str, object]) -> int:
        with Session(self.engine) as session, session.begin():
            self.run_id = begin_run(
                session, config_version_id=self.config_version_id, suite_id=self.suite_id,
                started_at=started_at, host=socket.gethostname(),
                tracker_version=tracker.__version__, simulated=simulated,
                environment=environment if self.origin is None else
                {**environment, ORIGIN_KEY: {"kind": self.origin.value}})
            take_run_lease(session, self.run_id, os.getpid(), utc_now())
        self.lease = RunLease(self.engine, self.run_id, os.getpid()).start()
        return self.run_id

    @_kept_when_locked
    def save_workload(self, position: int, result: WorkloadResult) -> None:
        with Session(self.engine) as session, session.begin():
            save_workload(session, self._run_id(), position, result)

    @_kept_when_locked
    def save_quality(self, result: QualityResult) -> None:
        with Session(self.engine) as session, session.begin():
            save_quality(session, self._run_id(), result)  # computes the drift from a baseline

    def fetch_reusable_quality(self, quality_set: QualitySet) -> QualityResult | None:
        """Tonight's answers to these items by this config version and suite, as this run's
        (``reused_from_run_id`` names the run that asked them), or None when there are none to
        reuse."""
        with Session(self.engine) as session:
            found = find_quality_to_reuse(session, self._run_id(), quality_set.version)
            result = None if found is None else fetch_quality(session, found)
        return None if result is None else replace(result, reused_from_run_id=found)

    @_stored_after_lock
    def finish(self, status: RunStatus, reason: str | None, ended_at: datetime) -> None:
        self.stop_lease()  # a run that cannot be finished is left to a reaper
        with Session(self.engine) as session, session.begin():
            finish_run(session, self._run_id(), status, ended_at, reason)

    def stop_lease(self) -> None:
        if self.lease is not None:
            self.lease.stop()
            self.lease = None

    def _run_id(self) -> int:
        if self.run_id is None:
            raise RuntimeError("the run has not begun")
        return self.run_id


async def _run_until_signalled(runner: SuiteRunner) -> RunOutcome:
    """Run, treating SIGTERM (a scheduler or CI stopping us) like Ctrl-C: keep what was measured.
    The handler before the run is put back after it (asyncio would leave the default one, so a
    worker's stop handler would be lost after its first such run, e.g. in a bisection)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        if task is not None:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
    except (NotImplementedError, RuntimeError, ValueError):
        pass  # not the main thread, or a platform without signal handlers
    try:
        return await runner.run()
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            if loop.remove_signal_handler(signal.SIGTERM) and previous is not None:
                signal.signal(signal.SIGTERM, previous)


def register_inputs(engine: Engine, config: LoadedConfig, suite: LoadedSuite) -> tuple[int, int]:
    with Session(engine) as session, session.begin():
        return save_config_version(session, config), save_suite(session, suite)


def execute_suite(engine: Engine, config: LoadedConfig, suite: LoadedSuite,
                  progress: Progress | None = None,
                  telemetry: TelemetrySettings | None = None, *,
                  run_ordinal: int | None = None, quality_whole: bool = False,
                  origin: RunOrigin | None = None) -> RunResult:
    """Run one suite against one config and return the run as stored.

    ``run_ordinal`` is as in ``tracker.targets.resolve.open_target``. ``quality_whole`` asks the
    whole quality set, not the suite's sample, as a gate asks it. ``origin`` marks a gate's or a
    bisection's run, kept apart from the config's history."""
    check_target_inputs(config)  # a missing key or variable fails here, before a run is recorded
    check_vllm_engine(config)  # so does a flag or value the vLLM that will run it refuses
    config_version_id, suite_id = register_inputs(engine, config, suite)
    sink = StoreSink(engine, config_version_id, suite_id, origin)
    runner = SuiteRunner(config, suite, sink, progress, telemetry, run_ordinal=run_ordinal,
                         quality_reuse=sink, quality_whole=quality_whole)
    try:
        outcome = run_async(_run_until_signalled(runner))
    except (KeyboardInterrupt, asyncio.CancelledError):
        if sink.run_id is None:
            raise RunInterrupted("interrupted before the run started; nothing was recorded") from None
        raise RunInterrupted(
            f"interrupted; run {sink.run_id} kept as partial with "
            f"{len(runner.results)} of {len(suite.suite.workloads)} workloads "
            f"(see `tracker show {sink.run_id}`)") from None
    finally:
        sink.stop_lease()  # however the run ended, this process no longer vouches for it
    with Session(engine) as session:
        return fetch_run(session, outcome.run_id)
