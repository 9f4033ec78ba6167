"""The load generator against a real scripted HTTP server: definitions and error classes."""

from __future__ import annotations

import json
import time

import pytest

from tests.scripted_server import (
    DONE,
    Reply,
    ScriptedServer,
    ServerFactory,
    chat_chunk,
    sse,
    token_stream,
    usage_chunk,
)
from tracker.load.generator import (
    Endpoint,
    LoadGenerator,
    LoadPlan,
    RequestSpec,
    open_client,
    run_request,
)
from tracker.results import TokenSource
from tracker.targets.launcher import find_free_port


def spec(estimate: int = 7) -> RequestSpec:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    return RequestSpec(json.dumps(body).encode(), estimate)


async def one(server: ScriptedServer, *, timeout_s: float = 10.0):  # type: ignore[no-untyped-def]
    clock = time.perf_counter
    endpoint = Endpoint(server.url)
    async with open_client(endpoint, clock) as client:
        return await run_request(client, endpoint, "/v1/chat/completions", spec(),
                                 index=0, t0=0.0, clock=clock, timeout_s=timeout_s)


async def test_ttft_is_measured_from_send_to_first_content(scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(8, ttft_s=0.05, itl_s=0.01))
    record = await one(server)
    assert record.ok, record.error
    served = server.served[0]
    true_ttft = served.writes[1] - served.received_at  # the server's own clock: the truth
    assert true_ttft >= 0.05
    assert record.ttft_s == pytest.approx(true_ttft, abs=0.005)
    assert record.ttft_s >= true_ttft - 0.002  # never earlier than the server's own truth


async def test_role_only_first_chunk_is_not_a_token(scripted: ServerFactory) -> None:
    reply = Reply([(0.0, chat_chunk("", role="assistant")), (0.08, chat_chunk("a")),
                   (0.0, chat_chunk(finish="stop")), (0.0, DONE)])
    server = await scripted(lambda i, b: reply)
    record = await one(server)
    assert record.ttft_s is not None and record.ttft_s >= 0.07
    assert record.output_tokens == 1 and record.output_tokens_source is TokenSource.CHUNKS


async def test_chunks_in_one_read_share_a_timestamp(scripted: ServerFactory) -> None:
    burst = chat_chunk("a") + chat_chunk("b") + chat_chunk("c")
    reply = Reply([(0.0, chat_chunk("", role="assistant")), (0.02, burst),
                   (0.05, chat_chunk("d")), (0.0, usage_chunk(5, 4)), (0.0, DONE)])
    server = await scripted(lambda i, b: reply)
    record = await one(server)
    assert len(record.itl_s) == 3
    assert record.itl_s[0] == 0.0 and record.itl_s[1] == 0.0
    assert record.itl_s[2] == pytest.approx(0.05, abs=0.02)


async def test_usage_in_the_finish_chunk_is_used(scripted: ServerFactory) -> None:
    reply = Reply([(0.01, chat_chunk("x")), (0.01, chat_chunk("y")),
                   (0.0, chat_chunk(finish="length", usage={"prompt_tokens": 11,
                                                            "completion_tokens": 5})),
                   (0.0, DONE)])
    server = await scripted(lambda i, b: reply)
    record = await one(server)
    assert record.output_tokens == 5 and record.output_tokens_source is TokenSource.USAGE
    assert record.input_tokens == 11 and record.input_tokens_source is TokenSource.USAGE


async def test_missing_usage_falls_back_to_chunks_and_says_so(scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(6, ttft_s=0.0, itl_s=0.0, usage=False))
    record = await one(server)
    assert record.output_tokens == 6 and record.output_tokens_source is TokenSource.CHUNKS
    assert record.input_tokens == 7 and record.input_tokens_source is TokenSource.CLIENT


async def test_tpot_excludes_the_first_token(scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(11, ttft_s=0.05, itl_s=0.01))
    record = await one(server)
    writes = server.served[0].writes  # role, 11 tokens, finish, usage, [DONE]
    true_tpot = (writes[-1] - writes[1]) / 10
    assert record.tpot_s == pytest.approx(true_tpot, abs=0.002)
    assert record.tpot_s == pytest.approx((record.e2el_s - record.ttft_s) / 10)
    assert record.output_tokens == 11 and record.ttft_s > 0.05 - 0.002


@pytest.mark.parametrize(("reply", "error_class", "fragment"), [
    (Reply(status=500, content_type="application/json",
           body=json.dumps({"error": {"message": "engine exploded"}}).encode()),
     "http_500", "engine exploded"),
    (Reply(status=401, content_type="application/json",
           body=b'{"error": {"message": "invalid api key"}}'), "http_401", "invalid api key"),
    (Reply([(0.0, chat_chunk("a")), (0.0, sse({"error": {"message": "oom"}}))]),
     "stream_error", "oom"),
    (Reply([(0.0, chat_chunk("a")), (0.0, b"data: {not json\n\n")]), "malformed_sse", "not JSON"),
    (Reply([(0.0, chat_chunk("a"))]), "truncated_stream", "[DONE]"),
    (Reply([(0.0, sse({"id": "x", "object": "weird"})), (0.0, DONE)]), "no_choices", "choices"),
    (Reply(content_type="application/json", body=b'{"object": "error"}'), "not_a_stream",
     "application/json"),
    (Reply([(0.0, chat_chunk(finish="stop")), (0.0, DONE)]), "empty_response", "no content"),
    (Reply(status=429, content_type="application/json", headers={"Retry-After": "7"},
           body=b'{"error": {"message": "slow down"}}'), "http_429", "Retry-After: 7"),
    (Reply(status=503, content_type="text/html", body=b"<html>bad gateway</html>"),
     "http_503", "bad gateway"),
    (Reply([(0.0, chat_chunk("a")), (0.0, chat_chunk("b"))], abort=True), "connection_reset",
     ""),
    (Reply([(0.0, chat_chunk("a")), (0.0, b"event: ping\nretry 5\n\n"), (0.0, DONE)]),
     "malformed_sse", "not an SSE field"),
    (Reply([(0.0, chat_chunk("a")), (0.0, sse({"id": "x", "choices": None})), (0.0, DONE)]),
     "no_choices", "choices"),
    (Reply([(0.0, chat_chunk("", role="assistant"))] + [(0.0, chat_chunk("t"))] * 5
           + [(0.0, sse({"error": {"message": "engine died"}})), (0.0, DONE)]),
     "stream_error", "engine died"),
])
async def test_each_failure_is_a_record_with_its_class(
    scripted: ServerFactory, reply: Reply, error_class: str, fragment: str
) -> None:
    server = await scripted(lambda i, b: reply)
    record = await one(server)
    assert not record.ok
    assert record.error_class == error_class
    assert fragment in (record.error or "")
    assert record.ttft_s is None and record.output_tokens is None


async def test_a_slow_server_is_a_timeout_record(scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(3, ttft_s=1.0, itl_s=0.0))
    record = await one(server, timeout_s=0.2)
    assert record.error_class == "timeout"


async def test_a_closed_port_is_a_connection_refused_record() -> None:
    port = find_free_port()  # nothing listens there
    clock = time.perf_counter
    endpoint = Endpoint(f"http://127.0.0.1:{port}")
    async with open_client(endpoint, clock) as client:
        record = await run_request(client, endpoint, "/v1/chat/completions", spec(), index=0,
                                   t0=0.0, clock=clock, timeout_s=5)
    assert record.error_class == "connection_refused"


async def test_closed_loop_keeps_concurrency_and_excludes_warmup(scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(4, ttft_s=0.01, itl_s=0.005))
    plan = LoadPlan("/v1/chat/completions", warmup=[spec()] * 3, measured=[spec()] * 20,
                    concurrency=4)
    seen: list[tuple[int, int]] = []
    outcome = await LoadGenerator(Endpoint(server.url), plan,
                                  on_progress=lambda d, t: seen.append((d, t))).run()
    assert len(server.served) == 23
    assert server.max_in_flight == 4
    assert len(outcome.records) == 20 and all(r.ok for r in outcome.records)
    assert [r.index for r in outcome.records] == list(range(20))
    assert seen[-1] == (20, 20)
    assert outcome.complete and outcome.duration_s > 0
    assert min(r.start_s for r in outcome.records) >= 0


async def test_usage_and_chunk_counts_are_both_kept(scripted: ServerFactory) -> None:
    reply = Reply([(0.0, chat_chunk("ab")), (0.01, chat_chunk("cd")),
                   (0.0, chat_chunk(finish="length", usage={"prompt_tokens": 3,
                                                            "completion_tokens": 4})),
                   (0.0, DONE)])  # two chunks carrying two tokens each (speculative decoding)
    server = await scripted(lambda i, b: reply)
    record = await one(server)
    assert record.output_tokens == 4 and record.output_tokens_source is TokenSource.USAGE
    assert record.output_chunks == 2 and len(record.itl_s) == 1


async def test_an_echoed_model_that_differs_is_not_an_error(scripted: ServerFactory) -> None:
    event = {"id": "x", "model": "another-model", "choices": [{"index": 0, "text": "hi"}]}
    reply = Reply([(0.0, sse(event)), (0.0, sse(event)), (0.0, usage_chunk(2, 2)), (0.0, DONE)])
    server = await scripted(lambda i, b: reply)
    record = await one(server)
    assert record.ok and record.output_tokens == 2 and record.output_chunks == 2


def test_endpoint_appends_v1_once() -> None:
    assert Endpoint("https://taotoken.net/api").url("/v1/models") == \
        "https://taotoken.net/api/v1/models"
    assert Endpoint("http://h:1/v1/").url("/v1/models") == "http://h:1/v1/models"


def test_endpoint_repr_never_shows_the_key() -> None:
    endpoint = Endpoint("http://h", {"Authorization": "Bearer sk-secret-value"})
    assert "sk-secret" not in repr(endpoint)


async def test_an_event_longer_than_any_read_buffer_is_one_chunk(scripted: ServerFactory) -> None:
    # a 300 KB content chunk (a long context echoed back, or a big logprobs payload) spans many
    # network reads; the client must neither stall nor fail on it (vllm#39963)
    huge = "x" * 300_000
    reply = Reply([(0.0, chat_chunk("a")), (0.01, chat_chunk(huge)), (0.01, chat_chunk("b")),
                   (0.0, usage_chunk(4, 3)), (0.0, DONE)])
    server = await scripted(lambda i, b: reply)
    record = await one(server)
    assert record.ok, record.error
    assert record.output_chunks == 3 and record.output_tokens == 3
    assert len(record.itl_s) == 2
