"""Multi-turn sessions: each conversation's turns sent one after another on the load generator.

A session is a sequence of requests, each carrying the whole history (``tracker.load.bodies``).
The timing rules are the generator's (``tracker.load.generator``); what sessions add:

- closed loop: ``concurrency`` sessions in flight; a worker takes the next conversation when its
  last one ended. Open loop: conversations start at planned times (``arrivals_s``, sessions per
  second), at most ``concurrency`` at once; turn 1 is measured from its planned start;
- the next turn is sent ``think_time_s`` after the answer before it ended; with ``history: live``
  the answer's text is read from the stream (content deltas joined) and goes into the next
  request; with ``history: recorded`` every request was built before timing;
- a failed turn ends its session: it is recorded as failed and the remaining turns are not sent
  (a complete workload's ``num_requests`` minus its records counts them);
- records are numbered by the plan, not by completion: session ``s``'s turn ``t`` has index
  (turns of the sessions before ``s``) + ``t`` - 1, so the same turn has the same index every run.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tracker.load.bodies import SessionRequests
from tracker.load.client import WireClient
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
from tracker.load.sse import AnswerScanner, AnthropicAnswerScanner


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
        """Every turn of the measured sessions (of those planned to start, in open loop)."""
        sessions = self.measured
        if self.load.arrivals_s is not None:
            sessions = [sessions[i % len(sessions)] for i in range(len(self.load.arrivals_s))]
        return sum(s.turns for s in sessions)

    @property
    def warmup_requests(self) -> int:
        return sum(s.turns for s in self.warmup)


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
        """The turns of one conversation in order; ``scheduled``: turn 1's (planned, ready)."""
        t0 = self.t0 if keep and self.t0 is not None else self.clock()
        answers: list[str] = []
        for turn in range(session.turns):
            if turn and self.sessions.think_time_s > 0:
                await asyncio.sleep(self.sessions.think_time_s)
            scanner = _answer_scanner(self.plan.path) if session.needs_answer(turn) else None
            planned, ready = scheduled if scheduled is not None and not turn else (None, None)
            stamp: dict[str, float] = {}
            record = await run_request(client, self.endpoint, self.plan.path,
                                       session.request(turn, answers), index=first_index + turn,
                                       t0=t0, clock=self.clock,
                                       timeout_s=self.plan.request_timeout_s, scheduled_s=planned,
                                       stamp=stamp, scanner=scanner)
            if keep:
                self.probe.sent(stamp, ready_s=ready)
                self._keep(replace(record, session=number, turn=turn + 1))
            if not record.ok:
                return  # the conversation cannot go on: its later turns are not sent
            if scanner is not None:
                answers.append(scanner.answer)


def _answer_scanner(path: str) -> AnswerScanner | AnthropicAnswerScanner:
    return AnthropicAnswerScanner() if is_messages_path(path) else AnswerScanner()


def _first_indices(sessions: Sequence[SessionRequests]) -> list[int]:
    """The record index of each session's first turn (turns are numbered in plan order)."""
    return [0, *itertools.accumulate(s.turns for s in sessions)][: len(sessions)]

