"""Load generation past one core: one plan sent by several worker processes, merged into one.

A worker is a process (the ``forkserver`` start method) with its own event loop, keep-alive pool,
client-health probe and garbage-collection pause, pinned to one of the CPUs the coordinator may
use. It runs the single-process generator (``LoadGenerator``, ``SessionGenerator``) restricted to
its share of the plan (``tracker.load.worker_shares``). The coordinator (``WorkerPool``, the interface
of ``LoadGenerator``) starts the workers, waits until every one has warmed its pool and run its
share of the warm-up, and picks the measured phase's origin ``t0``: ``time.perf_counter`` is
``clock_gettime(CLOCK_MONOTONIC)`` on Linux, one clock for every process on the host, so every
worker's stamps count from that one origin. Their raw outcomes come back over pipes and are
merged (``merge_outcomes``). One worker is today's single-process generator: the pool is only
used for two or more. ``run_host_share`` is a load host's side of docs/multihost.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from tracker.errors import MeasurementError, TrackerError
from tracker.eventloop import run_async
from tracker.http_client.client import WireClient
from tracker.load.bodies import SessionRequests
from tracker.load.client_health import count_usable_cpus
from tracker.load.generator import (
    Clock,
    Endpoint,
    LoadGenerator,
    LoadOutcome,
    LoadPlan,
    ProgressCallback,
    ScheduledJob,
    WarmedCallback,
)
from tracker.load.sessions import SessionGenerator, SessionPlan
from tracker.load.worker_shares import (
    Plan,
    WorkerJob,
    WorkerOutcome,
    WorkerShare,
    build_job,
    compute_shares,
    merge_outcomes,
)
from tracker.redaction import register_secrets_in
from tracker.results import RequestRecord

START_METHOD = "forkserver"  # fork-safe (the coordinator may hold threads), cheap after the first
START_MARGIN_S = 0.5  # t0 this far after the last worker is ready: every one is waiting by then,
# even on a loaded host that takes a moment to schedule a woken process (0.05 s was seen late)
PROGRESS_EVERY_S = 0.25  # a worker reports its finished requests at most this often
STOP_TIMEOUT_S = 10.0  # a stopped worker's partial records are awaited this long
Connection = multiprocessing.connection.Connection


# --- inside a worker process ------------------------------------------------------------------


class _Link:
    """A worker's two pipes: ``up`` to the coordinator, ``down`` from it."""

    def __init__(self, up: Connection, down: Connection, clock: Clock) -> None:
        self.up, self.down, self.clock = up, down, clock
        self._last_progress = 0.0

    async def wait_for_start(self) -> float:
        self.up.send(("ready",))
        message = self.down.recv()  # blocking on purpose: nothing is being timed yet
        if message[0] != "start":
            raise asyncio.CancelledError
        t0 = float(message[1])
        while (delay := t0 - self.clock()) > 0:
            await asyncio.sleep(delay)
        self._listen_for_stop(asyncio.current_task())
        return t0

    def progress(self, done: int, total: int) -> None:
        now = self.clock()
        if done >= total or now - self._last_progress >= PROGRESS_EVERY_S:
            self._last_progress = now
            self.up.send(("progress", done))

    def _listen_for_stop(self, task: asyncio.Task[Any] | None) -> None:
        loop = asyncio.get_running_loop()

        def listen() -> None:
            # RuntimeError: the stop came after the run ended and its loop closed (nothing to do)
            with contextlib.suppress(EOFError, OSError, RuntimeError):
                if self.down.recv()[0] == "stop" and task is not None:
                    loop.call_soon_threadsafe(task.cancel)

        threading.Thread(target=listen, daemon=True).start()


class _FixedStart:
    """A load host's start (docs/multihost.md): ``t0`` agreed beforehand on this host's clock."""

    def __init__(self, t0: float, clock: Clock) -> None:
        self.t0, self.clock = t0, clock

    async def wait_for_start(self) -> float:
        while (delay := self.t0 - self.clock()) > 0:
            await asyncio.sleep(delay)
        return self.t0

    def progress(self, done: int, total: int) -> None:
        pass


Start = _Link | _FixedStart


class _WorkerGenerator(LoadGenerator):
    """The single-process generator restricted to one worker's share, started at the pool's t0."""

    def __init__(self, endpoint: Endpoint, plan: LoadPlan, share: WorkerShare,
                 link: Start) -> None:
        super().__init__(endpoint, plan, on_progress=link.progress)
        self.share, self.link = share, link

    async def _wait_for_start(self) -> float:
        return await self.link.wait_for_start()

    def _closed_indices(self, count: int, duration_s: float | None) -> Iterator[int]:
        return self.share.indices(None if duration_s is not None else count, open_loop=False)

    async def _schedule(self, arrivals: Sequence[float], job: ScheduledJob) -> None:
        await _schedule_share(self, arrivals, job, super()._schedule)


class _WorkerSessionGenerator(SessionGenerator):
    """The session generator restricted to one worker's conversations."""

    def __init__(self, endpoint: Endpoint, plan: SessionPlan, share: WorkerShare,
                 link: Start) -> None:
        super().__init__(endpoint, plan, on_progress=link.progress)
        self.share, self.link = share, link

    async def _wait_for_start(self) -> float:
        return await self.link.wait_for_start()

    async def _schedule(self, arrivals: Sequence[float], job: ScheduledJob) -> None:
        await _schedule_share(self, arrivals, job, super()._schedule)

    async def _run_sessions(self, client: WireClient, sessions: Sequence[SessionRequests], *,
                            keep: bool) -> None:
        if not sessions:
            return
        starts = [0, *itertools.accumulate(s.turns for s in sessions)]
        queue = self.share.indices(len(sessions), open_loop=False)

        async def worker() -> None:
            for number in queue:
                await self._run_session(client, number, sessions[number], starts[number],
                                        keep=keep)

        await asyncio.gather(*(worker() for _ in range(self.share.concurrency)))


async def _schedule_share(generator: _WorkerGenerator | _WorkerSessionGenerator,
                          arrivals: Sequence[float], job: ScheduledJob,
                          schedule: Callable[[Sequence[float], ScheduledJob], Any]) -> None:
    """The generator's open-loop schedule over this worker's arrivals, under their plan indices."""
    mine = list(generator.share.indices(len(arrivals), open_loop=True))

    async def as_planned(local: int, planned: float, ready: float) -> None:
        await job(mine[local], planned, ready)

    await schedule([arrivals[i] for i in mine], as_planned)


def _pin(cpu: int | None) -> None:
    """A worker on ``cpu``, or, when not given one, on its coordinator's CPUs: the forkserver it
    comes from may have started before a launched server took some (``target.launch.cpus``)."""
    with contextlib.suppress(AttributeError, OSError, ValueError):  # not allowed here: unpinned
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        elif (coordinator := multiprocessing.parent_process()) is not None and coordinator.pid:
            os.sched_setaffinity(0, os.sched_getaffinity(coordinator.pid))


async def _run_job(job: WorkerJob, link: Start) -> WorkerOutcome:
    register_secrets_in(job.endpoint.headers)  # a new process: the key it sends is hidden here too
    generator: LoadGenerator
    if isinstance(job.plan, SessionPlan):
        generator = _WorkerSessionGenerator(job.endpoint, job.plan, job.share, link)
    else:
        generator = _WorkerGenerator(job.endpoint, job.plan, job.share, link)
    try:
        await generator.run()
        complete = True
    except asyncio.CancelledError:
        complete = False
    probe = generator.probe  # stopped by run(), even when cancelled
    summary = probe.summary(open_loop=False, planned_rate_per_s=None)
    return WorkerOutcome(tuple(generator.records), complete, summary.cpu_fraction,
                         tuple(probe.loop_lags_s), tuple(probe.send_lags_s),
                         generator.connections_opened)


def run_worker(job: WorkerJob, up: Connection, down: Connection) -> None:
    """A worker process's body: its share of the plan, the raw outcome sent up the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the coordinator stops workers, not Ctrl-C
    _pin(job.share.cpu)
    try:
        outcome = run_async(_run_job(job, _Link(up, down, time.perf_counter)))
    except TrackerError as exc:  # the user's to fix (a bad URL): raised again by the coordinator
        up.send(("failed", f"{type(exc).__name__}: {exc}", exc))
        return
    except Exception as exc:  # a job boundary: the coordinator reports it as a measurement error
        up.send(("failed", f"{type(exc).__name__}: {exc}", None))
        return
    up.send(("done", outcome))


def save_host_job(job: WorkerJob, path: str) -> None:
    """A load host's share to a file, without the endpoint's headers (they may hold a key: the
    host adds its own, ``run_host_share(headers=...)``)."""
    with open(path, "wb") as handle:
        pickle.dump(replace(job, endpoint=Endpoint(job.endpoint.base_url)), handle)


def run_host_share(job_path: str, t0: float, outcome_path: str,
                   headers: dict[str, str] | None = None) -> None:
    """One load host's share (``save_host_job``), started at ``t0`` on this host's monotonic
    clock, its raw outcome pickled to ``outcome_path`` for the merge. docs/multihost.md says what
    a host runs, and tests/load/test_workers.py runs two in network namespaces."""
    with open(job_path, "rb") as handle:
        job: WorkerJob = pickle.load(handle)  # a file of the coordinator's, not outside input
    if headers:
        job = replace(job, endpoint=Endpoint(job.endpoint.base_url, headers))
    outcome = run_async(_run_job(job, _FixedStart(t0, time.perf_counter)))
    with open(outcome_path, "wb") as handle:
        pickle.dump(outcome, handle)


# --- the coordinator ---------------------------------------------------------------------------


class _Channel:
    """The coordinator's end of one worker: its process, its pipes, and a thread that moves
    every message it sends onto the event loop (a queue), so the loop never blocks on a pipe."""

    def __init__(self, number: int, process: Any, up: Connection, down: Connection) -> None:
        self.number, self.process, self.up, self.down = number, process, up, down
        self.messages: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()

    def start_reading(self) -> None:
        threading.Thread(target=self._pump, name=f"load-worker-{self.number}-pipe",
                         daemon=True).start()

    def send(self, *message: Any) -> None:
        with contextlib.suppress(OSError, ValueError):  # the worker is gone: nothing to tell
            self.down.send(message)

    async def until(self, kind: str, on_progress: Callable[[int, int], None]) -> Any:
        """The payload of the worker's next ``kind`` message (progress passed on meanwhile)."""
        while True:
            message = await self.messages.get()
            if message[0] == "lost":
                code = await asyncio.to_thread(self._exit_code)
                raise MeasurementError(
                    f"load worker {self.number} ended without a result (exit code {code}); run "
                    "with --workers 1 to see the error in this process")
            if message[0] == "failed" and isinstance(message[2], TrackerError):
                raise message[2]
            if message[0] == "failed":
                raise MeasurementError(f"load worker {self.number} failed: {message[1]}")
            if message[0] == "progress":
                on_progress(self.number, int(message[1]))
            if message[0] == kind:
                return message[1] if len(message) > 1 else None

    def _pump(self) -> None:
        while True:
            try:
                message = self.up.recv()
            except (EOFError, OSError):
                message = ("lost",)
            try:
                self._loop.call_soon_threadsafe(self.messages.put_nowait, message)
            except RuntimeError:  # the coordinator's loop is closed: nobody is listening
                return
            if message[0] in ("done", "failed", "lost"):
                return

    def _exit_code(self) -> int | None:
        self.process.join(timeout=2)
        return self.process.exitcode  # type: ignore[no-any-return]


class WorkerPool:
    """Runs one plan on ``workers`` processes, with the interface of ``LoadGenerator`` (``run``,
    ``records`` and ``outcome`` after a cancellation)."""

    def __init__(self, endpoint: Endpoint, plan: Plan, workers: int, *,
                 clock: Clock = time.perf_counter,
                 on_progress: ProgressCallback | None = None,
                 on_warmed: WarmedCallback | None = None) -> None:
        if workers < 2:
            raise ValueError("a worker pool is for two or more workers; use LoadGenerator")
        self.endpoint, self.plan, self.clock, self.on_progress = endpoint, plan, clock, on_progress
        self.on_warmed = on_warmed  # awaited once every worker has run its warm-up share
        cpus = sorted(_usable_cpus())
        self.shares = compute_shares(plan.concurrency, workers, cpus if len(cpus) > 1 else None)
        self.t0: float | None = None
        self.started_at: datetime | None = None
        self._outcomes: dict[int, WorkerOutcome] = {}
        self._done = [0] * len(self.shares)

    @property
    def workers(self) -> int:
        return len(self.shares)

    @property
    def records(self) -> list[RequestRecord]:
        return [r for o in self._outcomes.values() for r in o.records]

    def outcome(self, *, complete: bool) -> LoadOutcome:
        now = self.clock()
        return merge_outcomes(list(self._outcomes.values()), self.plan,
                              t0=self.t0 if self.t0 is not None else now, now=now,
                              started_at=self.started_at or datetime.now(UTC),
                              ended_at=datetime.now(UTC), complete=complete,
                              cores=count_usable_cpus())

    async def run(self) -> LoadOutcome:
        channels = self._start_workers()
        try:
            await self._run(channels)
        except asyncio.CancelledError:
            await self._stop(channels)
            raise
        finally:
            for channel in channels:  # a worker still waiting (another one failed) ends
                channel.send("stop")
            await asyncio.to_thread(_reap, [c.process for c in channels])
        return self.outcome(complete=True)

    def _start_workers(self) -> list[_Channel]:
        context = multiprocessing.get_context(START_METHOD)
        if START_METHOD == "forkserver":
            context.set_forkserver_preload([__name__])
        channels = []
        for share in self.shares:
            up_r, up_w = context.Pipe(duplex=False)
            down_r, down_w = context.Pipe(duplex=False)
            process = context.Process(  # type: ignore[attr-defined]
                target=run_worker, name=f"tracker-load-worker-{share.number}", daemon=True,
                args=(build_job(self.endpoint, self.plan, share), up_w, down_r))
            process.start()
            up_w.close()  # the worker's ends: closed here, so a dead worker reads as EOF
            down_r.close()
            channel = _Channel(share.number, process, up_r, down_w)
            channel.start_reading()
            channels.append(channel)
        return channels

    async def _run(self, channels: list[_Channel]) -> None:
        await asyncio.gather(*(c.until("ready", self._progress) for c in channels))
        if self.on_warmed is not None:
            await self.on_warmed()
        self.t0 = self.clock() + START_MARGIN_S
        self.started_at = datetime.now(UTC) + timedelta(seconds=START_MARGIN_S)
        for channel in channels:
            channel.send("start", self.t0)

        async def finish(channel: _Channel) -> None:
            outcome: WorkerOutcome = await channel.until("done", self._progress)
            self._outcomes[channel.number] = outcome
            self._progress(channel.number, len(outcome.records))

        await asyncio.gather(*(finish(c) for c in channels))

    async def _stop(self, channels: list[_Channel]) -> None:
        """Cancelled: every worker stops and sends what it measured (kept for ``outcome``)."""
        for channel in channels:
            channel.send("stop")

        async def collect(channel: _Channel) -> None:
            with contextlib.suppress(MeasurementError, TimeoutError):
                outcome = await asyncio.wait_for(channel.until("done", self._progress),
                                                 STOP_TIMEOUT_S)
                self._outcomes[channel.number] = outcome

        await asyncio.gather(*(collect(c) for c in channels if c.number not in self._outcomes))

    def _progress(self, number: int, done: int) -> None:
        self._done[number] = done
        if self.on_progress is not None:
            total = sum(self._done)
            self.on_progress(total, max(self.plan.planned_requests, total))


def _usable_cpus() -> set[int]:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return set()


def _reap(processes: Sequence[Any]) -> None:
    for process in processes:
        if process.pid is None:
            continue
        process.join(timeout=STOP_TIMEOUT_S)
        if process.is_alive():
            process.terminate()
            process.join(timeout=2)
