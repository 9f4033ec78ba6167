"""The SSE scanner: the fast block path must count exactly what json.loads would, read by read."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tracker.http_client.sse import AnswerScanner, StreamError, StreamScanner


def event(obj: Any, *, compact: bool = True, crlf: bool = False) -> bytes:
    text = json.dumps(obj, separators=(",", ":") if compact else None)
    end = "\r\n\r\n" if crlf else "\n\n"
    return f"data: {text}{end}".encode()


def chunk(content: str | None, key: str = "content", **extra: Any) -> dict[str, Any]:
    delta = {} if content is None else {key: content}
    return {"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}], **extra}


def text_chunk(text: str) -> dict[str, Any]:
    return {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": text}]}


STREAMS = {
    "vllm-chat": [chunk("", role="assistant")] + [chunk(f" w{i}") for i in range(40)]
    + [chunk(None), {"id": "c", "choices": [], "usage": {"prompt_tokens": 3,
                                                         "completion_tokens": 40}}],
    "reasoning": [chunk("", role="assistant")] + [chunk("t", key="reasoning_content")] * 7
    + [chunk("a")] * 5 + [chunk("")] * 2,
    "completions": [text_chunk("x")] * 9 + [text_chunk("")],
    "usage-every-chunk": [chunk("a", usage={"completion_tokens": i + 1}) for i in range(6)],
    "quotes-in-content": [chunk('say "content":"x" data: {')] * 4,
}


def reference_counts(events: list[dict[str, Any]]) -> tuple[int, int | None]:
    chunks = 0
    tokens = None
    for obj in events:
        for choice in obj.get("choices") or []:
            delta = choice.get("delta")
            if (isinstance(delta, dict) and any(delta.get(k) for k in
                                                ("content", "reasoning_content")))\
                    or choice.get("text"):
                chunks += 1
        if isinstance(obj.get("usage"), dict):
            tokens = obj["usage"].get("completion_tokens", tokens)
    return chunks, tokens


def feed_in_reads(body: bytes, cuts: list[int],
                  scanner: StreamScanner | None = None) -> StreamScanner:
    scanner = scanner if scanner is not None else StreamScanner()
    start = 0
    for at in [*sorted(cuts), len(body)]:
        if at > start:
            scanner.feed(body[start:at], float(at))
            start = at
    scanner.finish()
    return scanner


@pytest.mark.parametrize("name", sorted(STREAMS))
@pytest.mark.parametrize("compact", [True, False])
@pytest.mark.parametrize("crlf", [False, True])
def test_block_scan_counts_like_json_for_any_read_boundaries(name: str, compact: bool,
                                                              crlf: bool) -> None:
    events = STREAMS[name]
    body = b"".join(event(e, compact=compact, crlf=crlf) for e in events) + b"data: [DONE]\n\n"
    expected_chunks, expected_tokens = reference_counts(events)
    rng = random.Random(f"{name}{compact}{crlf}")
    for cuts in ([], [len(body) // 2], rng.sample(range(1, len(body)), 12),
                 list(range(1, len(body), 97))):
        scanner = feed_in_reads(body, cuts)
        assert len(scanner.chunk_times) == expected_chunks, cuts
        assert scanner.completion_tokens == expected_tokens
        assert scanner.done


def reference_answer(events: list[dict[str, Any]]) -> str:
    parts = []
    for obj in events:
        for choice in obj.get("choices") or []:
            delta = choice.get("delta")
            parts.append((delta or {}).get("content") or "" if isinstance(delta, dict)
                         else choice.get("text") or "")
    return "".join(parts)


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_the_answer_scanner_counts_and_stamps_like_the_plain_one_and_keeps_the_text(
        name: str) -> None:
    events = STREAMS[name]
    body = b"".join(event(e) for e in events) + b"data: [DONE]\n\n"
    for cuts in ([], list(range(1, len(body), 97))):
        plain = feed_in_reads(body, cuts)
        answer = feed_in_reads(body, cuts, AnswerScanner())
        assert isinstance(answer, AnswerScanner)
        assert answer.chunk_times == plain.chunk_times
        assert (answer.completion_tokens, answer.done) == (plain.completion_tokens, plain.done)
        assert answer.answer == reference_answer(events)


def reference_text(events: list[dict[str, Any]]) -> str:
    """Every content chunk's text, reasoning included (what the token-count check counts)."""
    parts = []
    for obj in events:
        for choice in obj.get("choices") or []:
            delta = choice.get("delta")
            keys = ("content", "reasoning_content", "reasoning")
            parts += [delta.get(k) or "" for k in keys] if isinstance(delta, dict) \
                else [choice.get("text") or ""]
    return "".join(parts)


ESCAPES = [chunk("", role="assistant"), chunk('a "quoted" \\ back\\slash'), chunk("\u00e9t\u00e9"),
           chunk("line\nbreak\ttab"), chunk("😀 emoji"), chunk("\u0000nul")]


@pytest.mark.parametrize("name", [*sorted(STREAMS), "escapes"])
@pytest.mark.parametrize("compact", [True, False])
def test_the_received_text_is_every_content_chunk_whatever_the_read_boundaries(
        name: str, compact: bool) -> None:
    events = ESCAPES if name == "escapes" else STREAMS[name]
    body = b"".join(event(e, compact=compact) for e in events) + b"data: [DONE]\n\n"
    rng = random.Random(name)
    for cuts in ([], [len(body) // 2], rng.sample(range(1, len(body)), 12),
                 list(range(1, len(body), 7))):
        assert feed_in_reads(body, cuts).received_text == reference_text(events), cuts


def test_json_ensure_ascii_escapes_decode_to_the_text() -> None:
    body = b"".join(event(e) for e in ESCAPES) + b"data: [DONE]\n\n"  # json.dumps: \uXXXX
    scanner = feed_in_reads(body, list(range(1, len(body), 5)))
    assert scanner.received_text == 'a "quoted" \\ back\\slashétéline\nbreak\ttab😀 emoji\x00nul'


def test_the_answer_leaves_out_the_reasoning() -> None:
    body = b"".join(event(e) for e in STREAMS["reasoning"]) + b"data: [DONE]\n\n"
    scanner = feed_in_reads(body, [], AnswerScanner())
    assert isinstance(scanner, AnswerScanner) and scanner.answer == "aaaaa"
    assert len(scanner.chunk_times) == 12  # reasoning chunks are still tokens


def test_chunks_of_one_read_share_its_stamp_and_later_reads_get_theirs() -> None:
    first = event(chunk("", role="assistant")) + event(chunk("a")) + event(chunk("b"))
    scanner = StreamScanner()
    scanner.feed(first, 1.0)
    scanner.feed(event(chunk("c")), 2.5)
    assert scanner.chunk_times == [1.0, 1.0, 2.5]


@pytest.mark.parametrize(("tail", "error_class"), [
    (event({"error": {"message": "boom"}}), "stream_error"),
    (event({"id": "c", "choices": None}), "no_choices"),
    (event({"id": "c", "object": "x"}), "no_choices"),
    (b"data: {broken json}\n\n", "malformed_sse"),
    (b"garbage line\n\n", "malformed_sse"),
    (b"data: " + b"[" * 5000 + b"\n\n", "malformed_sse"),  # past any depth: not a crash
])
def test_a_bad_event_after_good_ones_is_caught_in_the_same_read(tail: bytes,
                                                                 error_class: str) -> None:
    good = b"".join(event(chunk("t")) for _ in range(5))
    scanner = StreamScanner()
    scanner.feed(event(chunk("first")), 0.0)  # the verified first event
    with pytest.raises(StreamError) as caught:
        scanner.feed(good + tail + good, 1.0)
    assert caught.value.error_class == error_class


def test_comments_and_event_fields_are_allowed() -> None:
    body = (b": keep-alive\n\nevent: message\n" + event(chunk("a")) + b"id: 7\n"
            + event(chunk("b")) + b"data: [DONE]\n\n")
    scanner = feed_in_reads(body, [])
    assert len(scanner.chunk_times) == 2 and scanner.done


def test_a_last_line_without_newline_is_still_read() -> None:
    scanner = StreamScanner()
    scanner.feed(event(chunk("a")) + b"data: [DONE]", 1.0)
    assert not scanner.done
    scanner.finish()
    assert scanner.done and len(scanner.chunk_times) == 1


def usage_event(**usage: Any) -> bytes:
    return event({"id": "c", "choices": [], "usage": {"prompt_tokens": 300,
                                                      "completion_tokens": 4, **usage}})


@pytest.mark.parametrize(("usage", "cached"), [
    ({"prompt_tokens_details": {"cached_tokens": 256}}, 256),  # vLLM, llama.cpp, SGLang
    ({"prompt_tokens_details": {"cached_tokens": 0}}, 0),  # a measured miss
    ({"prompt_tokens_details": {"cached_tokens": None}}, None),  # vLLM without the details flag
    ({"prompt_tokens_details": None}, None),
    ({"prompt_tokens_details": {"audio_tokens": 0}}, None),
    ({"prompt_tokens_details": {"cached_tokens": "256"}}, None),
    ({"prompt_tokens_details": {"cached_tokens": True}}, None),
    ({"prompt_tokens_details": {"cached_tokens": -1}}, None),
    ({}, None),
])
def test_cached_prompt_tokens_are_read_from_the_usage_details(usage: dict[str, Any],
                                                               cached: int | None) -> None:
    body = (b"".join(event(chunk(f" w{i}")) for i in range(4)) + usage_event(**usage)
            + b"data: [DONE]\n\n")
    for cuts in ([], list(range(1, len(body), 7))):
        scanner = feed_in_reads(body, cuts)
        assert (scanner.prompt_tokens, scanner.cached_tokens) == (300, cached)
        assert len(scanner.chunk_times) == 4 and scanner.done


def test_a_later_usage_without_details_keeps_the_cached_count() -> None:
    # continuous usage stats: every chunk has a usage; only some say what was cached
    body = (event(chunk("a", usage={"prompt_tokens": 300, "completion_tokens": 1,
                                    "prompt_tokens_details": {"cached_tokens": 288}}))
            + event(chunk("b", usage={"prompt_tokens": 300, "completion_tokens": 2}))
            + b"data: [DONE]\n\n")
    scanner = feed_in_reads(body, [])
    assert (scanner.completion_tokens, scanner.cached_tokens) == (2, 288)


def test_the_answer_scanner_reads_cached_tokens_too() -> None:
    body = (event(chunk("a")) + usage_event(prompt_tokens_details={"cached_tokens": 16})
            + b"data: [DONE]\n\n")
    scanner = feed_in_reads(body, [], AnswerScanner())
    assert scanner.cached_tokens == 16
