"""A runner worker: claims queued requests its labels allow and runs them, one at a time.

Start one worker per GPU set (``tracker worker --labels gpu=h100 --gpus 0,1``): a GPU set never
runs two benchmarks at once. While a request runs, a thread heartbeats. A worker that dies is
found by the next reaper (any worker or the scheduler) once its heartbeat is older than the
timeout: its cut-short run is kept, marked partial, and the request is requeued once. SIGTERM or
SIGINT stops the current run (what was measured is kept, marked partial), gives the request back
to the queue and exits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from tracker.errors import RunInterrupted, StoreLockedError, TrackerError
from tracker.eventloop import run_async
from tracker.inputs.configs import LaunchSettings, LoadedConfig
from tracker.pipeline.execute import StoreSink, register_inputs
from tracker.results import RunResult
from tracker.runner.suite_runner import RunOutcome, SuiteRunner
from tracker.scheduling.alerts import (
    BisectionAlert,
    RegressionSource,
    WebhookSettings,
    alert_after_run,
    analysis_regressions,
    deliver_bisection_alert,
)
from tracker.scheduling.defaults import DEFAULT_HEARTBEAT_S, DEFAULT_STALE_AFTER_S
from tracker.scheduling.nightly_bisect import queue_bisections, run_bisection_request
from tracker.scheduling.queueing import Heartbeat, load_request_inputs, reap_stale, utc_now
from tracker.store.db import retry_when_locked
from tracker.store.run_queue import (
    RequestKind,
    RequestStatus,
    RunRequest,
    claim_request,
    count_open_requests,
    finish_request,
    link_bisection,
    link_run,
    release_request,
)
from tracker.store.runs import fetch_run
from tracker.targets.resolve import check_target_inputs
from tracker.targets.vllm_install import check_vllm_engine

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    labels: Mapping[str, str] = field(default_factory=dict)
    gpus: str | None = None  # CUDA_VISIBLE_DEVICES for the servers this worker launches
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    stale_after_s: float = DEFAULT_STALE_AFTER_S
    poll_s: float = 2.0
    exit_when_empty: bool = False  # stop once nothing this worker may take is queued or running
    webhook: WebhookSettings | None = None
    dashboard_url: str | None = None  # "{run_id}" is replaced by the run's id


def make_worker_id(gpus: str | None) -> str:
    base = f"{socket.gethostname()}:{os.getpid()}"
    return f"{base}[gpus={gpus}]" if gpus else base


def with_gpus(loaded: LoadedConfig, gpus: str | None) -> LoadedConfig:
    """The config with CUDA_VISIBLE_DEVICES in the launch env of a vLLM it starts.

    Only ``kind: vllm`` without ``base_url`` launches a server. Other configs are unchanged. The
    version stays the config's own: which GPUs of a host ran it is placement, not config (it is
    kept on the request).
    """
    target = loaded.config.target
    if gpus is None or target.kind != "vllm" or target.base_url is not None:
        return loaded
    launch = target.launch or LaunchSettings()
    env = {**launch.env, "CUDA_VISIBLE_DEVICES": gpus}
    new_target = target.model_copy(update={"launch": launch.model_copy(update={"env": env})})
    config = loaded.config.model_copy(update={"target": new_target})
    return LoadedConfig(config, loaded.version, loaded.canonical, loaded.path)


class RequestSink(StoreSink):
    """Stores the run like ``tracker run`` does, and links it to its request when it begins,
    so a reaper can mark the run of a worker that died."""

    def __init__(self, engine: Engine, config_version_id: int, suite_id: int, request_id: int,
                 worker_id: str) -> None:
        super().__init__(engine, config_version_id, suite_id)
        self.request_id = request_id
        self.worker_id = worker_id

    def begin(self, **kwargs: Any) -> int:
        run_id = super().begin(**kwargs)  # a locked database is retried (and reported) there

        def link() -> None:
            with Session(self.engine) as session, session.begin():
                link_run(session, self.request_id, self.worker_id, run_id)

        try:
            retry_when_locked(link)
        except StoreLockedError as exc:
            self.lock_error = exc  # asked again, begin raises this instead of a second run
            raise
        return run_id


class WorkerStopped(Exception):
    """The worker was asked to stop while a request ran."""


class Worker:
    def __init__(self, engine: Engine, settings: WorkerSettings,
                 emit: Callable[[str], None] = log.info,
                 regression_source: RegressionSource = analysis_regressions) -> None:
        self.engine = engine
        self.settings = settings
        self.emit = emit
        self.regression_source = regression_source
        self.worker_id = make_worker_id(settings.gpus)
        self.stop_event = threading.Event()
        self._active: tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None = None

    def request_stop(self, reason: str) -> None:
        """Stop after (or, when one runs, by cutting short) the current request, signal-safely."""
        if not self.stop_event.is_set():
            self.emit(f"worker {self.worker_id}: {reason}: stopping")
        self.stop_event.set()
        active = self._active
        if active is not None:
            loop, task = active
            loop.call_soon_threadsafe(task.cancel)

    def run(self) -> int:
        """Claim and run requests until stopped, and return how many were processed."""
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.settings.labels.items())) or "none"
        self.emit(f"worker {self.worker_id}: waiting for requests (labels: {labels})")
        processed = 0
        while not self.stop_event.is_set():
            request = self._next_request()
            if request is None:
                if self.settings.exit_when_empty and self._nothing_left():
                    self.emit(f"worker {self.worker_id}: queue empty, exiting")
                    break
                self.stop_event.wait(self.settings.poll_s)
                continue
            self.process(request)
            processed += 1
        return processed

    def _next_request(self) -> RunRequest | None:
        try:
            reap_stale(self.engine, self.settings.stale_after_s)
            with Session(self.engine) as session, session.begin():
                return claim_request(session, self.worker_id, self.settings.labels,
                                     self.settings.gpus, utc_now())
        except (SQLAlchemyError, StoreLockedError) as exc:  # the database blinked: poll again
            log.warning("worker %s: could not claim: %s", self.worker_id,
                        " ".join(str(exc).split())[:300])
            return None

    def _nothing_left(self) -> bool:
        with Session(self.engine) as session:
            return count_open_requests(session, self.settings.labels) == 0

    def process(self, request: RunRequest) -> None:
        if request.kind is RequestKind.BISECT:
            self.process_bisection(request)
            return
        self.emit(f"request {request.id}: {request.config_name} x {request.suite_name} "
                  f"(attempt {request.attempts}) on {self.worker_id}")
        sinks: list[RequestSink] = []
        with Heartbeat(self.engine, request.id, self.worker_id, self.settings.heartbeat_s):
            try:
                run = self._execute(request, sinks)
            except WorkerStopped:
                self._give_back(request, sinks)
                return
            except TrackerError as exc:
                self._finish(request, RequestStatus.FAILED, sinks, str(exc))
                return
            except Exception as exc:  # the job boundary: record it, keep the worker alive
                log.exception("request %d failed", request.id)
                self._finish(request, RequestStatus.FAILED, sinks,
                             f"internal error: {type(exc).__name__}: {exc}")
                return
        self._finish(request, RequestStatus.DONE, sinks, None)
        why = f" ({run.status_reason})" if run.status_reason else ""
        self.emit(f"request {request.id}: run {run.run_id} {run.status.value}{why}")
        alert_after_run(self.engine, run, self.settings.webhook, self.regression_source,
                        self.settings.dashboard_url)
        self._queue_bisections(request, run)

    def _queue_bisections(self, request: RunRequest, run: RunResult) -> None:
        """Queue the bisections the schedule asks for after this run, never failing the run."""
        try:
            queued = queue_bisections(self.engine, request, run)
        except Exception:  # the job boundary: log it, keep the run
            log.exception("request %d: bisections could not be queued", request.id)
            return
        for request_id in queued:
            self.emit(f"request {request.id}: queued bisection request {request_id} of "
                      f"{run.config.name} x {run.suite.name} (a confirmed regression at a "
                      "config change of several fields)")

    def process_bisection(self, request: RunRequest) -> None:
        """Run a ``bisect`` request. A stop while probing gives it back (its probes stored)."""
        self.emit(f"request {request.id}: bisection of {request.config_name} x "
                  f"{request.suite_name} (attempt {request.attempts}) on {self.worker_id}")
        with Heartbeat(self.engine, request.id, self.worker_id, self.settings.heartbeat_s):
            try:
                done = run_bisection_request(
                    self.engine, request, lambda loaded: with_gpus(loaded, self.settings.gpus),
                    self.stop_event.is_set)
            except (RunInterrupted, KeyboardInterrupt):  # a signal in a run, or stop asked
                self.request_stop("interrupted during a bisection")
                self._give_back(request, [])
                return
            except TrackerError as exc:
                self._finish(request, RequestStatus.FAILED, [], str(exc))
                return
            except Exception as exc:  # the job boundary: record it, keep the worker alive
                log.exception("request %d failed", request.id)
                self._finish(request, RequestStatus.FAILED, [],
                             f"internal error: {type(exc).__name__}: {exc}")
                return
        self._link_bisection(request, done.bisection_id)
        status = RequestStatus.DONE if done.error is None else RequestStatus.FAILED
        self._finish(request, status, [], done.error)
        self.emit(f"request {request.id}: bisection {done.bisection_id} {done.summary}")
        job = request.job or {}
        deliver_bisection_alert(self.engine, BisectionAlert(
            job.get("after_run_id"), done.bisection_id, request.config_name, request.suite_name,
            str(job.get("base_version")), str(job.get("head_version")), done.outcome,
            done.summary, done.row), self.settings.webhook)

    def _link_bisection(self, request: RunRequest, bisection_id: int) -> None:
        def link() -> None:
            with Session(self.engine) as session, session.begin():
                link_bisection(session, request.id, bisection_id)

        retry_when_locked(link)

    def _execute(self, request: RunRequest, sinks: list[RequestSink]) -> RunResult:
        config, suite = load_request_inputs(request)
        config = with_gpus(config, self.settings.gpus)
        check_target_inputs(config)  # a missing key or variable fails here, before a run is recorded
        check_vllm_engine(config)  # so does a flag or value the vLLM that will run it refuses
        config_version_id, suite_id = register_inputs(self.engine, config, suite)
        sink = RequestSink(self.engine, config_version_id, suite_id, request.id, self.worker_id)
        sinks.append(sink)
        try:
            outcome = self._run_cancellable(SuiteRunner(config, suite, sink, quality_reuse=sink))
        finally:
            sink.stop_lease()  # however the run ended, this worker no longer vouches for it
        with Session(self.engine) as session:
            return fetch_run(session, outcome.run_id)

    def _run_cancellable(self, runner: SuiteRunner) -> RunOutcome:
        async def guarded() -> RunOutcome:
            task = asyncio.current_task()
            assert task is not None
            self._active = (asyncio.get_running_loop(), task)
            try:
                if self.stop_event.is_set():
                    raise asyncio.CancelledError
                return await runner.run()
            finally:
                self._active = None

        try:
            return run_async(guarded())
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise WorkerStopped from None

    def _run_id(self, sinks: list[RequestSink]) -> int | None:
        return sinks[0].run_id if sinks else None

    def _finish(self, request: RunRequest, status: RequestStatus, sinks: list[RequestSink],
                error: str | None) -> None:
        def finish() -> bool:
            with Session(self.engine) as session, session.begin():
                return finish_request(session, request.id, self.worker_id, status,
                                      self._run_id(sinks), error, utc_now())

        mine = retry_when_locked(finish)
        if not mine:
            self.emit(f"request {request.id}: was taken from this worker meanwhile (no heartbeat "
                      f"for {self.settings.stale_after_s:g} s); its result is kept as run "
                      f"{self._run_id(sinks)}")
        elif error is not None:
            self.emit(f"request {request.id}: failed: {error}")

    def _give_back(self, request: RunRequest, sinks: list[RequestSink]) -> None:
        run_id = self._run_id(sinks)
        reason = f"worker {self.worker_id} was stopped during the run"
        if run_id is not None:
            reason += f" (run {run_id} kept as partial)"
        def release() -> bool | None:
            with Session(self.engine) as session, session.begin():
                return release_request(session, request.id, self.worker_id, reason, utc_now())

        requeued = retry_when_locked(release)
        state = {True: "requeued", False: "marked failed (no attempts left)", None: "not ours"}
        self.emit(f"request {request.id}: {state[requeued]}")
