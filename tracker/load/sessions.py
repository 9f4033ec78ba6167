"""Multi-turn sessions: each conversation's turns sent one after another on the load generator.

A session is a sequence of requests, each carrying the whole history (``tracker.load.bodies``).
An agentic one also has tool calls and sub-agent branches (``tracker.load.session_steps``). The
timing rules are the generator's (``tracker.load.generator``). What sessions add:

- In closed loop, ``concurrency`` sessions are in flight, and a worker takes the next
  conversation when its last one ended. In open loop, conversations start at planned times
  (``arrivals_s``, sessions per second, or a session trace's own times), at most
  ``concurrency`` at once, and turn 1 is measured from its planned start.
- The next turn is sent ``think_time_s`` after the answer before it ended (the turn's own, else
  the workload's). With ``history: live`` the answer's text is read from the stream (content
  deltas joined) and goes into the next request. With ``history: recorded`` every request was
  built before timing.
- When an answer calls tools, each plain tool's result comes back its ``latency_s`` after the
  answer ended, and each sub-agent's branch is forked then (after its ``latency_s``) and runs its
  own turns, in parallel with the other calls. The next turn is sent when the last of them is
  back (think time does not apply: the tools are the wait).
- A failed request ends its session. It is recorded as failed, and the requests that depend on
  it are not sent (a complete workload's ``num_requests`` minus its records counts them).
  Branches already in flight finish.
- Records are numbered by the plan, not by completion: session ``s``'s request at plan position
  ``p`` (``tracker.load.session_steps``) has index (requests of the sessions before ``s``) +
  ``p``, so the same request has the same index every run. Its ``turn`` is its depth.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from tracker.http_client.client import WireClient
from tracker.http_client.sse import AnswerScanner, AnthropicAnswerScanner
from tracker.load.bodies import SessionRequests
from tracker.load.generator import (
    Clock,
    Endpoint,
    LoadGenerator,
    LoadPlan,
    ProgressCallback,
    WarmedCallback,
    is_messages_path,
    run_request,
)
from tracker.load.session_steps import Step
from tracker.results import RequestRecord


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """A session workload's phase: ``load`` gives the path, the concurrency, the timeout and, in
    open loop, the sessions' planned starts (its own warmup and measured are empty)."""

    load: LoadPlan
    warmup: Sequence[SessionRequests]
    measured: Sequence[SessionRequests]
    think_time_s: float = 0.0

    @property
    def concurrency(self) -> int:
        return self.load.concurrency

    @property
    def planned_requests(self) -> int:
        """Every request of the measured sessions (of those planned to start, in open loop)."""
        sessions = self.measured
        if self.load.arrivals_s is not None:
            sessions = [sessions[i % len(sessions)] for i in range(len(self.load.arrivals_s))]
        return sum(s.requests for s in sessions)

    @property
    def warmup_requests(self) -> int:
        return sum(s.requests for s in self.warmup)

    @property
    def width(self) -> int:
        """The most requests one session can have in flight (its widest fork)."""
        return max((s.steps.width for s in (*self.warmup, *self.measured)), default=1)


@dataclass(slots=True)
class _SessionRun:
    """One session being sent: where its records go and the answers so far."""

    session: SessionRequests
    number: int
    first_index: int
    t0: float
    keep: bool
    scheduled: tuple[float, float] | None  # the first request's (planned, ready), open loop
    answers: dict[int, str] = field(default_factory=dict)


class SessionGenerator(LoadGenerator):
    """Runs a ``SessionPlan``: warm-up sessions (not measured), then the measured ones."""

    def __init__(self, endpoint: Endpoint, plan: SessionPlan, *,
                 clock: Clock = time.perf_counter,
                 on_progress: ProgressCallback | None = None,
                 on_warmed: WarmedCallback | None = None) -> None:
        super().__init__(endpoint, plan.load, clock=clock, on_progress=on_progress,
                         on_warmed=on_warmed)
        self.sessions = plan

    @property
    def planned_requests(self) -> int:
        return self.sessions.planned_requests

    @property
    def warmup_requests(self) -> int:
        return self.sessions.warmup_requests

    async def _run_warmup(self, client: WireClient) -> None:
        await self._run_sessions(client, self.sessions.warmup, keep=False)

    async def _run_measured(self, client: WireClient) -> None:
        arrivals = self.plan.arrivals_s
        if arrivals is None:
            await self._run_sessions(client, self.sessions.measured, keep=True)
            return
        sessions = self.sessions.measured
        starts = _first_indices([sessions[i % len(sessions)] for i in range(len(arrivals))])

        async def one(number: int, planned: float, ready: float) -> None:
            await self._run_session(client, number, sessions[number % len(sessions)],
                                    starts[number], keep=True, scheduled=(planned, ready))

        await self._schedule(arrivals, one)

    async def _run_sessions(self, client: WireClient, sessions: Sequence[SessionRequests], *,
                            keep: bool) -> None:
        if not sessions:
            return
        starts = _first_indices(sessions)
        queue = iter(range(len(sessions)))

        async def worker() -> None:
            for number in queue:
                await self._run_session(client, number, sessions[number], starts[number],
                                        keep=keep)

        await asyncio.gather(*(worker() for _ in range(min(self.plan.concurrency,
                                                           len(sessions)))))

    async def _run_session(self, client: WireClient, number: int, session: SessionRequests,
                           first_index: int, *, keep: bool,
                           scheduled: tuple[float, float] | None = None) -> None:
        """The requests of one session in order, with ``scheduled`` the first one's (planned,
        ready)."""
        t0 = self.t0 if keep and self.t0 is not None else self.clock()
        run = _SessionRun(session, number, first_index, t0, keep, scheduled)
        await self._run_line(client, run, 0)

    async def _run_line(self, client: WireClient, run: _SessionRun, line: int) -> bool:
        """One line of the session (the main one, or a branch) turn by turn. It returns False
        when a request failed, so what depends on it is not sent."""
        steps = run.session.steps
        for position in steps.lines[line].steps:
            before = steps.previous(position)
            if before is not None and before.turn.tool_calls:
                if not await self._run_tools(client, run, before):
                    return False
            elif before is not None:
                think = steps.steps[position].turn.think_time_s
                think = self.sessions.think_time_s if think is None else think
                if think > 0:
                    await asyncio.sleep(think)
            if not await self._send(client, run, position):
                return False
        return True

    async def _run_tools(self, client: WireClient, run: _SessionRun, step: Step) -> bool:
        """The tools the answer of ``step`` called, in parallel: each plain tool's latency, and
        each sub-agent's branch after its latency. It returns True when every branch ran to its
        end."""
        async def call(number: int) -> bool:
            tool = step.turn.tool_calls[number]
            if tool.latency_s > 0:
                await asyncio.sleep(tool.latency_s)
            if not tool.branch:
                return True
            return await self._run_line(client, run,
                                        run.session.steps.branches[step.position, number])

        done = await asyncio.gather(*(call(n) for n in range(len(step.turn.tool_calls))))
        return all(done)

    async def _send(self, client: WireClient, run: _SessionRun, position: int) -> bool:
        session = run.session
        scanner = _answer_scanner(self.plan.path) if session.needs_answer(position) else None
        first = position == 0 and run.scheduled is not None
        planned, ready = run.scheduled if first and run.scheduled is not None else (None, None)
        stamp: dict[str, float] = {}
        record = await run_request(client, self.endpoint, self.plan.path,
                                   session.request(position, run.answers),
                                   index=run.first_index + position, t0=run.t0, clock=self.clock,
                                   timeout_s=self.plan.request_timeout_s, scheduled_s=planned,
                                   stamp=stamp, scanner=scanner)
        if run.keep:
            self.probe.sent(stamp, ready_s=ready)
            self._keep(_in_session(record, run, session.steps.steps[position]))
        if scanner is not None and record.ok:
            run.answers[position] = scanner.answer
        return record.ok

    def _pool_size(self) -> int:
        return self.plan.concurrency * self.sessions.width


def _in_session(record: RequestRecord, run: _SessionRun, step: Step) -> RequestRecord:
    return replace(record, session=run.number, turn=step.depth)


def _answer_scanner(path: str) -> AnswerScanner | AnthropicAnswerScanner:
    return AnthropicAnswerScanner() if is_messages_path(path) else AnswerScanner()


def _first_indices(sessions: Sequence[SessionRequests]) -> list[int]:
    """The record index of each session's first turn (turns are numbered in plan order)."""
    return [0, *itertools.accumulate(s.requests for s in sessions)][: len(sessions)]

