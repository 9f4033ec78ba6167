"""The shipped agentic suite against a real server that records every body: tool calls and their
results, think time and sub-agent branches are sent as the suite says, at the times it says, and
two runs send byte-identical bodies (``baselines/agentic-sessions.yaml``, docs/agentic.md).

The expected bodies come from the suite's planned sessions by the rules docs/agentic.md states,
written out here on their own (not by the tracker's builder): each request carries its line's
history, the results of the calls the answer before made, then the user's message; a sub-agent's
branch opens with the calling request and its answer."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_server import (
    DONE,
    Reply,
    ScriptedServer,
    Served,
    ServerFactory,
    chat_chunk,
    usage_chunk,
)
from tracker.inputs.suites import LoadedSuite, load_suite
from tracker.inputs.traffic import PlannedSession, PlannedTurn
from tracker.load.bodies import build_session_requests
from tracker.load.generator import Endpoint
from tracker.load.phases import WorkloadPhases, build_session_plan, compute_phase_result
from tracker.load.sessions import SessionGenerator
from tracker.results import WorkloadResult

ROOT = Path(__file__).resolve().parents[2]
REPLY_DELAY_S = 0.05  # before each answer's first token: long enough to see what overlaps
Message = dict[str, Any]


@pytest.fixture(scope="module")
def suite() -> LoadedSuite:
    return load_suite(ROOT / "baselines" / "agentic-sessions.yaml")


def answer_to(messages: list[Message]) -> str:
    """The scripted server's answer: a function of the request alone, so it is the same on
    every run whatever the order the requests arrive in."""
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
    return f"done {digest[:12]}"


def answering(_index: int, body: dict[str, Any]) -> Reply:
    text = answer_to(body["messages"])
    return Reply([(0.0, chat_chunk("", role="assistant")), (REPLY_DELAY_S, chat_chunk(text[:6])),
                  (0.0, chat_chunk(text[6:])), (0.0, chat_chunk(finish="stop")),
                  (0.0, usage_chunk(10, 2)), (0.0, DONE)])


def expected_requests(session: PlannedSession,
                      answer: Callable[[list[Message], PlannedTurn], str]) -> list[list[Message]]:
    """Every request a session sends, as docs/agentic.md says, in plan order."""
    sent: list[list[Message]] = []

    def line(turns: tuple[PlannedTurn, ...], opening: list[Message]) -> str:
        history, reply = opening, ""
        results: list[Message] = []
        for turn in turns:
            user = [] if turn.user is None else [{"role": "user", "content": turn.user}]
            request = [*history, *results, *user]
            sent.append(request)
            reply = answer(request, turn)
            results = [{"role": "tool", "tool_call_id": call.call.call_id,
                        "content": call.result if call.result is not None
                        else line(call.branch, [*request, {"role": "assistant",
                                                           "content": reply}])}
                       for call in turn.tool_calls]
            said: Message = {"role": "assistant", "content": reply}
            if turn.tool_calls:
                said["tool_calls"] = [{"id": c.call.call_id, "type": "function", "function": {
                    "name": c.call.name, "arguments": c.call.arguments}} for c in turn.tool_calls]
            history = [*request, said]
        return reply

    line(session.turns, [{"role": "system", "content": session.system}] if session.system
         else [])
    return sent


def canonical(messages: list[Message]) -> str:
    return json.dumps(messages, sort_keys=True)


async def run_workload(server: ScriptedServer, suite: LoadedSuite, name: str) -> WorkloadResult:
    workload = next(w for w in suite.suite.workloads if w.name == name)
    traffic = suite.traffic[name]
    warm, measured = build_session_requests(workload, traffic, model="m",
                                            supports_ignore_eos=True)
    phase = WorkloadPhases(workload, suite.suite.seed, traffic).next_phase()
    assert phase is not None
    plan = build_session_plan(workload, phase, warm, measured, think_time_s=traffic.think_time_s)
    outcome = await SessionGenerator(Endpoint(server.url), plan).run()
    return compute_phase_result(workload, phase, plan, outcome)


def answered(served: list[Served]) -> dict[str, Served]:
    return {canonical(s.body["messages"]): s for s in served}


def reply_before(request: list[Message], served: dict[str, Served]) -> Served:
    """The served request whose answer ``request`` carries last: everything before its last
    assistant message (the turn before; for a branch's first request, the calling turn)."""
    last = max(i for i, m in enumerate(request) if m["role"] == "assistant")
    return served[canonical(request[:last])]


def branch_tasks(sessions: tuple[PlannedSession, ...]) -> set[str]:
    return {call.branch[0].user or "" for s in sessions for turn in s.turns
            for call in turn.tool_calls if call.branch}


async def test_agent_loop_sends_tool_results_and_branches_as_the_suite_says(
        scripted: ServerFactory, suite: LoadedSuite) -> None:
    server = await scripted(answering)
    result = await run_workload(server, suite, "agent-loop")
    sessions = suite.traffic["agent-loop"].sessions  # warm-up first, as sent
    expected = [r for s in sessions for r in expected_requests(
        s, lambda request, _turn: answer_to(request))]
    assert len(expected) == 13 * len(sessions)
    assert Counter(canonical(s.body["messages"]) for s in server.served) == \
        Counter(canonical(r) for r in expected)
    assert result.summary.failed == 0 and result.summary.completed == 13 * 2
    assert [r.turn for r in result.records[:13]] == [1, 2, 3, 2, 3, 2, 3, 2, 3, 4, 5, 6, 7]


async def test_agent_loop_waits_for_tools_branches_and_think_time(
        scripted: ServerFactory, suite: LoadedSuite) -> None:
    server = await scripted(answering)
    await run_workload(server, suite, "agent-loop")
    served = answered(server.served)
    source = suite.suite.workloads[0].prompts
    latency, think = source.tool_latency_s, source.think_time_s  # type: ignore[union-attr]
    tasks = branch_tasks(suite.traffic["agent-loop"].sessions)
    tool_waits, think_waits, forks = [], [], Counter[str]()
    for request in server.served:
        messages = request.body["messages"]
        if len(messages) <= 2:  # a session's first request
            continue
        wait = request.received_at - reply_before(messages, served).writes[-1]
        if messages[-1]["role"] == "tool":
            tool_waits.append(wait)
        elif messages[-1]["content"] in tasks:  # a sub-agent's first request
            assert wait >= latency - 0.002
            forks[canonical(messages[:-1])] += 1
        else:  # the user's next message
            think_waits.append(wait)
    assert len(tool_waits) == 3 * 8 and min(tool_waits) >= latency - 0.002, tool_waits
    assert len(think_waits) == 3 and min(think_waits) >= think - 0.002, think_waits
    assert sorted(forks.values()) == [3, 3, 3]  # per session, three sub-agents share a prefix
    for prefix in forks:  # in flight together: each arrived before any of them was answered
        fork = [s for s in server.served if canonical(s.body["messages"][:-1]) == prefix]
        assert max(r.received_at for r in fork) < min(r.writes[1] for r in fork)


async def test_agent_trace_sends_the_recorded_sessions_at_their_times(
        scripted: ServerFactory, suite: LoadedSuite) -> None:
    server = await scripted(answering)
    result = await run_workload(server, suite, "agent-trace")
    sessions = suite.traffic["agent-trace"].sessions
    expected = [r for s in sessions for r in expected_requests(
        s, lambda _request, turn: turn.recorded_answer or "")]
    assert Counter(canonical(s.body["messages"]) for s in server.served) == \
        Counter(canonical(r) for r in expected)
    starts = [r for r in result.records if r.turn == 1]
    assert [r.scheduled_start_s for r in starts] == pytest.approx([0.0, 0.15, 0.30])
    for record in starts:
        assert record.scheduled_start_s is not None
        assert record.scheduled_start_s <= record.start_s < record.scheduled_start_s + 0.05


@pytest.mark.parametrize("name", ["agent-loop", "agent-trace"])
async def test_two_runs_send_byte_identical_bodies(
        scripted: ServerFactory, suite: LoadedSuite, name: str) -> None:
    bodies = []
    for _ in range(2):
        server = await scripted(answering)
        await run_workload(server, suite, name)
        bodies.append(sorted(s.raw for s in server.served))
    assert bodies[0] == bodies[1]
    assert len(set(bodies[0])) == len(bodies[0])  # every request differs from every other
