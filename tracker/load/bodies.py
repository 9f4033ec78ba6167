"""Request bodies for a workload, built and serialised once before anything is timed (pure)."""

from __future__ import annotations

import json
from typing import Any

from tracker.inputs.suites import Workload, WorkloadPrompts
from tracker.inputs.tokenizer import count_tokens
from tracker.load.generator import RequestSpec

ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions",
                  "messages": "/v1/messages"}


def _messages_body(workload: Workload, model: str, system: str | None,
                   user: str) -> dict[str, Any]:
    """The Anthropic Messages API: ``system`` is a top-level field; usage always streams."""
    body: dict[str, Any] = {"model": model, "max_tokens": workload.max_tokens,
                            "messages": [{"role": "user", "content": user}],
                            "temperature": workload.temperature, "stream": True}
    if system:
        body["system"] = system
    return body


def _body(workload: Workload, model: str, system: str | None, user: str,
          ignore_eos: bool) -> dict[str, Any]:
    if workload.endpoint_type == "messages":
        return _messages_body(workload, model, system, user)
    body: dict[str, Any] = {"model": model}
    if workload.endpoint_type == "chat":
        messages = [{"role": "system", "content": system}] if system else []
        body["messages"] = [*messages, {"role": "user", "content": user}]
    else:
        body["prompt"] = f"{system}\n\n{user}" if system else user
    body.update(
        max_tokens=workload.max_tokens,
        temperature=workload.temperature,
        stream=True,
        stream_options={"include_usage": True},
    )
    if ignore_eos and workload.ignore_eos:
        body["ignore_eos"] = True
    return body


def build_request_specs(workload: Workload, prompts: WorkloadPrompts, *, model: str,
                        supports_ignore_eos: bool) -> tuple[list[RequestSpec], list[RequestSpec]]:
    """(warm-up specs, measured specs), in the order the suite generated the prompts."""
    system_tokens = count_tokens(prompts.system) if prompts.system else 0
    specs = [
        RequestSpec(
            body=json.dumps(_body(workload, model, prompts.system, user, supports_ignore_eos),
                            ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
            input_tokens_estimate=system_tokens + count_tokens(user),
        )
        for user in prompts.users
    ]
    return specs[: workload.warmup_requests], specs[workload.warmup_requests:]
