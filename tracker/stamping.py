"""Where the load generator's timestamps come from: the connection, not the reading coroutine.

- ``StampingConnector`` builds each connection with ``StampingProtocol``, aiohttp's response
  protocol plus a receive stamp taken in ``data_received`` (one clock reading per event-loop pass,
  ``PollClock``) and a ``sink`` that scans the body right there, without waking a coroutine per
  chunk;
- ``send_stamp_config`` stamps the moment aiohttp writes the request body
  (``on_request_chunk_sent``), not when the request was issued.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

Clock = Callable[[], float]


class PollClock:
    """One reading of the clock per event-loop pass, shared by every read handled in that pass.

    The loop hands out the reads that one poll returned one after another; each was already
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


class StampingProtocol(ResponseHandler):
    """aiohttp's response protocol, stamping each network read as it arrives.

    While a response is being read, ``sink`` is called right after each read has been parsed,
    with the read's stamp: the body is scanned there and then, without waking a coroutine per
    chunk, so the stamps of later reads do not wait for the event loop's other callbacks.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: PollClock) -> None:
        super().__init__(loop)
        self.clock = clock
        self.read_s = 0.0
        self.sink: Callable[[float], None] | None = None

    def data_received(self, data: bytes) -> None:
        if not data:  # aiohttp calls it with b"" to resume its parser: not a read
            ResponseHandler.data_received(self, data)
            return
        now = self.read_s = self.clock.now()
        ResponseHandler.data_received(self, data)  # (no super(): called per HTTP chunk)
        sink = self.sink
        if sink is not None:
            sink(now)


class StampingConnector(aiohttp.TCPConnector):
    def __init__(self, clock: Clock, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # aiohttp builds each connection's protocol with this factory (private, stable in 3.x);
        # a connection made otherwise is still measured, with the stamp taken on wake-up
        self._factory = functools.partial(  # type: ignore[assignment]
            StampingProtocol, loop=self._loop, clock=PollClock(self._loop, clock))


def send_stamp_config(clock: Clock) -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()

    async def on_chunk_sent(
        _session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: Any
    ) -> None:
        stamp = ctx.trace_request_ctx
        if isinstance(stamp, dict) and "sent" not in stamp:
            stamp["sent"] = clock()

    trace.on_request_chunk_sent.append(on_chunk_sent)
    return trace
