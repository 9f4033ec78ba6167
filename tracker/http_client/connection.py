"""One HTTP/1.1 keep-alive connection, as an asyncio protocol that stamps and parses each read.

The load generator's hot path for plain HTTP straight to the endpoint, written for it rather than
borrowed. bench/loadgen.py measures why: aiohttp's response stream costs several Python calls per
HTTP chunk, and on Python 3.11 it writes a request body from a separately scheduled task. TLS and
proxied traffic go through aiohttp instead (``client.py``). What this connection does:

- A request (head and body serialised before timing) leaves in one ``transport.write``. Its send
  stamp is taken when the bytes are in the kernel: at once when the write went through, or when
  the transport's buffer has drained (``resume_writing``) for a body too big for one write.
- Each network read is stamped once in ``data_received`` (``PollClock``: one reading per
  event-loop pass), its chunked framing removed there, and the body handed to the response's
  ``sink`` (the SSE scanner) in the same callback, so no coroutine wakes per chunk and no read
  waits for one.
- The request's coroutine waits on one future, resolved when the response has ended or failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from tracker.http_client.sse import StreamError

Clock = Callable[[], float]
Sink = Callable[[bytes, float], None]  # (body bytes of one read, that read's stamp)

MAX_HEAD_BYTES = 64 * 1024
MAX_KEPT_BODY_BYTES = 1 << 20  # a non-streamed body (an error, a model list) is kept up to this

# body framing
_HEAD, _LENGTH, _CHUNKED, _TRAILERS, _UNTIL_CLOSE, _DONE = range(6)
_CRLF_NEXT = -1  # in a chunked body: the CRLF after a chunk's data is due


class PollClock:
    """One reading of the clock per event-loop pass, shared by every read handled in that pass.

    The loop hands out the reads that one poll returned one after another. Each was already
    there when the poll returned, so the first reading is the truest stamp for all of them, and
    the time spent parsing the earlier ones is not added to the later ones.
    """

    __slots__ = ("clock", "loop", "stamp")

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Clock) -> None:
        self.loop = loop
        self.clock = clock
        self.stamp: float | None = None

    def now(self) -> float:
        stamp = self.stamp
        if stamp is None:
            stamp = self.stamp = self.clock()
            self.loop.call_soon(self._next_pass)  # runs after this pass's I/O callbacks
        return stamp

    def _next_pass(self) -> None:
        self.stamp = None


class Handoff:
    """Hands finished answers to their waiting coroutines a few per event-loop pass.

    A finished answer wakes a coroutine that records it and sends the next request: tens of
    microseconds each. When many streams end together (a closed loop's requests all started at
    once), waking them all in one pass would hold up the next poll, and every read arriving
    meanwhile would be stamped late. Waking ``per_pass`` per pass lets the loop poll, and stamp,
    in between. The requests that wait are the ones about to be sent, not ones being timed.
    """

    __slots__ = ("loop", "per_pass", "queue", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop, per_pass: int = 4) -> None:
        self.loop = loop
        self.per_pass = per_pass
        self.queue: deque[tuple[asyncio.Future[Response], Response]] = deque()
        self.scheduled = False

    def put(self, done: asyncio.Future[Response], response: Response) -> None:
        self.queue.append((done, response))
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self._pump)

    def _pump(self) -> None:
        queue = self.queue
        for _ in range(min(self.per_pass, len(queue))):
            done, response = queue.popleft()
            if not done.done():  # not cancelled (a timeout) meanwhile
                done.set_result(response)
        if queue:
            self.loop.call_soon(self._pump)  # after the next poll
        else:
            self.scheduled = False


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    reason: str
    headers: dict[str, str]  # names in lower case; repeated headers joined with ", "
    body: bytes  # b"" when the body went to the sink; cut at MAX_KEPT_BODY_BYTES otherwise
    streamed: bool  # the body went to the sink


class StaleConnection(Exception):
    """A reused keep-alive connection closed before any byte of the answer: safe to retry."""


def parse_head(head: bytes) -> tuple[int, str, dict[str, str], bool]:
    """Status, reason, headers and HTTP/1.1-ness of a response head (without the blank line)."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise StreamError("bad_response", f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            raise StreamError("bad_response", f"not an HTTP header line: {line[:80]!r}")
        key = name.strip().lower().decode("latin-1")
        text = value.strip().decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
    return int(parts[1]), reason, headers, parts[0] == b"HTTP/1.1"


_CHUNK_HEAD = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;[^\r\n]*)?\r\n")  # size, extensions


class Http1Connection(asyncio.Protocol):
    """One keep-alive connection, one request at a time (``send``, then await ``done``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: PollClock,
                 handoff: Handoff | None = None) -> None:
        self.loop = loop
        self.clock = clock
        self.handoff = handoff
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.close_reason = "the server closed the connection"
        self.requests = 0  # answered on this connection so far
        self.done: asyncio.Future[Response] | None = None
        self.stamp: dict[str, float] = {}
        self._sink: Sink | None = None
        self._written = 0.0  # when the last request was handed to the transport
        self._reset_response()

    def _reset_response(self) -> None:
        self._phase = _HEAD
        self._rest = b""
        self._need = 0
        self._got_bytes = False
        self._status = 0
        self._reason = ""
        self._headers: dict[str, str] = {}
        self._keep_alive = False
        self._streaming = False
        self._kept: list[bytes] = []
        self._kept_size = 0

    # -- the asyncio protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):  # best effort: a request leaves in one write
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # pause_writing whenever anything stays buffered: resume_writing then says it has left
        self.transport.set_write_buffer_limits(high=0)  # type: ignore[union-attr]

    def resume_writing(self) -> None:
        if self.done is not None and not self.done.done() and "sent" not in self.stamp:
            self.stamp["sent"] = self.clock.clock()

    def data_received(self, data: bytes) -> None:
        now = self.clock.now()
        done = self.done
        if done is None or done.done():
            self._discard()  # bytes nobody asked for: this connection cannot be trusted
            return
        if not self._got_bytes:
            self._got_bytes = True
            self.stamp.setdefault("sent", self._written)  # answered before the buffer drained
        try:
            if self._phase == _HEAD:
                data = self._read_head(data)
            phase = self._phase
            if phase == _CHUNKED:
                self._read_chunked(data, now)
            elif phase == _LENGTH:
                self._read_length(data, now)
            elif phase == _UNTIL_CLOSE:
                self._deliver(data, now)
            elif phase == _TRAILERS:
                self._read_trailers(data)
            elif data:  # bytes after a complete answer: do not reuse this connection
                self._keep_alive = False
        except StreamError as exc:
            self._fail(exc)
            return
        if self._phase == _DONE:
            self._finish()

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        done = self.done
        if done is None or done.done() or self._phase == _DONE:  # (a handoff may be pending)
            return
        if self._phase == _UNTIL_CLOSE and exc is None:  # the close is the end of the body
            self._phase = _DONE
            self._keep_alive = False
            self._finish()
        elif not self._got_bytes and self.requests > 0 and (
                exc is None or isinstance(exc, ConnectionResetError | BrokenPipeError)):
            done.set_exception(StaleConnection())
        else:
            detail = f": {exc}" if exc is not None else ""
            where = "before answering" if not self._got_bytes else "in the middle of the answer"
            done.set_exception(StreamError("connection_reset",
                                           f"{self.close_reason} {where}{detail}"))

    # -- one request ---------------------------------------------------------------------------

    def send(self, data: bytes, sink: Sink | None,
             stamp: dict[str, float]) -> asyncio.Future[Response]:
        """Write one request, and set ``stamp['sent']`` once its bytes have left the client."""
        assert self.transport is not None
        self._reset_response()
        self._sink, self.stamp = sink, stamp
        self.done = done = self.loop.create_future()
        self.transport.write(data)
        self._written = now = self.clock.clock()
        if self.transport.get_write_buffer_size() == 0:
            stamp["sent"] = now  # all of it is in the kernel
        return done

    def abort(self, reason: str) -> None:
        self.close_reason = reason
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    @property
    def reusable(self) -> bool:
        return not self.closed and self._phase == _DONE and self._keep_alive

    # -- parsing -------------------------------------------------------------------------------

    def _read_head(self, data: bytes) -> bytes:
        """Parse the head (skipping 1xx answers), and return what follows it."""
        buffer = self._rest + data if self._rest else data
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_HEAD_BYTES:
                    raise StreamError("bad_response", "the response head is over 64 KiB")
                self._rest = buffer
                return b""
            status, reason, headers, http11 = parse_head(buffer[:end])
            buffer = buffer[end + 4:]
            if 100 <= status < 200:
                continue  # 100 Continue, 103 Early Hints: the answer follows
            break
        self._rest = b""
        self._status, self._reason, self._headers = status, reason, headers
        connection = headers.get("connection", "").lower()
        self._keep_alive = "close" not in connection if http11 else "keep-alive" in connection
        self._streaming = (self._sink is not None and status == 200
                           and "text/event-stream" in headers.get("content-type", ""))
        self._phase = self._framing(status, headers)
        return buffer

    def _framing(self, status: int, headers: dict[str, str]) -> int:
        if status in (204, 304):
            return _DONE
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._need = 0
            return _CHUNKED
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise StreamError("bad_response", f"Content-Length is not a number: {length!r}")
            self._need = int(length)
            return _LENGTH if self._need else _DONE
        self._keep_alive = False
        return _UNTIL_CLOSE

    def _read_length(self, data: bytes, now: float) -> None:
        if len(data) >= self._need:
            if len(data) > self._need:
                self._keep_alive = False  # more than announced: do not reuse
            data = data[:self._need]
            self._phase = _DONE
        self._need -= len(data)
        if data:
            self._deliver(data, now)

    def _read_chunked(self, data: bytes, now: float) -> None:
        buffer = self._rest + data if self._rest else data
        self._rest = b""
        size, pos, need, out = len(buffer), 0, self._need, []
        if need > 0:  # the rest of a chunk that began in an earlier read
            take = min(need, size)
            out.append(buffer[:take])
            pos, need = take, need - take
            if need == 0:
                need = _CRLF_NEXT
        if need == _CRLF_NEXT and pos < size:
            if size - pos < 2:
                self._rest, pos = buffer[pos:], size
            else:
                if not buffer.startswith(b"\r\n", pos):
                    raise StreamError("bad_response", "a chunk of the body is longer than announced")
                pos, need = pos + 2, 0
        head, startswith, append = _CHUNK_HEAD.match, buffer.startswith, out.append
        while need == 0 and pos < size:  # at a chunk-size line: the common case is a whole chunk
            match = head(buffer, pos)
            if match is None:
                end = buffer.find(b"\r\n", pos)
                if end >= 0:
                    raise StreamError("bad_response", f"not a chunk size: {buffer[pos:end][:40]!r}")
                if size - pos > 4096:
                    raise StreamError("bad_response", "a chunk-size line is over 4 KiB")
                self._rest = buffer[pos:]  # the line goes on in the next read
                break
            length = int(match.group(1), 16)
            start = match.end()
            if length == 0:
                self._phase = _TRAILERS
                self._read_trailers(buffer[start:])
                break
            stop = start + length
            if stop + 2 <= size:
                if not startswith(b"\r\n", stop):
                    raise StreamError("bad_response", "a chunk of the body is longer than announced")
                append(buffer[start:stop])
                pos = stop + 2
                continue
            append(buffer[start:stop])  # the chunk goes on in the next read
            if stop <= size:
                need, self._rest = _CRLF_NEXT, buffer[stop:]
            else:
                need = stop - size
            break
        self._need = need
        if out:
            self._deliver(out[0] if len(out) == 1 else b"".join(out), now)

    def _read_trailers(self, data: bytes) -> None:
        buffer = self._rest + data if self._rest else data
        if buffer.startswith(b"\r\n"):
            end = 2
        else:
            found = buffer.find(b"\r\n\r\n")
            end = found + 4 if found >= 0 else -1
        if end < 0:
            self._rest = buffer
            return
        if len(buffer) > end:
            self._keep_alive = False
        self._rest = b""
        self._phase = _DONE

    def _deliver(self, data: bytes, now: float) -> None:
        if not data:
            return
        if self._streaming:
            assert self._sink is not None
            self._sink(data, now)
        elif self._kept_size < MAX_KEPT_BODY_BYTES:
            self._kept.append(data[:MAX_KEPT_BODY_BYTES - self._kept_size])
            self._kept_size += len(self._kept[-1])

    # -- endings -------------------------------------------------------------------------------

    def _finish(self) -> None:
        done = self.done
        assert done is not None
        self.requests += 1
        body = b"".join(self._kept)
        self._kept = []
        self._sink = None
        response = Response(self._status, self._reason, self._headers, body, self._streaming)
        if self.handoff is not None:
            self.handoff.put(done, response)
        else:
            done.set_result(response)

    def _fail(self, exc: StreamError) -> None:
        done = self.done
        assert done is not None
        self._sink = None
        self.abort(str(exc))
        if not done.done():
            done.set_exception(exc)

    def _discard(self) -> None:
        self.abort("the server sent bytes outside an answer")
