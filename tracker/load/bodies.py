"""Request bodies for a workload, built and serialised before anything is timed (pure).

A flat workload's bodies are all built up front. A multi-turn session's turn ``k`` carries the
whole history: the system prompt, every earlier user turn and the assistant's answer to it, then
the user's turn ``k``. With ``history: recorded`` the answers are the dataset's, so every body is
built before timing and is byte-identical run after run; with ``history: live`` they are the
model's own answers, so only the first turn is built up front and each later one when the answer
before it has ended (``SessionRequests.request``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracker.errors import ConfigError
from tracker.inputs.suites import Workload
from tracker.inputs.tokenizer import count_tokens
from tracker.inputs.traffic import Message, PlannedRequest, PlannedSession, WorkloadTraffic
from tracker.load.generator import RequestSpec

ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions",
                  "messages": "/v1/messages"}


def _split(messages: tuple[Message, ...]) -> tuple[str | None, list[Message]]:
    """(the system prompt, the conversation without it)."""
    system = next((m.content for m in messages if m.role == "system"), None)
    return system, [m for m in messages if m.role != "system"]


def _messages_body(workload: Workload, model: str, messages: tuple[Message, ...],
                   max_tokens: int) -> dict[str, Any]:
    """The Anthropic Messages API: ``system`` is a top-level field; usage always streams."""
    system, conversation = _split(messages)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                            "messages": [{"role": m.role, "content": m.content}
                                         for m in conversation],
                            "temperature": workload.temperature, "stream": True}
    if system:
        body["system"] = system
    return body


def build_body(workload: Workload, model: str, messages: tuple[Message, ...],
               max_tokens: int | None, ignore_eos: bool) -> dict[str, Any]:
    """The request body for ``messages`` on the workload's endpoint (``max_tokens``: this
    request's own, else the workload's)."""
    limit = max_tokens or workload.max_tokens
    if workload.endpoint_type == "messages":
        return _messages_body(workload, model, messages, limit)
    body: dict[str, Any] = {"model": model}
    if workload.endpoint_type == "chat":
        body["messages"] = [{"role": m.role, "content": m.content} for m in messages]
    else:
        system, conversation = _split(messages)
        prompt = "\n\n".join(m.content for m in conversation)
        body["prompt"] = f"{system}\n\n{prompt}" if system else prompt
    body.update(
        max_tokens=limit,
        temperature=workload.temperature,
        stream=True,
        stream_options={"include_usage": True},
    )
    if ignore_eos and workload.ignore_eos:
        body["ignore_eos"] = True
    return body


def encode_body(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def build_request_specs(workload: Workload, traffic: WorkloadTraffic, *, model: str,
                        supports_ignore_eos: bool) -> tuple[list[RequestSpec], list[RequestSpec]]:
    """(warm-up specs, measured specs) of a flat workload, in the order the suite planned them."""
    specs = [
        RequestSpec(
            body=encode_body(build_body(workload, model, request.messages, request.max_tokens,
                                        supports_ignore_eos)),
            input_tokens_estimate=_estimate_input_tokens(request),
            requested_input_tokens=request.requested_input_tokens,
            arrival_s=request.arrival_s,
        )
        for request in traffic.requests
    ]
    return specs[: workload.warmup_requests], specs[workload.warmup_requests:]


def _estimate_input_tokens(request: PlannedRequest) -> int:
    """The client's count of a request's input (used where the server reports no usage): the
    length the suite asked for where it asked one (already counted, in the model's tokenizer
    when the prompts were made exact), else the word tokenizer's count of the messages."""
    if request.requested_input_tokens is not None:
        return request.requested_input_tokens
    return sum(count_tokens(m.content) for m in request.messages)


def compute_turn_messages(session: PlannedSession, turn: int,
                          answers: Sequence[str]) -> tuple[Message, ...]:
    """The messages of turn ``turn`` (0-based): the system prompt, each earlier user turn with
    its answer (``answers[i]`` for turn ``i``), then this turn's user message."""
    messages = [Message("system", session.system)] if session.system else []
    for earlier, answer in zip(session.turns[:turn], answers, strict=True):
        messages += [Message("user", earlier.user), Message("assistant", answer)]
    messages.append(Message("user", session.turns[turn].user))
    return tuple(messages)


@dataclass(frozen=True, slots=True)
class SessionRequests:
    """One conversation's requests: ``prebuilt`` holds those known before timing (the first
    turn; every turn with ``history: recorded``), the others are built from the live answers."""

    workload: Workload
    model: str
    ignore_eos: bool
    session: PlannedSession
    live: bool  # history: live (the model's answers) rather than recorded
    prebuilt: tuple[RequestSpec, ...]

    @property
    def turns(self) -> int:
        return len(self.session.turns)

    def needs_answer(self, turn: int) -> bool:
        """Whether the answer to ``turn`` (0-based) goes into a later request."""
        return self.live and turn + 1 < self.turns

    def request(self, turn: int, answers: Sequence[str]) -> RequestSpec:
        """Turn ``turn``'s request (0-based); ``answers``: the live answers to the turns before."""
        if turn < len(self.prebuilt):
            return self.prebuilt[turn]
        return _turn_spec(self.workload, self.model, self.ignore_eos, self.session, turn,
                          answers)


def _turn_spec(workload: Workload, model: str, ignore_eos: bool, session: PlannedSession,
               turn: int, answers: Sequence[str]) -> RequestSpec:
    messages = compute_turn_messages(session, turn, answers)
    body = build_body(workload, model, messages, session.turns[turn].max_tokens, ignore_eos)
    return RequestSpec(encode_body(body), sum(count_tokens(m.content) for m in messages))


def _recorded_answers(session: PlannedSession, where: str) -> list[str]:
    answers = []
    for number, turn in enumerate(session.turns[:-1], start=1):
        if turn.recorded_answer is None:
            raise ConfigError(f"{where}: turn {number} has no recorded answer, which history: "
                              "recorded sends in the later turns; use history: live or give "
                              "the answer")
        answers.append(turn.recorded_answer)
    return answers


def build_session_requests(workload: Workload, traffic: WorkloadTraffic, *, model: str,
                           supports_ignore_eos: bool
                           ) -> tuple[list[SessionRequests], list[SessionRequests]]:
    """(warm-up sessions, measured sessions): the first ``warmup_requests`` conversations warm
    up, the rest are measured."""
    out = []
    for number, session in enumerate(traffic.sessions):
        live = traffic.history == "live"
        answers = [] if live else _recorded_answers(
            session, f"workload {workload.name}: session {number}")
        known = 1 if live else len(session.turns)
        prebuilt = tuple(_turn_spec(workload, model, supports_ignore_eos, session, turn,
                                    answers[:turn]) for turn in range(known))
        out.append(SessionRequests(workload, model, supports_ignore_eos, session, live,
                                   prebuilt))
    return out[: workload.warmup_requests], out[workload.warmup_requests:]
