"""Is the client the bottleneck? CPU use, event-loop lag and send lag, and the verdict.

A load generator that cannot keep up measures itself: requests leave late, chunks are stamped
late, and the numbers look like a slow server. ``HealthProbe`` watches the client during the
measured phase. ``compute_client_health`` (pure) decides whether the workload was client-bound
and says why, so the result is stored as such. Its lag is then the run's timing-error bound
(``tracker.analysis.timing``): the comparison keeps the run and judges with the bound.

Two causes, two remedies (``compute_bound_kind``):

- **overloaded**: the client's loop thread was busy most of the wall time (CPU share at least
  ``OVERLOADED_CPU_FRACTION``). More worker processes (``tracker.load.workers``) carry the load,
  and the verdict says how many, from the busiest loop thread's CPU share.
- **starved**: the loop lagged while its thread used little CPU: something else on the host (the
  engine's CPU threads, which busy-poll, or other jobs) held the cores when the client needed
  one. More workers cannot help a client that is not given a core, but pinning the server and
  the client to separate cores does.

A dead server is neither: when no request succeeded, nothing the client stamped is a
measurement of the server, and the run's failures say why.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import time
from collections.abc import Callable, Sequence
from enum import StrEnum

import numpy as np
import numpy.ma  # np.percentile imports it on first use (13 ms of CPU): here, not in a run

from tracker.results import ClientHealth

LOOP_TICK_S = 0.010  # the watchdog timer's period
LOOP_LAG_LIMIT_S = 0.020  # p99 lag above this: the event loop was too busy to stamp on time
SEND_LAG_LIMIT_S = 0.010  # p99 send lag above this: requests did not leave when planned
CPU_LIMIT_FRACTION = 0.95  # the loop thread was busy this share of the wall time or more
WORKER_CPU_TARGET = 0.7  # busy share of a worker's loop thread that leaves headroom for stamps
GC_YOUNG_LIMIT = 1_000_000  # while collection is paused: collect once this many objects are new
GC_CHECK_S = 1.0
# the loop thread busy at least this share of the wall time: its own work made it late
# (overloaded); below it, a lagging loop was kept off the CPU by others (starved)
OVERLOADED_CPU_FRACTION = 0.5
PIN_EXAMPLE = ("a launched server: target.launch.cpus: [0] in the config, and the tracker keeps off "
               "CPU 0; an attached one: taskset -c 0 vllm serve … (with VLLM_CPU_OMP_THREADS_BIND=0 "
               "on a CPU build), and taskset -c 1 tracker run …")


class BoundKind(StrEnum):
    OVERLOADED = "overloaded"  # the client's own work: more workers help
    STARVED = "starved"  # the host's other processes took the cores: pin apart


def compute_bound_kind(health: ClientHealth) -> BoundKind | None:
    """Why a client-bound run was late: its own work, or other processes (None when it was not
    client-bound). A CPU share not measured counts as overloaded (the remedy that was given
    before the share was known)."""
    if not health.client_bound:
        return None
    cpu = health.cpu_fraction
    if cpu is not None and cpu < OVERLOADED_CPU_FRACTION:
        return BoundKind.STARVED
    return BoundKind.OVERLOADED


def count_usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity masks on this OS
        return os.cpu_count() or 1


def _percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _ms(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def compute_workers_needed(cpu_fraction: float | None, workers: int) -> int:
    """Worker processes that would have carried a client-bound load: the busiest loop thread's
    share spread until none is busier than ``WORKER_CPU_TARGET``, and at least one more than were
    used (a saturated thread hides how much more it wanted, so this is a lower bound)."""
    if cpu_fraction is None:
        return workers + 1
    return max(workers + 1, math.ceil(workers * cpu_fraction / WORKER_CPU_TARGET - 1e-9))


def _remedy(workers: int, cpu_fraction: float | None, cores: int | None) -> str:
    if cpu_fraction is not None and cpu_fraction < OVERLOADED_CPU_FRACTION:
        return (f"; starved, not overloaded: its event-loop thread used only {cpu_fraction:.0%} "
                "of the wall time, so other processes on this host (an engine's CPU threads, "
                "other jobs) held the cores when it needed one, and more workers would not "
                f"help: pin the server and the client to separate cores ({PIN_EXAMPLE}), or "
                "measure on a quieter host")
    needed = compute_workers_needed(cpu_fraction, workers)
    used = f"{workers} worker processes were used" if workers > 1 else "one process was used"
    text = (f"; {used}: at least {needed} would have been needed (tracker bench --workers "
            f"{needed}, or workers: {needed} in the suite)")
    if cores is not None and needed > cores:
        cpus = f"{cores} CPU" + ("s" if cores != 1 else "")
        return text + (f", more than the {cpus} this client may use: lower the load, or "
                       "use a bigger client machine or several")
    return text + "; or lower the load"


def compute_client_health(*, cpu_fraction: float | None, loop_lags_s: Sequence[float],
                          send_lags_s: Sequence[float], open_loop: bool,
                          planned_rate_per_s: float | None = None,
                          connections_opened: int = 0, workers: int = 1,
                          cores: int | None = None, succeeded: int | None = None) -> ClientHealth:
    """The verdict: client-bound when requests left late (open loop), the loop lagged, or the
    client's loop thread was saturated. ``connections_opened`` counts the connections the client
    had to open while measuring (beyond the warmed pool), which delay the requests waiting for
    them. ``workers`` is the number of worker processes that shared the load (``cpu_fraction`` is
    the busiest one's). A client-bound verdict says how many would have been needed (``cores``:
    the CPUs the client may use, when known), or, when its thread was mostly idle, that it was
    starved. ``succeeded`` counts the requests that succeeded, and 0 (a dead server) is never
    client-bound."""
    loop_p99 = _percentile(loop_lags_s, 99)
    send_p50, send_p99 = _percentile(send_lags_s, 50), _percentile(send_lags_s, 99)
    reasons: list[str] = []
    if open_loop and send_p99 is not None and send_p99 > SEND_LAG_LIMIT_S:
        rate = f" at {planned_rate_per_s:.4g} req/s" if planned_rate_per_s else ""
        why = (f"; {connections_opened} connections had to be opened while measuring (more "
               "requests in flight than the warmed pool: set max_concurrency)"
               if connections_opened else "")
        reasons.append(f"requests left up to {_ms(send_p99)} (p99) after their planned start"
                       f"{rate}: the client could not keep the schedule{why}")
    if loop_p99 is not None and loop_p99 > LOOP_LAG_LIMIT_S:
        reasons.append(f"the client's event loop lagged {_ms(loop_p99)} (p99), so timestamps "
                       "and sends were late")
    if cpu_fraction is not None and cpu_fraction >= CPU_LIMIT_FRACTION:
        reasons.append(f"the client's event-loop thread was busy {cpu_fraction:.0%} of the time")
    if succeeded == 0:
        reasons = []  # a dead server: the failures say why, not the client
    return ClientHealth(
        cpu_fraction=cpu_fraction,
        loop_lag_p99_s=loop_p99,
        loop_lag_max_s=max(loop_lags_s, default=None),
        send_lag_p50_s=send_p50,
        send_lag_p99_s=send_p99,
        send_lag_max_s=max(send_lags_s, default=None),
        client_bound=bool(reasons),
        reason="; ".join(reasons) + _remedy(workers, cpu_fraction, cores) if reasons else None,
    )


class HealthProbe:
    """Watches the client while the measured phase runs (start/stop inside the event loop)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.loop_lags_s: list[float] = []
        self.send_lags_s: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._cpu0: float | None = None
        self._wall0: float | None = None
        self._cpu_fraction: float | None = None

    def start(self) -> None:
        self._cpu0, self._wall0 = time.thread_time(), self.clock()
        self._task = asyncio.get_running_loop().create_task(self._watch())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._cpu0 is not None and self._wall0 is not None:
            wall = self.clock() - self._wall0
            if wall > 0:
                self._cpu_fraction = (time.thread_time() - self._cpu0) / wall

    def sent(self, stamp: dict[str, float], ready_s: float | None = None) -> None:
        """A request's stamps: lag = body written - when it could have been (default: issued)."""
        sent = stamp.get("sent")
        ready = ready_s if ready_s is not None else stamp.get("issued")
        if sent is not None and ready is not None:
            self.send_lags_s.append(max(sent - ready, 0.0))

    def summary(self, *, open_loop: bool, planned_rate_per_s: float | None,
                connections_opened: int = 0, succeeded: int | None = None) -> ClientHealth:
        cpu = self._cpu_fraction
        if cpu is None and self._cpu0 is not None and self._wall0 is not None:
            wall = self.clock() - self._wall0  # still running (a cut-short workload)
            cpu = (time.thread_time() - self._cpu0) / wall if wall > 0 else None
        return compute_client_health(cpu_fraction=cpu, loop_lags_s=self.loop_lags_s,
                                     send_lags_s=self.send_lags_s, open_loop=open_loop,
                                     planned_rate_per_s=planned_rate_per_s,
                                     connections_opened=connections_opened,
                                     cores=count_usable_cpus(), succeeded=succeeded)

    async def _watch(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                before = self.clock()
                await asyncio.sleep(LOOP_TICK_S)
                self.loop_lags_s.append(max(self.clock() - before - LOOP_TICK_S, 0.0))


class GcPause:
    """No automatic garbage collection while requests are timed, as ``timeit`` does.

    A collection stops the event loop for milliseconds (measured here: 0.8 to 2.6 ms during a
    256-stream run), and every read that arrives meanwhile is stamped late. Reference counting
    still frees what the requests leave behind (a streamed request leaves no cycles). Should
    cycles pile up anyway (``GC_YOUNG_LIMIT`` new objects), one collection runs, and the
    probe's loop lag shows it. Collection is back on when the phase ends.
    """

    def __init__(self) -> None:
        self._was_enabled = False
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = asyncio.get_running_loop().call_later(GC_CHECK_S, self._check)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._was_enabled:
            gc.enable()

    def _check(self) -> None:
        if gc.get_count()[0] > GC_YOUNG_LIMIT:
            gc.collect(0)
        self._timer = asyncio.get_running_loop().call_later(GC_CHECK_S, self._check)
