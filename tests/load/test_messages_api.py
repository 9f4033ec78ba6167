"""The Anthropic Messages API (/v1/messages) through the load generator, against a real server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_server import Reply, ScriptedServer, ServerFactory
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.load.bodies import ENDPOINT_PATHS, build_request_specs
from tracker.load.generator import Endpoint, RequestSpec, open_client, run_request
from tracker.pipeline.execute import execute_suite
from tracker.results import TokenSource
from tracker.store.db import open_store


def event(kind: str, **fields: Any) -> bytes:
    return (f"event: {kind}\n".encode() + b"data: " + json.dumps({"type": kind, **fields}).encode()
            + b"\n\n")


def message_stream(tokens: int, *, ttft_s: float, itl_s: float, stop: bool = True) -> Reply:
    steps = [(0.0, event("message_start", message={
        "id": "msg_1", "model": "claude-x", "usage": {"input_tokens": 21, "output_tokens": 1}})),
        (0.0, event("content_block_start", index=0, content_block={"type": "text", "text": ""})),
        (0.0, event("ping"))]
    for i in range(tokens):
        steps.append((ttft_s if i == 0 else itl_s, event(
            "content_block_delta", index=0, delta={"type": "text_delta", "text": "tok "})))
    steps += [(0.0, event("content_block_stop", index=0)),
              (0.0, event("message_delta", delta={"stop_reason": "max_tokens"},
                          usage={"output_tokens": tokens}))]
    if stop:
        steps.append((0.0, event("message_stop")))
    return Reply(steps)


@pytest.fixture
def server_for(scripted: ServerFactory) -> Callable[[Reply], Awaitable[ScriptedServer]]:
    """A scripted server that answers every request with ``reply``."""
    return lambda reply: scripted(lambda index, body: reply)


async def one(server: ScriptedServer, key: str | None = "sk-test-key") -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    spec = RequestSpec(json.dumps({"model": "claude-x", "stream": True}).encode(), 5)
    endpoint = Endpoint(server.url, headers)
    async with open_client(endpoint, time.perf_counter) as client:
        return await run_request(client, endpoint, ENDPOINT_PATHS["messages"], spec, index=0,
                                 t0=0.0, clock=time.perf_counter, timeout_s=10)


async def test_ttft_counts_from_the_first_text_delta_and_usage_comes_from_the_events(
    server_for: Any,
) -> None:
    server = await server_for(message_stream(6, ttft_s=0.05, itl_s=0.01))
    record = await one(server)
    assert record.ok, record.error
    assert record.ttft_s is not None and record.ttft_s >= 0.045  # message_start is not a token
    assert (record.output_tokens, record.output_tokens_source) == (6, TokenSource.USAGE)
    assert (record.input_tokens, record.input_tokens_source) == (21, TokenSource.USAGE)
    assert len(record.itl_s) == 5
    assert record.tpot_s == pytest.approx(0.01, abs=0.006)


async def test_the_key_goes_in_x_api_key_with_a_version_header(server_for: Any) -> None:
    server = await server_for(message_stream(2, ttft_s=0.0, itl_s=0.0))
    await one(server)
    headers = {k.lower(): v for k, v in server.served[0].headers.items()}
    assert server.served[0].path == "/v1/messages"
    assert headers["x-api-key"] == "sk-test-key"
    assert "authorization" not in headers
    assert headers["anthropic-version"]


@pytest.mark.parametrize(("reply", "error_class"), [
    (message_stream(3, ttft_s=0.0, itl_s=0.0, stop=False), "truncated_stream"),
    (Reply([(0.0, event("message_start", message={"usage": {"input_tokens": 1}})),
            (0.0, event("error", error={"type": "overloaded_error", "message": "Overloaded"}))]),
     "stream_error"),
    (Reply([(0.0, event("message_start", message={"usage": {"input_tokens": 1}})),
            (0.0, event("message_stop"))]), "empty_response"),
    (Reply([(0.0, b"data: {\"no_type\": 1}\n\n")]), "malformed_sse"),
])
async def test_messages_failures_are_records(server_for: Any, reply: Reply,
                                             error_class: str) -> None:
    record = await one(await server_for(reply))
    assert record.error_class == error_class


def test_a_messages_workload_builds_anthropic_bodies(tmp_path: Path) -> None:
    suite_file = tmp_path / "s.yaml"
    suite_file.write_text(
        "name: s\nworkloads:\n  - name: w\n    endpoint_type: messages\n"
        "    prompts: {source: synthetic, input_tokens: 8, system_prompt_tokens: 4}\n"
        "    max_tokens: 16\n    ignore_eos: true\n    concurrency: 1\n    num_requests: 2\n",
        encoding="utf-8")
    loaded = load_suite(suite_file)
    _, specs = build_request_specs(loaded.suite.workloads[0], loaded.traffic["w"], model="claude-x",
                                   supports_ignore_eos=True)
    body = json.loads(specs[0].body)
    assert body["stream"] is True and body["max_tokens"] == 16
    assert body["system"] and [m["role"] for m in body["messages"]] == ["user"]
    assert "stream_options" not in body and "ignore_eos" not in body


async def test_a_gateway_config_runs_a_messages_suite_end_to_end(
    server_for: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = await server_for(message_stream(4, ttft_s=0.01, itl_s=0.002))
    monkeypatch.setenv("TRACKER_TEST_ANTHROPIC_KEY", "sk-ant-test")
    config = tmp_path / "gw.yaml"
    config.write_text(f"name: gw-anthropic\ntarget:\n  kind: openai\n  model: claude-x\n"
                      f"  base_url: {server.url}\n  api_key_env: TRACKER_TEST_ANTHROPIC_KEY\n",
                      encoding="utf-8")
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nworkloads:\n  - name: w\n    endpoint_type: messages\n"
                     "    prompts: {source: fixed, text: hello}\n    max_tokens: 4\n"
                     "    concurrency: 2\n    num_requests: 4\n", encoding="utf-8")
    engine = open_store(f"sqlite:///{tmp_path / 't.db'}")
    try:
        run = await asyncio.to_thread(execute_suite, engine, load_config(config), load_suite(suite))
    finally:
        engine.dispose()
    [workload] = run.workloads
    assert run.status.value == "completed"
    assert (workload.summary.completed, workload.summary.total_output_tokens) == (4, 16)
    assert workload.summary.output_tokens_source is TokenSource.USAGE
    assert all(s.path == "/v1/messages" for s in server.served)
    assert "sk-ant-test" not in json.dumps(dict(run.environment))
