"""A workload's load shape as phases: one per plain shape, stage, or sweep probe (no I/O).

Each phase is measured and stored as its own workload result:

- ``concurrency`` or ``request_rate``: one phase named after the workload.
- ``stages``: one phase per stage, named ``<workload>@c<N>`` (closed loop) or
  ``<workload>@<R>rps`` (open loop, with ``-b<burstiness>`` and ``-max<N>`` when set).
- ``sweep``: one probe per rate tried, named ``<workload>@<R>rps``, then a result named after the
  workload that carries ``capacity_at_slo_req_per_s`` and the summary of the best passing probe,
  so the capacity can be trended night by night under a stable name.
- A trace (traffic whose requests carry ``arrival_s``): one phase named after the workload that
  replays the trace's own times, whatever the shape says (``max_concurrency``, else
  ``concurrency``, caps the requests in flight). Scheduled latencies count from the trace's times.

A multi-turn workload's phases are sessions (``SessionPlan``): ``concurrency`` conversations in
flight, or conversations started at ``request_rate`` per second. Each phase's result is followed
by two results derived from the same records, so trends, the gate and the dashboard see them as
workloads of their own: ``<phase>/turn-1`` (every conversation's first turn) and
``<phase>/turns-2+`` (the later turns, whose prompts repeat the earlier ones: where prefix caching
shows). Their throughputs are over the whole phase's duration.

Warm-up requests (warm-up conversations, for sessions) run before the first phase only. Every
phase sends the same prompts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from tracker.inputs.prompts import derive_seed
from tracker.inputs.suites import Workload
from tracker.inputs.traffic import WorkloadTraffic
from tracker.load.bodies import ENDPOINT_PATHS, SessionRequests
from tracker.load.generator import LoadOutcome, LoadPlan, RequestSpec
from tracker.load.sessions import SessionPlan
from tracker.load.shapes import (
    Probe,
    SweepSettings,
    compute_arrivals,
    compute_arrivals_for_duration,
    compute_capacity,
    next_sweep_rate,
)
from tracker.load.slo import Slo
from tracker.load.summary import complete_cached_tokens, compute_workload_summary
from tracker.results import ClientHealth, WorkloadResult


@dataclass(frozen=True, slots=True)
class Phase:
    name: str
    concurrency: int | None  # closed loop: the workers
    request_rate: float | None  # open loop: planned requests per second (inf: all at once)
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seed: int = 0  # for the arrival schedule
    with_warmup: bool = True
    trace: bool = False  # replay the requests' own arrival_s

    @property
    def open_loop(self) -> bool:
        return self.request_rate is not None or self.trace

    def load_params(self) -> dict[str, Any]:
        if self.trace:
            return {"mode": "trace", "max_concurrency": self.max_concurrency}
        if self.request_rate is None:
            return {"mode": "closed", "concurrency": self.concurrency}
        rate = None if math.isinf(self.request_rate) else self.request_rate
        return {"mode": "open", "request_rate": rate, "burstiness": self.burstiness,
                "max_concurrency": self.max_concurrency}


def compute_slo(workload: Workload) -> Slo | None:
    slos = workload.slos
    if slos is None:
        return None
    return Slo(*(None if v is None else v / 1000.0 for v in (slos.ttft_ms, slos.tpot_ms,
                                                              slos.e2el_ms)))


def _rate_label(rate: float) -> str:
    return "inf" if math.isinf(rate) else f"{rate:.4g}rps"


def _stage_phase(workload: Workload, index: int, seed: int) -> Phase:
    assert workload.stages is not None
    stage = workload.stages[index]
    if stage.concurrency is not None:
        return Phase(f"{workload.name}@c{stage.concurrency}", stage.concurrency, None,
                     with_warmup=index == 0)
    assert stage.request_rate is not None
    label = _rate_label(stage.request_rate)
    if stage.burstiness != 1.0:
        label += f"-b{stage.burstiness:g}"
    if stage.max_concurrency is not None:
        label += f"-max{stage.max_concurrency}"
    return Phase(f"{workload.name}@{label}", None, stage.request_rate, stage.burstiness,
                 stage.max_concurrency, derive_seed(seed, workload.name, "arrivals", label),
                 with_warmup=index == 0)


def is_trace(traffic: WorkloadTraffic | None) -> bool:
    """Traffic whose requests (or sessions) have planned starts (a trace's rows, a session
    trace's sessions): replayed at those times."""
    return traffic is not None and (any(r.arrival_s is not None for r in traffic.requests)
                                    or any(s.arrival_s is not None for s in traffic.sessions))


class WorkloadPhases:
    """Hands out a workload's phases in order, and a sweep chooses its next rate from the results.

    ``traffic``, when given, can make it a trace replay (one phase at the trace's times).
    """

    def __init__(self, workload: Workload, seed: int,
                 traffic: WorkloadTraffic | None = None) -> None:
        self.workload = workload
        self.seed = seed
        self.trace = is_trace(traffic)
        self.done: list[tuple[Phase, WorkloadResult]] = []
        self.probes: list[Probe] = []

    def next_phase(self) -> Phase | None:
        w, position = self.workload, len(self.done)
        if self.trace:
            cap = w.max_concurrency or w.concurrency
            return None if position else Phase(w.name, None, None, max_concurrency=cap,
                                               trace=True)
        if w.stages is not None:
            return _stage_phase(w, position, self.seed) if position < len(w.stages) else None
        if w.sweep is not None:
            return self._next_probe()
        if position:
            return None
        if w.concurrency is not None:
            return Phase(w.name, w.concurrency, None)
        assert w.request_rate is not None
        return Phase(w.name, None, w.request_rate, w.burstiness, w.max_concurrency,
                     derive_seed(self.seed, w.name, "arrivals"))

    def _next_probe(self) -> Phase | None:
        sweep = self.workload.sweep
        assert sweep is not None
        settings = SweepSettings(sweep.start_rate, sweep.max_rate,
                                 tuple(sweep.rates) if sweep.rates else None,
                                 sweep.refine_steps, sweep.max_probes)
        rate = next_sweep_rate(settings, self.probes)
        if rate is None:
            return None
        label = _rate_label(rate)
        return Phase(f"{self.workload.name}@{label}", None, rate, sweep.burstiness,
                     sweep.max_concurrency, derive_seed(self.seed, self.workload.name, "sweep",
                                                        label),
                     with_warmup=not self.done)

    def record(self, phase: Phase, result: WorkloadResult) -> None:
        self.done.append((phase, result))
        sweep = self.workload.sweep
        if sweep is not None and phase.request_rate is not None:
            attainment = result.summary.slo_attainment
            passed = (result.complete and not result.client_bound and attainment is not None
                      and attainment >= sweep.min_attainment)
            self.probes.append(Probe(phase.request_rate, passed, result.client_bound))

    def final_results(self) -> list[WorkloadResult]:
        """The sweep's capacity result (nothing for other shapes or an interrupted sweep)."""
        if self.workload.sweep is None or not self.done:
            return []
        capacity = compute_capacity(self.probes)
        by_rate = {phase.request_rate: result for phase, result in self.done}
        base = by_rate[capacity] if capacity is not None else self.done[0][1]
        bound = [p for p in self.probes if p.client_bound]
        client = base.summary.client
        if bound:
            reason = (f"the sweep stopped at {bound[0].rate_per_s:g} req/s because the client "
                      "could not keep up there; the capacity is the client's, not the server's")
            client = replace(client or ClientHealth(None, None, None, None, None, None),
                             client_bound=True, reason=reason)
        summary = replace(base.summary, capacity_at_slo_req_per_s=capacity, client=client)
        params = dict(base.params)
        params["sweep_result"] = {
            "probes": [{"request_rate": p.rate_per_s, "passed": p.passed,
                        "client_bound": p.client_bound} for p in self.probes],
            "capacity_from": base.name if capacity is not None else None,
            "note": None if capacity is not None else "no probed rate met the SLOs",
        }
        return [replace(base, name=self.workload.name, records=(), params=params,
                        summary=summary)]


def compute_trace_arrivals(measured: list[RequestSpec]) -> tuple[float, ...]:
    """The planned starts of a trace's measured requests, from the first of them."""
    return _relative([spec.arrival_s for spec in measured], "request")


def _relative(times: list[float | None], what: str) -> tuple[float, ...]:
    known = [t for t in times if t is not None]
    if not times or len(known) != len(times):
        raise ValueError(f"a trace replay needs arrival_s on every measured {what}")
    return tuple(t - known[0] for t in known)


def build_plan(workload: Workload, phase: Phase, warmup: list[RequestSpec],
               measured: list[RequestSpec], *, duration_s: float | None = None,
               count: int | None = None) -> LoadPlan:
    """The plan of one phase. ``count`` is how many starts to plan when ``measured`` is not what
    is started (sessions: one start per conversation)."""
    path = ENDPOINT_PATHS[workload.endpoint_type]
    warm = warmup if phase.with_warmup else []
    if phase.trace:
        arrivals = compute_trace_arrivals(measured)
    elif phase.request_rate is None:
        assert phase.concurrency is not None
        return LoadPlan(path, warm, measured, phase.concurrency, workload.request_timeout_s,
                        duration_s=duration_s)
    elif duration_s is not None:
        arrivals = compute_arrivals_for_duration(phase.request_rate, phase.burstiness,
                                                 duration_s, phase.seed)
    else:
        arrivals = compute_arrivals(phase.request_rate, phase.burstiness,
                                    len(measured) if count is None else count, phase.seed)
    cap = phase.max_concurrency or max(len(arrivals), 1)
    return LoadPlan(path, warm, measured, cap, workload.request_timeout_s, arrivals_s=arrivals)


def build_session_plan(workload: Workload, phase: Phase, warmup: list[SessionRequests],
                       measured: list[SessionRequests], *, think_time_s: float) -> SessionPlan:
    """The plan of one phase of a multi-turn workload (warm-up sessions on the first only). A
    session trace's sessions start at their own times (``PlannedSession.arrival_s``)."""
    if phase.trace:
        arrivals = _relative([s.session.arrival_s for s in measured], "session")
        load = LoadPlan(ENDPOINT_PATHS[workload.endpoint_type], [], [],
                        phase.max_concurrency or len(arrivals), workload.request_timeout_s,
                        arrivals_s=arrivals)
    else:
        load = build_plan(workload, phase, [], [], count=len(measured))
    return SessionPlan(load, warmup if phase.with_warmup else [], measured, think_time_s)


def compute_phase_result(workload: Workload, phase: Phase, plan: LoadPlan | SessionPlan,
                         outcome: LoadOutcome) -> WorkloadResult:
    params = workload.model_dump(mode="json")
    params["load"] = _load_params(phase, plan)
    warmup = plan.warmup_requests if isinstance(plan, SessionPlan) else len(plan.warmup)
    records = complete_cached_tokens(outcome.records)
    return WorkloadResult(
        name=phase.name,
        concurrency=plan.concurrency,
        num_requests=plan.planned_requests,
        warmup_requests=warmup,
        params=params,
        started_at=outcome.started_at,
        ended_at=outcome.ended_at,
        records=records,
        summary=compute_workload_summary(records, outcome.duration_s,
                                         slo=compute_slo(workload), client=outcome.client),
        complete=outcome.complete,
    )


def _load_params(phase: Phase, plan: LoadPlan | SessionPlan) -> dict[str, Any]:
    load = phase.load_params()
    arrivals = plan.load.arrivals_s if isinstance(plan, SessionPlan) else plan.arrivals_s
    if phase.trace and arrivals and len(arrivals) > 1 and arrivals[-1] > 0:
        load["request_rate"] = (len(arrivals) - 1) / arrivals[-1]  # the trace's mean rate
    if isinstance(plan, SessionPlan):
        load["sessions"] = {"count": len(plan.load.arrivals_s or plan.measured),
                            "history": "live" if any(s.live for s in plan.measured)
                            else "recorded",
                            "think_time_s": plan.think_time_s}
    return load


TURN_RESULTS = (("turn-1", 1, 1), ("turns-2+", 2, None))  # (suffix, first turn, last turn)


def compute_turn_results(workload: Workload, plan: SessionPlan,
                         result: WorkloadResult) -> list[WorkloadResult]:
    """``<phase>/turn-1`` and ``<phase>/turns-2+``: the phase's records split by turn, each
    summarised over the phase's duration (none for turns no conversation has). A split has no
    server telemetry of its own, so its prefix-cache hit rate is its requests' cached tokens
    (``tracker.metrics.compute_request_hit_rate``)."""
    planned = _planned_turns(plan)
    out = []
    for suffix, first, last in TURN_RESULTS:
        count = sum(n for turn, n in planned.items()
                    if turn >= first and (last is None or turn <= last))
        if not count:
            continue
        records = tuple(r for r in result.records if r.turn is not None and r.turn >= first
                        and (last is None or r.turn <= last))
        summary = compute_workload_summary(records, result.summary.duration_s,
                                           slo=compute_slo(workload), client=result.summary.client)
        params = {**result.params, "turns": {"of": result.name, "first": first, "last": last}}
        out.append(replace(result, name=f"{result.name}/{suffix}", num_requests=count,
                           warmup_requests=0, params=params, records=records, summary=summary,
                           gpu=None, server=None))
    return out


def _planned_turns(plan: SessionPlan) -> dict[int, int]:
    """Turn number (1-based) -> how many requests of the phase's conversations have it (a
    branch's requests count at their depth, ``tracker.load.session_steps``)."""
    sessions = plan.measured
    starts = len(plan.load.arrivals_s) if plan.load.arrivals_s is not None else len(sessions)
    counts: dict[int, int] = {}
    for i in range(starts):
        for turn in sessions[i % len(sessions)].depths:
            counts[turn] = counts.get(turn, 0) + 1
    return counts
