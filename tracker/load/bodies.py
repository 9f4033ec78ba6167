"""Request bodies for a workload, built and serialised once before anything is timed (pure)."""

from __future__ import annotations

import json
from typing import Any

from tracker.inputs.suites import Workload
from tracker.inputs.tokenizer import count_tokens
from tracker.inputs.traffic import Message, WorkloadTraffic
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
            input_tokens_estimate=sum(count_tokens(m.content) for m in request.messages),
        )
        for request in traffic.requests
    ]
    return specs[: workload.warmup_requests], specs[workload.warmup_requests:]
