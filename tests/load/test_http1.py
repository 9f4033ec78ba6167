"""The HTTP/1.1 response parser of tracker.http_client.connection, fed byte by byte through ``data_received``.

A recording transport stands in for the socket here: what is under test is pure parsing (framing,
keep-alive, stamps), and feeding reads by hand is the only way to put a read boundary at every byte.
tests/load/test_client.py drives the same protocol over real sockets.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.scripted_server import DONE, chat_chunk, usage_chunk
from tracker.http_client.connection import (
    MAX_HEAD_BYTES,
    Http1Connection,
    PollClock,
    Response,
    StaleConnection,
    parse_head,
)
from tracker.http_client.sse import StreamError


class RecordingTransport(asyncio.Transport):
    """Keeps what is written; ``buffered`` bytes stay in its buffer after each write."""

    def __init__(self, buffered: int = 0) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.aborted = False
        self.buffered = buffered
        self.limits: tuple[int | None, int | None] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.limits = (high, low)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def abort(self) -> None:
        self.aborted = True


@dataclass
class Exchange:
    """One request on a connection, and every call its sink got."""

    connection: Http1Connection
    transport: RecordingTransport
    done: asyncio.Future[Response]
    stamp: dict[str, float]
    reads: list[tuple[bytes, float]] = field(default_factory=list)

    def feed(self, *pieces: bytes) -> None:
        for piece in pieces:
            self.connection.data_received(piece)

    @property
    def streamed_body(self) -> bytes:
        return b"".join(data for data, _ in self.reads)

    def failure(self) -> StreamError:
        assert self.done.done(), "the answer is still pending"
        exc = self.done.exception()
        assert isinstance(exc, StreamError), repr(exc)
        return exc


def open_connection(clock: Callable[[], float] = time.perf_counter, *,
                    buffered: int = 0) -> tuple[Http1Connection, RecordingTransport]:
    loop = asyncio.get_running_loop()
    connection = Http1Connection(loop, PollClock(loop, clock))
    transport = RecordingTransport(buffered)
    connection.connection_made(transport)
    return connection, transport


REQUEST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


def send(connection: Http1Connection, transport: RecordingTransport, *,
         sink: bool = True) -> Exchange:
    reads: list[tuple[bytes, float]] = []
    stamp: dict[str, float] = {}
    done = connection.send(REQUEST, (lambda data, now: reads.append((data, now))) if sink else None,
                           stamp)
    return Exchange(connection, transport, done, stamp, reads)


def start(clock: Callable[[], float] = time.perf_counter, *, sink: bool = True) -> Exchange:
    connection, transport = open_connection(clock)
    return send(connection, transport, sink=sink)


def chunked(*parts: bytes, extension: bytes = b"", trailers: bytes = b"") -> bytes:
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(part), extension, part) for part in parts)
    return body + b"0\r\n" + trailers + b"\r\n"


SSE_CHUNKED_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n")
EVENTS = (chat_chunk("", role="assistant"), chat_chunk("Hello") + chat_chunk(" world" * 20),
          chat_chunk(finish="stop"), usage_chunk(5, 2), DONE)
PAYLOAD = b"".join(EVENTS)

CHUNKED_ANSWERS = {
    "plain": SSE_CHUNKED_HEAD + chunked(*EVENTS),
    "extensions": SSE_CHUNKED_HEAD + chunked(*EVENTS, extension=b';name="v w";x=1'),
    "trailers": SSE_CHUNKED_HEAD + chunked(*EVENTS, trailers=b"X-Checksum: abc\r\nX-More: 1\r\n"),
}


def test_the_sample_stream_has_chunk_sizes_of_one_two_and_three_hex_digits() -> None:
    assert {len(f"{len(event):x}") for event in EVENTS} == {1, 2, 3}


@pytest.mark.parametrize("name", sorted(CHUNKED_ANSWERS))
async def test_a_chunked_stream_split_at_every_byte_gives_the_same_body(name: str) -> None:
    raw = CHUNKED_ANSWERS[name]
    for cut in range(1, len(raw)):
        exchange = start()
        resolved: list[asyncio.Future[Response]] = []
        exchange.done.add_done_callback(resolved.append)
        exchange.feed(raw[:cut])
        assert not exchange.done.done(), f"resolved early at byte {cut}"
        exchange.feed(raw[cut:])
        await asyncio.sleep(0)  # let the done callbacks run
        assert exchange.streamed_body == PAYLOAD, f"split at byte {cut}"
        assert len(exchange.reads) <= 2  # at most one sink call per read
        assert len(resolved) == 1
        response = exchange.done.result()
        assert (response.status, response.streamed, response.body) == (200, True, b"")
        assert exchange.connection.reusable, f"split at byte {cut}"
        assert not exchange.transport.aborted


@pytest.mark.parametrize("name", sorted(CHUNKED_ANSWERS))
async def test_a_chunked_stream_split_in_three_gives_the_same_body(name: str) -> None:
    raw = CHUNKED_ANSWERS[name]
    cuts = range(1, len(raw), 13)
    for first, second in itertools.combinations(cuts, 2):
        exchange = start()
        exchange.feed(raw[:first], raw[first:second])
        assert not exchange.done.done()
        exchange.feed(raw[second:])
        assert exchange.streamed_body == PAYLOAD, f"split at bytes {first}, {second}"
        assert exchange.done.result().streamed
        assert exchange.connection.reusable


@pytest.mark.parametrize("name", sorted(CHUNKED_ANSWERS))
async def test_a_chunked_stream_with_a_one_byte_read_anywhere_gives_the_same_body(name: str) -> None:
    raw = CHUNKED_ANSWERS[name]
    for cut in range(1, len(raw) - 1):
        exchange = start()
        exchange.feed(raw[:cut], raw[cut:cut + 1], raw[cut + 1:])
        assert exchange.streamed_body == PAYLOAD, f"one-byte read at byte {cut}"
        assert exchange.done.result().streamed
        assert exchange.connection.reusable


async def test_a_chunked_stream_in_one_read_reaches_the_sink_in_one_call() -> None:
    exchange = start()
    exchange.feed(CHUNKED_ANSWERS["plain"])
    assert [data for data, _ in exchange.reads] == [PAYLOAD]


async def test_chunk_extensions_are_not_part_of_the_body() -> None:
    exchange = start()
    exchange.feed(SSE_CHUNKED_HEAD + b"5;name=v\r\nhello\r\n6;a=\"b;c\"\r\n world\r\n0;end=1\r\n\r\n")
    assert exchange.streamed_body == b"hello world"
    assert exchange.done.result().status == 200


async def test_trailers_end_the_answer_and_are_not_part_of_the_body() -> None:
    exchange = start()
    exchange.feed(SSE_CHUNKED_HEAD + b"5\r\nhello\r\n0\r\nX-Checksum: abc\r\n")
    assert not exchange.done.done()  # the trailer section has not ended yet
    exchange.feed(b"\r\n")
    assert exchange.streamed_body == b"hello"
    assert exchange.done.result().streamed
    assert exchange.connection.reusable


@pytest.mark.parametrize("size_line", [b"zz", b"", b"-5", b"5 5", b"5\x00"])
async def test_a_bad_chunk_size_is_a_bad_response(size_line: bytes) -> None:
    exchange = start()
    exchange.feed(SSE_CHUNKED_HEAD + size_line + b"\r\nhello\r\n0\r\n\r\n")
    error = exchange.failure()
    assert error.error_class == "bad_response"
    assert "not a chunk size" in str(error)
    assert exchange.transport.aborted and not exchange.connection.reusable


@pytest.mark.parametrize("size_line", [b"0x5", b"+5", b"1_0"])
async def test_a_chunk_size_that_is_not_plain_hex_digits_is_a_bad_response(size_line: bytes) -> None:
    # RFC 9112: chunk-size = 1*HEXDIG. int(line, 16) also takes "0x", "+" and "_" (bug).
    exchange = start()
    exchange.feed(SSE_CHUNKED_HEAD + size_line + b"\r\n" + b"a" * int(size_line, 16) + b"\r\n0\r\n\r\n")
    assert exchange.failure().error_class == "bad_response"


async def test_a_chunk_size_line_over_4_kib_is_a_bad_response() -> None:
    exchange = start()
    exchange.feed(SSE_CHUNKED_HEAD + b"5;" + b"x" * 5000)
    assert exchange.failure().error_class == "bad_response"


@pytest.mark.parametrize("pieces", [
    [b"3\r\nhello\r\n0\r\n\r\n"],  # in one read
    [b"3\r\nhel", b"lo\r\n0\r\n\r\n"],  # the excess in the next read
    [b"3\r\nhel", b"l", b"o\r\n0\r\n\r\n"],  # a single byte where the CRLF is due
    [b"3\r\nhello"],  # the data runs past the chunk's end in the read that holds it
])
async def test_chunk_data_longer_than_announced_is_a_bad_response(pieces: list[bytes]) -> None:
    exchange = start()
    exchange.feed(SSE_CHUNKED_HEAD, *pieces)
    error = exchange.failure()
    assert error.error_class == "bad_response"
    assert "longer than announced" in str(error)
    assert exchange.streamed_body in (b"", b"hel")  # never a byte beyond the announced 3
    assert exchange.transport.aborted


async def test_a_content_length_body_split_across_reads_is_kept_whole() -> None:
    body = b'{"object": "list", "data": [{"id": "m"}]}'
    exchange = start()
    exchange.feed(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                  % len(body) + body[:7], body[7:20])
    assert not exchange.done.done()
    exchange.feed(body[20:])
    response = exchange.done.result()
    assert (response.body, response.streamed) == (body, False)
    assert response.headers["content-type"] == "application/json"
    assert exchange.reads == []
    assert exchange.connection.reusable


async def test_a_content_length_event_stream_reaches_the_sink_read_by_read() -> None:
    exchange = start()
    exchange.feed(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n"
                  % len(PAYLOAD))
    for at in range(0, len(PAYLOAD), 100):
        exchange.feed(PAYLOAD[at:at + 100])
    assert [data for data, _ in exchange.reads] == [PAYLOAD[at:at + 100]
                                                     for at in range(0, len(PAYLOAD), 100)]
    assert exchange.done.result().streamed
    assert exchange.connection.reusable


async def test_bytes_beyond_the_content_length_make_the_connection_not_reusable() -> None:
    exchange = start(sink=False)
    exchange.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA")
    assert exchange.done.result().body == b"ok"
    assert not exchange.connection.reusable


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 204 No Content\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    SSE_CHUNKED_HEAD + chunked(b"data: 1\n\n"),
    SSE_CHUNKED_HEAD + chunked(b"data: 1\n\n", trailers=b"X-T: 1\r\n"),
])
async def test_bytes_after_the_end_of_an_answer_in_its_last_read_make_it_not_reusable(
    answer: bytes
) -> None:
    exchange = start()
    exchange.feed(answer + b"HTTP/1.1 200 OK\r\n")
    assert exchange.done.done() and not exchange.connection.reusable
    control = start()
    control.feed(answer)
    assert control.connection.reusable


@pytest.mark.parametrize("cut", [None, 5, 24, 25, 26, 40, 70])
async def test_informational_answers_before_the_real_one_are_skipped(cut: int | None) -> None:
    raw = (b"HTTP/1.1 100 Continue\r\n\r\n"
           b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
           b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 5\r\n\r\nhello")
    exchange = start()
    exchange.feed(*([raw] if cut is None else [raw[:cut], raw[cut:]]))
    response = exchange.done.result()
    assert (response.status, response.reason) == (200, "OK")
    assert "link" not in response.headers
    assert exchange.streamed_body == b"hello"


@pytest.mark.parametrize(("head", "reusable"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2", True),
    (b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2", True),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2", False),
    (b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 2", False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2", False),
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2", True),
])
async def test_only_a_kept_alive_answer_leaves_the_connection_reusable(head: bytes,
                                                                        reusable: bool) -> None:
    exchange = start(sink=False)
    exchange.feed(head + b"\r\n\r\nok")
    assert exchange.done.result().body == b"ok"
    assert exchange.connection.reusable is reusable


async def test_a_reused_connection_parses_the_next_answer_afresh() -> None:
    connection, transport = open_connection()
    first = send(connection, transport)
    first.feed(SSE_CHUNKED_HEAD + chunked(b"data: 1\n\n"))
    second = send(connection, transport, sink=False)
    second.feed(b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nnop")
    assert first.streamed_body == b"data: 1\n\n"
    assert (second.done.result().status, second.done.result().body) == (404, b"nop")
    assert transport.written == [REQUEST, REQUEST]
    assert connection.requests == 2


@pytest.mark.parametrize(("head", "sink"), [
    (b"HTTP/1.1 200 OK\r\nContent-Type: application/json", True),
    (b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/event-stream", True),
    (b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 3", True),
    (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream", False),
])
async def test_a_non_stream_answer_keeps_its_body_and_never_calls_the_sink(head: bytes,
                                                                           sink: bool) -> None:
    body = b'{"error": {"message": "engine died"}}'
    exchange = start(sink=sink)
    exchange.feed(head + b"\r\nTransfer-Encoding: chunked\r\n\r\n", chunked(body[:10], body[10:]))
    response = exchange.done.result()
    assert (response.body, response.streamed) == (body, False)
    assert exchange.reads == []


async def test_an_answer_without_framing_is_read_until_the_connection_closes() -> None:
    exchange = start()
    exchange.feed(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n", b"data: 2\n\n")
    assert not exchange.done.done()
    exchange.connection.connection_lost(None)
    response = exchange.done.result()
    assert response.streamed
    assert exchange.streamed_body == b"data: 1\n\ndata: 2\n\n"
    assert not exchange.connection.reusable


async def test_a_204_answer_has_no_body() -> None:
    exchange = start()
    exchange.feed(b"HTTP/1.1 204 No Content\r\n\r\n")
    assert exchange.done.result().status == 204
    assert exchange.connection.reusable


@pytest.mark.parametrize("exc", [None, ConnectionResetError(104, "Connection reset by peer")])
async def test_a_connection_lost_mid_answer_is_a_connection_reset(exc: Exception | None) -> None:
    exchange = start()
    exchange.feed(SSE_CHUNKED_HEAD + b"5\r\nhel")
    exchange.connection.connection_lost(exc)
    error = exchange.failure()
    assert error.error_class == "connection_reset"
    assert "in the middle of the answer" in str(error)
    if exc is not None:
        assert "Connection reset by peer" in str(error)
    assert exchange.streamed_body == b"hel"


async def test_a_connection_lost_in_the_head_is_a_connection_reset() -> None:
    exchange = start()
    exchange.feed(b"HTTP/1.1 200 OK\r\nContent-Ty")
    exchange.connection.connection_lost(None)
    assert exchange.failure().error_class == "connection_reset"


async def test_a_new_connection_lost_before_any_byte_is_a_connection_reset() -> None:
    exchange = start()
    exchange.connection.connection_lost(None)
    error = exchange.failure()
    assert error.error_class == "connection_reset"
    assert "before answering" in str(error)


@pytest.mark.parametrize("exc", [None, ConnectionResetError(104, "reset"), BrokenPipeError(32, "pipe")])
async def test_a_reused_connection_lost_before_any_byte_is_stale(exc: Exception | None) -> None:
    connection, transport = open_connection()
    first = send(connection, transport, sink=False)
    first.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    assert first.done.result().body == b"ok" and connection.reusable
    second = send(connection, transport, sink=False)
    connection.connection_lost(exc)
    assert isinstance(second.done.exception(), StaleConnection)


async def test_a_reused_connection_lost_with_another_error_is_not_retried_as_stale() -> None:
    connection, transport = open_connection()
    first = send(connection, transport, sink=False)
    first.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    second = send(connection, transport, sink=False)
    connection.connection_lost(TimeoutError("keepalive probe failed"))
    assert second.failure().error_class == "connection_reset"


@pytest.mark.parametrize("piece", [1000, 8192, MAX_HEAD_BYTES + 10])
async def test_a_head_over_64_kib_is_a_bad_response(piece: int) -> None:
    head = b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * (MAX_HEAD_BYTES + 1)
    exchange = start()
    for at in range(0, len(head), piece):
        exchange.feed(head[at:at + piece])
    error = exchange.failure()
    assert error.error_class == "bad_response"
    assert "64 KiB" in str(error)
    assert exchange.transport.aborted


async def test_a_head_just_under_64_kib_is_accepted() -> None:
    pad = b"a" * (MAX_HEAD_BYTES - 200)
    exchange = start(sink=False)
    for at in range(0, len(pad), 4096):
        exchange.feed((b"HTTP/1.1 200 OK\r\nX-Pad: " if at == 0 else b"") + pad[at:at + 4096])
    exchange.feed(b"\r\nContent-Length: 2\r\n\r\nok")
    response = exchange.done.result()
    assert response.headers["x-pad"] == pad.decode()
    assert response.body == b"ok"


async def test_a_sink_that_raises_fails_the_answer_and_aborts_the_connection() -> None:
    connection, transport = open_connection()
    calls: list[bytes] = []
    problem = StreamError("malformed_sse", "not an SSE field")

    def sink(data: bytes, now: float) -> None:
        calls.append(data)
        raise problem

    done = connection.send(REQUEST, sink, {})
    connection.data_received(SSE_CHUNKED_HEAD + b"5\r\nhello\r\n")
    assert done.exception() is problem
    assert transport.aborted and not connection.reusable
    connection.data_received(b"5\r\nagain\r\n0\r\n\r\n")  # whatever still comes is dropped
    assert calls == [b"hello"]


async def test_each_read_reaches_the_sink_with_the_stamp_of_its_own_pass() -> None:
    readings: list[float] = []
    ticks = itertools.count(1)

    def clock() -> float:
        readings.append(float(next(ticks)))
        return readings[-1]

    exchange = start(clock)
    assert exchange.stamp["sent"] == readings[0]  # the bytes left at once
    exchange.feed(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 27\r\n\r\n"
                  b"data: 1\n\n")
    await asyncio.sleep(0)  # the next pass of the loop
    exchange.feed(b"data: 2")  # two reads handled in one pass share one stamp
    exchange.feed(b"\n\n")
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # a pass without reads takes no reading
    exchange.feed(b"data: 3\n\n")
    assert readings == [1.0, 2.0, 3.0, 4.0]
    assert exchange.reads == [(b"data: 1\n\n", 2.0), (b"data: 2", 3.0), (b"\n\n", 3.0),
                              (b"data: 3\n\n", 4.0)]
    assert exchange.done.result().streamed


async def test_a_request_still_buffered_is_stamped_sent_when_the_buffer_drains() -> None:
    readings = iter([1.0, 2.0, 3.0])
    connection, transport = open_connection(lambda: next(readings), buffered=100)
    assert transport.limits == (0, None)  # pause_writing as soon as anything is buffered
    stamp: dict[str, float] = {}
    connection.send(REQUEST, None, stamp)
    assert "sent" not in stamp
    connection.resume_writing()
    assert stamp == {"sent": 2.0}


async def test_an_answer_before_the_buffer_drains_stamps_sent_at_the_write() -> None:
    readings = iter([1.0, 2.0, 3.0])
    connection, _ = open_connection(lambda: next(readings), buffered=100)
    stamp: dict[str, float] = {}
    done = connection.send(REQUEST, None, stamp)
    connection.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert done.result().status == 200
    assert stamp == {"sent": 1.0}


async def test_bytes_outside_an_answer_abort_the_connection() -> None:
    exchange = start(sink=False)
    exchange.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    assert exchange.connection.reusable
    exchange.feed(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
    assert exchange.transport.aborted and not exchange.connection.reusable


def test_parse_head_reads_status_reason_and_joins_repeated_headers() -> None:
    status, reason, headers, http11 = parse_head(
        b"HTTP/1.1 404 Not Found Here\r\nSet-Cookie: a=1\r\nX-Id:  7 \r\nset-cookie: b=2")
    assert (status, reason, http11) == (404, "Not Found Here", True)
    assert headers == {"set-cookie": "a=1, b=2", "x-id": "7"}
    assert parse_head(b"HTTP/1.0 200")[1:] == ("", {}, False)


@pytest.mark.parametrize(("head", "fragment"), [
    (b"ICY 200 OK", "not an HTTP/1.x status line"),
    (b"HTTP/2 200 OK", "not an HTTP/1.x status line"),
    (b"HTTP/1.1 OK", "not an HTTP/1.x status line"),
    (b"HTTP/1.1 200 OK\r\nno colon here", "not an HTTP header line"),
])
def test_parse_head_rejects_what_is_not_http_1(head: bytes, fragment: str) -> None:
    with pytest.raises(StreamError, match=fragment) as caught:
        parse_head(head)
    assert caught.value.error_class == "bad_response"


async def test_a_content_length_that_is_not_a_number_is_a_bad_response() -> None:
    exchange = start()
    exchange.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\n")
    error = exchange.failure()
    assert error.error_class == "bad_response"
    assert "12abc" in str(error)
