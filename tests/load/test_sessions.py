"""Multi-turn sessions through the load generator, against a real server that records each body."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.scripted_server import (
    DONE,
    Reply,
    ScriptedServer,
    ServerFactory,
    chat_chunk,
    sse,
    usage_chunk,
)
from tracker.inputs.configs import load_config
from tracker.inputs.suites import Suite, Workload, build_loaded_suite
from tracker.inputs.traffic import PlannedSession, PlannedTurn, WorkloadTraffic
from tracker.load.bodies import build_session_requests
from tracker.load.generator import Endpoint
from tracker.load.phases import (
    WorkloadPhases,
    build_session_plan,
    compute_phase_result,
    compute_turn_results,
)
from tracker.load.sessions import SessionGenerator
from tracker.pipeline.execute import execute_suite
from tracker.reports.load_report import render_load_json
from tracker.results import WorkloadResult


def workload(**fields: Any) -> Workload:
    shape = {"concurrency": 2} if "request_rate" not in fields else {}
    return Workload.model_validate({"name": "chat", "prompts": {"source": "fixed", "text": "x"},
                                    "max_tokens": 8, "num_requests": 2, **shape, **fields})


def sessions(count: int, turns: int = 3, *, system: str | None = "be brief",
             history: str = "live", think_time_s: float = 0.0) -> WorkloadTraffic:
    return WorkloadTraffic(sessions=tuple(
        PlannedSession(tuple(PlannedTurn(f"s{s} q{t}", f"s{s} recorded a{t}")
                             for t in range(1, turns + 1)), system=system)
        for s in range(count)), history=history, think_time_s=think_time_s)  # type: ignore[arg-type]


def last_user(body: dict[str, Any]) -> str:
    if "prompt" in body:
        return str(body["prompt"]).rsplit("\n\n", 1)[-1]
    return str(body["messages"][-1]["content"])


class Answering:
    """Answers every request with a text of its own (unknown to the client beforehand), in
    several content chunks after a role chunk and a reasoning chunk, and remembers it."""

    def __init__(self, tag: str = "", fail_on: str | None = None, delay_s: float = 0.0) -> None:
        self.tag, self.fail_on, self.delay_s = tag, fail_on, delay_s
        self.answers: dict[int, str] = {}

    def __call__(self, index: int, body: dict[str, Any]) -> Reply:
        question = last_user(body)
        if question == self.fail_on:
            return Reply(status=500, content_type="application/json",
                         body=b'{"error": {"message": "engine exploded"}}')
        text = self.answers[index] = f"answer {index}{self.tag} to {question}"
        first, second = text[: len(text) // 2], text[len(text) // 2:]
        if "prompt" in body:  # completions
            pieces = [sse({"id": "x", "choices": [{"index": 0, "text": part}]})
                      for part in (first, second)]
        else:
            pieces = [chat_chunk("", role="assistant"),
                      sse({"id": "x", "choices": [{"index": 0,
                                                   "delta": {"reasoning_content": "hmm"}}]}),
                      chat_chunk(first), chat_chunk(second)]
        return Reply([(self.delay_s, pieces[0]), *((0.0, piece) for piece in pieces[1:]),
                      (0.0, chat_chunk(finish="stop")), (0.0, usage_chunk(12, 3)), (0.0, DONE)])


async def run_sessions(server: ScriptedServer, w: Workload,
                       traffic: WorkloadTraffic) -> WorkloadResult:
    warm, measured = build_session_requests(w, traffic, model="m", supports_ignore_eos=False)
    phase = WorkloadPhases(w, 0, traffic).next_phase()
    assert phase is not None
    plan = build_session_plan(w, phase, warm, measured, think_time_s=traffic.think_time_s)
    outcome = await SessionGenerator(Endpoint(server.url), plan).run()
    return compute_phase_result(w, phase, plan, outcome)


def by_history(server: ScriptedServer) -> dict[str, int]:
    """Each served request's messages (as JSON) -> its position among the served."""
    return {json.dumps(s.body.get("messages") or s.body.get("prompt")): i
            for i, s in enumerate(server.served)}


async def test_each_later_turn_carries_the_earlier_turns_and_the_live_answers(
        scripted: ServerFactory) -> None:
    answering = Answering()
    server = await scripted(answering)
    result = await run_sessions(server, workload(num_requests=3), sessions(3))
    assert [r.ok for r in result.records] == [True] * 9
    served = by_history(server)
    for index, request in enumerate(server.served):
        messages = request.body["messages"]
        session, turns = messages[1]["content"].split()[0], len(messages) // 2
        assert messages[0] == {"role": "system", "content": "be brief"}
        assert [m["content"] for m in messages[1::2]] == [f"{session} q{t}"
                                                         for t in range(1, turns + 1)]
        if turns > 1:  # the answer before is the one the server streamed to the turn before
            before = served[json.dumps(messages[:-2])]
            assert messages[-2] == {"role": "assistant", "content": answering.answers[before]}
            assert server.served[before].received_at < request.received_at
        assert index in answering.answers
    assert all("hmm" not in json.dumps(s.body) for s in server.served)  # reasoning is not kept


async def test_records_are_numbered_by_session_and_turn_in_plan_order(
        scripted: ServerFactory) -> None:
    server = await scripted(Answering())
    result = await run_sessions(server, workload(num_requests=2), sessions(2, turns=3))
    assert [(r.index, r.session, r.turn) for r in result.records] == [
        (0, 0, 1), (1, 0, 2), (2, 0, 3), (3, 1, 1), (4, 1, 2), (5, 1, 3)]
    assert result.num_requests == 6 and result.summary.completed == 6


async def test_completions_carry_the_history_in_the_prompt(scripted: ServerFactory) -> None:
    answering = Answering()
    server = await scripted(answering)
    await run_sessions(server, workload(endpoint_type="completions", num_requests=1,
                                        concurrency=1), sessions(1, turns=2))
    first, second = (s.body["prompt"] for s in server.served)
    assert first == "be brief\n\ns0 q1"
    assert second == f"be brief\n\ns0 q1\n\n{answering.answers[0]}\n\ns0 q2"


def message_stream(text: str) -> Reply:
    def event(kind: str, **fields: Any) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()
    half = len(text) // 2
    return Reply([
        (0.0, event("message_start", message={"id": "m", "usage": {"input_tokens": 9}})),
        (0.0, event("content_block_delta", index=0,
                    delta={"type": "thinking_delta", "thinking": "let me think"})),
        *((0.0, event("content_block_delta", index=1, delta={"type": "text_delta", "text": part}))
          for part in (text[:half], text[half:])),
        (0.0, event("message_delta", delta={}, usage={"output_tokens": 2})),
        (0.0, event("message_stop"))])


async def test_the_messages_api_sends_back_the_text_deltas_not_the_thinking(
        scripted: ServerFactory) -> None:
    server = await scripted(lambda i, body: message_stream(f"reply {i} here"))
    result = await run_sessions(server, workload(endpoint_type="messages", num_requests=1,
                                                 concurrency=1), sessions(1, turns=3))
    assert [r.ok for r in result.records] == [True] * 3
    last = server.served[2].body
    assert last["system"] == "be brief"
    assert last["messages"] == [
        {"role": "user", "content": "s0 q1"}, {"role": "assistant", "content": "reply 0 here"},
        {"role": "user", "content": "s0 q2"}, {"role": "assistant", "content": "reply 1 here"},
        {"role": "user", "content": "s0 q3"}]


async def test_recorded_history_sends_byte_identical_requests_on_two_runs(
        scripted: ServerFactory) -> None:
    w, traffic = workload(num_requests=3), sessions(3, history="recorded")
    bodies = []
    for run in ("first", "second"):  # the server's answers differ run to run
        server = await scripted(Answering(tag=f" ({run} run)"))
        await run_sessions(server, w, traffic)
        bodies.append(sorted(s.raw for s in server.served))
        assert all(m["content"].startswith(m["content"][:2] + " recorded")
                   for s in server.served for m in s.body["messages"] if m["role"] == "assistant")
    assert len(bodies[0]) == 9 and bodies[0] == bodies[1]


async def test_live_history_sends_what_the_server_answered_so_runs_differ(
        scripted: ServerFactory) -> None:
    w, traffic = workload(num_requests=2), sessions(2, history="live")
    bodies = []
    for run in ("first", "second"):
        server = await scripted(Answering(tag=f" ({run} run)"))
        await run_sessions(server, w, traffic)
        bodies.append(sorted(s.raw for s in server.served))
    first_turns = [b for b in bodies[0] if b"assistant" not in b]
    assert first_turns == [b for b in bodies[1] if b"assistant" not in b]  # turn 1 is fixed
    assert bodies[0] != bodies[1]


async def test_a_failed_turn_ends_its_session_and_its_later_turns_are_not_sent(
        scripted: ServerFactory) -> None:
    server = await scripted(Answering(fail_on="s0 q2"))
    result = await run_sessions(server, workload(num_requests=2), sessions(2, turns=3))
    assert [(r.session, r.turn, r.ok) for r in result.records] == [
        (0, 1, True), (0, 2, False), (1, 1, True), (1, 2, True), (1, 3, True)]
    assert result.records[1].error_class == "http_500"
    assert "s0 q3" not in [last_user(s.body) for s in server.served]
    sessions_json = render_load_json(result)["sessions"]
    assert (sessions_json["unsent_turns"], sessions_json["ended_by_a_failure"]) == (1, 1)
    assert (result.summary.completed, result.summary.failed) == (4, 1)
    assert sessions_json["sessions_without_a_failure"] == 1
    assert sessions_json["mean_turns_per_session"] == 2.5  # 2 sent in s0, 3 in s1
    whole = [r for r in result.records if r.session == 1]
    expected_ms = (whole[-1].start_s + (whole[-1].e2el_s or 0) - whole[0].start_s) * 1000
    assert sessions_json["median_session_duration_ms"] == pytest.approx(expected_ms)


async def test_the_next_turn_waits_the_think_time_after_the_answer(
        scripted: ServerFactory) -> None:
    server = await scripted(Answering())
    await run_sessions(server, workload(num_requests=1, concurrency=1),
                       sessions(1, turns=3, think_time_s=0.08))
    arrivals = [s.received_at for s in server.served]
    last_writes = [s.writes[-1] for s in server.served]
    gaps = [arrivals[i + 1] - last_writes[i] for i in range(2)]
    assert min(gaps) >= 0.075  # asyncio's timer may wake a hair early, never by 5 ms


async def test_concurrency_is_the_sessions_in_flight(scripted: ServerFactory) -> None:
    server = await scripted(Answering(delay_s=0.02))
    result = await run_sessions(server, workload(num_requests=4, concurrency=2),
                                sessions(4, turns=2))
    assert server.max_in_flight == 2
    assert result.summary.completed == 8 and result.concurrency == 2


async def test_warmup_sessions_run_first_and_are_not_recorded(scripted: ServerFactory) -> None:
    server = await scripted(Answering())
    result = await run_sessions(server, workload(num_requests=2, warmup_requests=1),
                                sessions(3, turns=2))
    assert [last_user(s.body) for s in server.served[:2]] == ["s0 q1", "s0 q2"]
    assert len(server.served) == 6 and len(result.records) == 4
    assert {r.session for r in result.records} == {0, 1}
    assert result.warmup_requests == 2 and result.num_requests == 4


async def test_sessions_at_a_rate_measure_turn_one_from_its_planned_start(
        scripted: ServerFactory) -> None:
    server = await scripted(Answering())
    result = await run_sessions(server, workload(request_rate=50.0, num_requests=3),
                                sessions(3, turns=2))
    firsts = [r for r in result.records if r.turn == 1]
    assert len(firsts) == 3 and all(r.scheduled_start_s is not None for r in firsts)
    assert all(r.scheduled_start_s is None for r in result.records if r.turn == 2)
    assert result.params["load"]["mode"] == "open"
    assert result.params["load"]["sessions"]["count"] == 3


async def test_turn_results_split_the_records_by_turn(scripted: ServerFactory) -> None:
    server = await scripted(Answering())
    w, traffic = workload(num_requests=2), sessions(2, turns=3)
    warm, measured = build_session_requests(w, traffic, model="m", supports_ignore_eos=False)
    phase = WorkloadPhases(w, 0, traffic).next_phase()
    assert phase is not None
    plan = build_session_plan(w, phase, warm, measured, think_time_s=0.0)
    result = compute_phase_result(w, phase, plan, await SessionGenerator(
        Endpoint(server.url), plan).run())
    first, later = compute_turn_results(w, plan, result)
    assert (first.name, later.name) == ("chat/turn-1", "chat/turns-2+")
    assert [r.turn for r in first.records] == [1, 1]
    assert sorted(r.turn for r in later.records) == [2, 2, 3, 3]
    assert (first.num_requests, later.num_requests) == (2, 4)
    assert first.summary.client == result.summary.client
    assert first.summary.ttft is not None and first.summary.ttft.count == 2
    turns = render_load_json(result)["sessions"]["turns"]
    assert [(t["turn"], t["completed"]) for t in turns] == [(1, 2), (2, 2), (3, 2)]


async def test_a_suite_run_stores_the_sessions_and_their_turn_results(
        scripted: ServerFactory, tmp_path: Path, store: Engine) -> None:
    server = await scripted(Answering())
    config = tmp_path / "c.yaml"
    config.write_text(f"name: c\ntarget:\n  kind: openai\n  model: m\n  base_url: {server.url}\n",
                      encoding="utf-8")
    w = workload(num_requests=2)
    loaded = build_loaded_suite(Suite(name="s", workloads=[w]), str(tmp_path / "s.yaml"))
    loaded = replace(loaded, traffic={"chat": sessions(2, turns=2)})
    run = await asyncio.to_thread(execute_suite, store, load_config(config), loaded)
    assert run.status.value == "completed"
    assert [x.name for x in run.workloads] == ["chat", "chat/turn-1", "chat/turns-2+"]
    chat, first, later = run.workloads
    assert [(r.session, r.turn) for r in chat.records] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert [r.turn for r in first.records] == [1, 1] and [r.turn for r in later.records] == [2, 2]
    assert first.summary.completed == 2 and later.summary.ttft is not None
    assert chat.records[0].input_tokens == 12 and chat.records[0].requested_input_tokens is None
