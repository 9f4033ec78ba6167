"""Request bodies for a workload, built and serialised before anything is timed (pure).

A flat workload's bodies are all built up front. A multi-turn session's turn ``k`` carries the
whole history: the system prompt, every earlier user turn and the assistant's answer to it, then
the user's turn ``k``. With ``history: recorded`` the answers are the dataset's, so every body is
built before timing and is byte-identical run after run. With ``history: live`` they are the
model's own answers, so only the first turn is built up front and each later one when the answer
before it has ended (``SessionRequests.request``). An agentic session's requests (tool results,
sub-agent branches) are laid out by ``tracker.load.session_steps``. On the chat endpoint, an
answer that called tools is an assistant message with ``tool_calls`` and each result is a
``tool`` message. On the Messages API they are ``tool_use`` and ``tool_result`` blocks, and on
completions the texts are joined. No ``tools`` definitions are sent (vLLM refuses the default
``tool_choice: auto`` unless started with ``--enable-auto-tool-choice``): a suite puts their
weight in the system prompt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tracker.errors import ConfigError
from tracker.inputs.adapters import compute_adapter_plan
from tracker.inputs.suites import Workload
from tracker.inputs.traffic import Message, PlannedRequest, PlannedSession, WorkloadTraffic
from tracker.inputs.word_tokenizer import count_tokens
from tracker.load.generator import RequestSpec
from tracker.load.session_steps import (
    Answers,
    SessionSteps,
    compute_step_messages,
    layout_session,
    needs_answer,
)

ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions",
                  "messages": "/v1/messages"}


def _split(messages: tuple[Message, ...]) -> tuple[str | None, list[Message]]:
    """(the system prompt, the conversation without it)."""
    system = next((m.content for m in messages if m.role == "system"), None)
    return system, [m for m in messages if m.role != "system"]


def _chat_message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.call_id, "type": "function",
                              "function": {"name": c.name, "arguments": c.arguments}}
                             for c in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def _anthropic_messages(conversation: list[Message]) -> list[dict[str, Any]]:
    """Messages API turns: tool calls as ``tool_use`` blocks of the assistant's turn, their
    results (and a user message after them) as one user turn of ``tool_result`` blocks."""
    out: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []  # tool results waiting for the user turn they open
    for m in conversation:
        if m.role == "tool":
            blocks.append({"type": "tool_result", "tool_use_id": m.tool_call_id,
                           "content": m.content})
        elif blocks and m.role == "user":
            out.append({"role": "user", "content": [*blocks, {"type": "text",
                                                              "text": m.content}]})
            blocks = []
        elif m.tool_calls:
            text = [{"type": "text", "text": m.content}] if m.content else []
            out.append({"role": m.role, "content": [*text, *(
                {"type": "tool_use", "id": c.call_id, "name": c.name,
                 "input": json.loads(c.arguments)} for c in m.tool_calls)]})
        else:
            out.append({"role": m.role, "content": m.content})
    if blocks:
        out.append({"role": "user", "content": blocks})
    return out


def _messages_body(workload: Workload, model: str, messages: tuple[Message, ...],
                   max_tokens: int) -> dict[str, Any]:
    """The Anthropic Messages API: ``system`` is a top-level field, and usage always streams."""
    system, conversation = _split(messages)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                            "messages": _anthropic_messages(conversation),
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
        body["messages"] = [_chat_message(m) for m in messages]
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
    """(warm-up specs, measured specs) of a flat workload, in the order the suite planned them.

    With ``adapters``, each request's ``model`` is its LoRA adapter (``tracker.load.adapters``).
    """
    models = ((model,) * len(traffic.requests) if workload.adapters is None
              else compute_adapter_plan(workload.adapters, len(traffic.requests)))
    specs = [
        RequestSpec(
            body=encode_body(build_body(workload, request_model, request.messages,
                                        request.max_tokens, supports_ignore_eos)),
            input_tokens_estimate=_estimate_input_tokens(request),
            requested_input_tokens=request.requested_input_tokens,
            arrival_s=request.arrival_s,
        )
        for request, request_model in zip(traffic.requests, models, strict=True)
    ]
    return specs[: workload.warmup_requests], specs[workload.warmup_requests:]


def _estimate_input_tokens(request: PlannedRequest) -> int:
    """The client's count of a request's input (used where the server reports no usage): the
    length the suite asked for where it asked one (already counted, in the model's tokenizer
    when the prompts were made exact), else the word tokenizer's count of the messages."""
    if request.requested_input_tokens is not None:
        return request.requested_input_tokens
    return sum(count_tokens(m.content) for m in request.messages)


@dataclass(frozen=True, slots=True)
class SessionRequests:
    """One session's requests (``tracker.load.session_steps``: its turns, then its branches',
    in plan order). ``prebuilt`` holds those known before timing (the first, or every one with
    ``history: recorded``), and the others are built from the live answers."""

    workload: Workload
    model: str
    ignore_eos: bool
    session: PlannedSession
    live: bool  # history: live (the model's answers) rather than recorded
    prebuilt: tuple[RequestSpec, ...]
    steps: SessionSteps

    @property
    def turns(self) -> int:
        """Every request of the session: its turns and its branches' (``requests``)."""
        return len(self.steps.steps)

    @property
    def requests(self) -> int:
        return len(self.steps.steps)

    @property
    def depths(self) -> tuple[int, ...]:
        """Each request's turn number, as its record carries it."""
        return self.steps.depths

    def needs_answer(self, position: int) -> bool:
        """Whether the answer to request ``position`` goes into a later request."""
        return self.live and needs_answer(self.steps, position)

    def request(self, position: int, answers: Answers) -> RequestSpec:
        """Request ``position`` (in plan order), given ``answers``, the live answers before it."""
        if position < len(self.prebuilt):
            return self.prebuilt[position]
        return _turn_spec(self.workload, self.model, self.ignore_eos, self.steps, position,
                          answers)


def _turn_spec(workload: Workload, model: str, ignore_eos: bool, steps: SessionSteps,
               position: int, answers: Answers) -> RequestSpec:
    messages = compute_step_messages(steps, position, answers)
    body = build_body(workload, model, messages, steps.steps[position].turn.max_tokens,
                      ignore_eos)
    return RequestSpec(encode_body(body), sum(count_tokens(m.content) for m in messages))


def _recorded_answers(steps: SessionSteps, where: str) -> list[str]:
    answers = []
    for step in steps.steps:
        answer = step.turn.recorded_answer
        if answer is None and needs_answer(steps, step.position):
            branch = f" (branch {step.line}, its turn {step.number + 1})" if step.line else ""
            raise ConfigError(f"{where}: turn {step.depth}{branch} has no recorded answer, "
                              "which history: recorded sends in the later turns; use history: "
                              "live or give the answer")
        answers.append(answer or "")
    return answers


def build_session_requests(workload: Workload, traffic: WorkloadTraffic, *, model: str,
                           supports_ignore_eos: bool
                           ) -> tuple[list[SessionRequests], list[SessionRequests]]:
    """(warm-up sessions, measured sessions): the first ``warmup_requests`` conversations warm
    up, the rest are measured."""
    out = []
    live = traffic.history == "live"
    for number, session in enumerate(traffic.sessions):
        steps = layout_session(session)
        answers = [] if live else _recorded_answers(
            steps, f"workload {workload.name}: session {number}")
        known = 1 if live else len(steps.steps)
        prebuilt = tuple(_turn_spec(workload, model, supports_ignore_eos, steps, position,
                                    answers) for position in range(known))
        out.append(SessionRequests(workload, model, supports_ignore_eos, session, live,
                                   prebuilt, steps))
    return out[: workload.warmup_requests], out[workload.warmup_requests:]
