"""An agentic session's requests: plan order, depth, the messages each carries (chat, Messages
API, completions), and what a failed sub-agent stops; against a real recording server."""

from __future__ import annotations

import json
from typing import Any

from tests.scripted_server import DONE, Reply, ServerFactory, chat_chunk, usage_chunk
from tracker.inputs.suites import Workload
from tracker.inputs.traffic import (
    Message,
    PlannedSession,
    PlannedToolCall,
    PlannedTurn,
    ToolCall,
    WorkloadTraffic,
)
from tracker.load.bodies import build_body, build_session_requests
from tracker.load.generator import Endpoint
from tracker.load.phases import WorkloadPhases, build_session_plan, compute_phase_result
from tracker.load.session_steps import compute_step_messages, layout_session, needs_answer
from tracker.load.sessions import SessionGenerator

SEARCH = ToolCall("c1", "search", '{"q":"x"}')
SUB_A, SUB_B = ToolCall("c2", "subagent", '{"task":"a"}'), ToolCall("c3", "subagent", "{}")
READ = ToolCall("c4", "read", "{}")
SESSION = PlannedSession((
    PlannedTurn("q1", "a1", tool_calls=(
        PlannedToolCall(SEARCH, "found", 0.01),
        PlannedToolCall(SUB_A, branch=(
            PlannedTurn("task a", "ta1", tool_calls=(PlannedToolCall(READ, "file", 0.01),)),
            PlannedTurn(None, "ta2"))),
        PlannedToolCall(SUB_B, branch=(PlannedTurn("task b", "tb1"),)))),
    PlannedTurn(None, "a2"),
    PlannedTurn("q3", "a3", think_time_s=0.02),
), system="sys")
ANSWERS = {0: "a1", 1: "ta1", 2: "ta2", 3: "tb1", 4: "a2"}


def test_requests_are_laid_out_depth_first_with_their_depths() -> None:
    steps = layout_session(SESSION)
    assert [(s.line, s.number, s.depth) for s in steps.steps] == [
        (0, 0, 1), (1, 0, 2), (1, 1, 3), (2, 0, 2), (0, 1, 2), (0, 2, 3)]
    assert [s.turn.user for s in steps.steps] == ["q1", "task a", None, "task b", None, "q3"]
    assert steps.width == 2 and steps.branches == {(0, 1): 1, (0, 2): 2}
    assert [needs_answer(steps, p) for p in range(6)] == [True] * 5 + [False]


def test_a_branch_opens_with_the_calling_request_and_its_answer() -> None:
    steps = layout_session(SESSION)
    opening = [Message("system", "sys"), Message("user", "q1"), Message("assistant", "a1")]
    assert compute_step_messages(steps, 1, ANSWERS) == (*opening, Message("user", "task a"))
    assert compute_step_messages(steps, 2, ANSWERS) == (
        *opening, Message("user", "task a"), Message("assistant", "ta1", tool_calls=(READ,)),
        Message("tool", "file", tool_call_id="c4"))
    assert compute_step_messages(steps, 3, ANSWERS) == (*opening, Message("user", "task b"))


def test_the_turn_after_the_calls_carries_each_result_a_sub_agent_its_last_answer() -> None:
    steps = layout_session(SESSION)
    calling = Message("assistant", "a1", tool_calls=(SEARCH, SUB_A, SUB_B))
    after = (Message("system", "sys"), Message("user", "q1"), calling,
             Message("tool", "found", tool_call_id="c1"), Message("tool", "ta2", tool_call_id="c2"),
             Message("tool", "tb1", tool_call_id="c3"))
    assert compute_step_messages(steps, 4, ANSWERS) == after
    assert compute_step_messages(steps, 5, ANSWERS) == (
        *after, Message("assistant", "a2"), Message("user", "q3"))


def workload(endpoint_type: str = "chat", **fields: Any) -> Workload:
    return Workload.model_validate({"name": "agent", "prompts": {"source": "fixed", "text": "x"},
                                    "max_tokens": 8, "num_requests": 1, "concurrency": 1,
                                    "endpoint_type": endpoint_type, **fields})


def test_chat_bodies_carry_tool_calls_and_tool_messages_in_openai_form() -> None:
    messages = compute_step_messages(layout_session(SESSION), 4, ANSWERS)
    body = build_body(workload(), "m", messages, None, False)
    assert body["messages"][2] == {"role": "assistant", "content": "a1", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}},
        {"id": "c2", "type": "function", "function": {"name": "subagent",
                                                     "arguments": '{"task":"a"}'}},
        {"id": "c3", "type": "function", "function": {"name": "subagent", "arguments": "{}"}}]}
    assert body["messages"][3:] == [
        {"role": "tool", "content": "found", "tool_call_id": "c1"},
        {"role": "tool", "content": "ta2", "tool_call_id": "c2"},
        {"role": "tool", "content": "tb1", "tool_call_id": "c3"}]
    assert "tools" not in body


def test_messages_api_bodies_carry_tool_use_and_tool_result_blocks() -> None:
    session = PlannedSession((PlannedTurn("q1", "a1", tool_calls=(
        PlannedToolCall(SEARCH, "found"),)), PlannedTurn("and?", "a2")), system="sys")
    messages = compute_step_messages(layout_session(session), 1, {0: "a1"})
    body = build_body(workload("messages"), "m", messages, None, False)
    assert body["system"] == "sys"
    assert body["messages"] == [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "a1"},
            {"type": "tool_use", "id": "c1", "name": "search", "input": {"q": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                      "content": "found"}, {"type": "text", "text": "and?"}]}]


def test_completions_join_the_texts_tool_results_included() -> None:
    messages = compute_step_messages(layout_session(SESSION), 4, ANSWERS)
    body = build_body(workload("completions"), "m", messages, None, False)
    assert body["prompt"] == "sys\n\nq1\n\na1\n\nfound\n\nta2\n\ntb1"


def answering(_index: int, body: dict[str, Any]) -> Reply:
    last = body["messages"][-1]["content"]
    if last == "task a":
        return Reply(status=500, content_type="application/json",
                     body=b'{"error": {"message": "sub-agent exploded"}}')
    text = f"re {len(body['messages'])}"
    return Reply([(0.0, chat_chunk("", role="assistant")), (0.0, chat_chunk(text)),
                  (0.0, chat_chunk(finish="stop")), (0.0, usage_chunk(5, 2)), (0.0, DONE)])


async def test_a_failed_sub_agent_ends_its_session_after_its_siblings(
        scripted: ServerFactory) -> None:
    server = await scripted(answering)
    w = workload()
    traffic = WorkloadTraffic(sessions=(SESSION,))
    warm, measured = build_session_requests(w, traffic, model="m", supports_ignore_eos=False)
    phase = WorkloadPhases(w, 0, traffic).next_phase()
    assert phase is not None
    plan = build_session_plan(w, phase, warm, measured, think_time_s=0.0)
    result = compute_phase_result(w, phase, plan, await SessionGenerator(
        Endpoint(server.url), plan).run())
    assert result.num_requests == 6
    assert [(r.index, r.turn, r.ok) for r in result.records] == [
        (0, 1, True), (1, 2, False), (3, 2, True)]
    sent = [json.loads(s.raw)["messages"][-1]["content"] for s in server.served]
    assert sorted(sent) == ["q1", "task a", "task b"]
