"""One plan shared out over worker processes or load hosts, and their outcomes merged (no I/O).

The plan (``LoadPlan`` or ``SessionPlan``) is built once. Each worker gets all of it and its
share (``WorkerShare``, from ``compute_shares``):

- Closed loop: the concurrency is split (5 over 2 workers: 3 and 2). Request ``i`` goes to the
  worker holding slot ``i % concurrency``, so each worker's share of requests follows its share
  of the concurrency (with a duration, each keeps starting its own indices until the end).
- Open loop (and a trace): arrival ``i`` goes to worker ``i % workers``, at its planned time,
  so the one seeded Poisson/gamma process (or the trace) is what leaves the machine. A
  ``max_concurrency`` cap is split like a concurrency (each worker caps its own share).
- Sessions: conversations are dealt the same way (by slot closed-loop, round-robin open-loop).
  A conversation stays on one worker, and its records keep their plan-order indices.

``merge_outcomes`` sorts the workers' records by index and recomputes the duration and the
client-health verdict from every worker's raw figures (loop lags and send lags pooled, the
busiest worker's CPU share), so the summary and the client-health check are those of a
single-process run. The processes themselves: ``tracker.load.workers``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from tracker.load.client_health import compute_client_health
from tracker.load.generator import Endpoint, LoadOutcome, LoadPlan, compute_planned_rate
from tracker.load.sessions import SessionPlan
from tracker.results import RequestRecord, WorkloadResult

Plan = LoadPlan | SessionPlan


@dataclass(frozen=True, slots=True)
class WorkerShare:
    number: int  # 0-based
    workers: int  # how many share the plan
    first_slot: int  # closed loop: the worker holds slots first_slot .. first_slot + concurrency
    concurrency: int  # its part of the plan's concurrency (closed loop) or cap (open loop)
    total_concurrency: int
    cpu: int | None  # the CPU it is pinned to (None: not pinned)

    def holds(self, index: int, open_loop: bool) -> bool:
        """Whether request (or conversation) ``index`` of the plan is this worker's."""
        if open_loop:
            return index % self.workers == self.number
        slot = index % self.total_concurrency
        return self.first_slot <= slot < self.first_slot + self.concurrency

    def indices(self, count: int | None, open_loop: bool) -> Iterator[int]:
        """This worker's indices among ``count`` (None: without end, for a duration)."""
        every = itertools.count() if count is None else iter(range(count))
        return (i for i in every if self.holds(i, open_loop))


def compute_shares(concurrency: int, workers: int,
                   cpus: Sequence[int] | None = None) -> tuple[WorkerShare, ...]:
    """The plan's ``concurrency`` split over ``workers`` (never more workers than concurrency),
    each pinned to one of ``cpus`` in turn (None: not pinned)."""
    count = max(1, min(workers, concurrency))
    base, extra = divmod(concurrency, count)
    shares, first = [], 0
    for number in range(count):
        part = base + (1 if number < extra else 0)
        cpu = cpus[number % len(cpus)] if cpus else None
        shares.append(WorkerShare(number, count, first, part, concurrency, cpu))
        first += part
    return tuple(shares)


@dataclass(frozen=True, slots=True)
class WorkerJob:
    endpoint: Endpoint
    plan: Plan  # the whole plan, its concurrency replaced by the share's
    share: WorkerShare


def build_job(endpoint: Endpoint, plan: Plan, share: WorkerShare) -> WorkerJob:
    """The whole plan for one worker, with its share of the concurrency."""
    if isinstance(plan, SessionPlan):
        return WorkerJob(endpoint, replace(plan, load=replace(plan.load,
                                                              concurrency=share.concurrency)),
                         share)
    return WorkerJob(endpoint, replace(plan, concurrency=share.concurrency), share)


@dataclass(frozen=True, slots=True)
class WorkerOutcome:
    """What one worker measured, raw, for the coordinator to merge."""

    records: tuple[RequestRecord, ...]
    complete: bool
    cpu_fraction: float | None
    loop_lags_s: tuple[float, ...]
    send_lags_s: tuple[float, ...]
    connections_opened: int


def merge_outcomes(outcomes: Sequence[WorkerOutcome], plan: Plan, *, t0: float, now: float,
                   started_at: datetime, ended_at: datetime, complete: bool,
                   cores: int | None = None) -> LoadOutcome:
    """One outcome from the workers' (records by index, with duration and client health as one
    generator computes them, from every worker's figures). ``now`` is the clock's reading at the
    end, and ``cores`` the CPUs the workers could use (for the client-bound remedy)."""
    records = tuple(sorted((r for o in outcomes for r in o.records), key=lambda r: r.index))
    ends = [r.start_s + r.e2el_s for r in records if r.e2el_s is not None]
    duration = max(ends, default=now - t0) if complete else now - t0
    load = plan.load if isinstance(plan, SessionPlan) else plan
    cpus = [o.cpu_fraction for o in outcomes if o.cpu_fraction is not None]
    client = compute_client_health(
        cpu_fraction=max(cpus, default=None),
        loop_lags_s=[lag for o in outcomes for lag in o.loop_lags_s],
        send_lags_s=[lag for o in outcomes for lag in o.send_lags_s],
        open_loop=load.open_loop, planned_rate_per_s=compute_planned_rate(load.arrivals_s),
        connections_opened=sum(o.connections_opened for o in outcomes),
        workers=len(outcomes), cores=cores, succeeded=sum(1 for r in records if r.ok))
    return LoadOutcome(records, started_at, ended_at, max(duration, 0.0),
                       complete and all(o.complete for o in outcomes), client)


def with_workers(result: WorkloadResult, workers: int) -> WorkloadResult:
    """The result with the processes that sent its load in ``params["load"]["workers"]`` (one
    process, today's generator, leaves the result as it was)."""
    if workers < 2:
        return result
    load = {**(result.params.get("load") or {}), "workers": workers}
    return replace(result, params={**result.params, "load": load})


def result_workers(result: WorkloadResult) -> int:
    """The processes that sent a result's load (1 where it does not say)."""
    return int((result.params.get("load") or {}).get("workers", 1))
