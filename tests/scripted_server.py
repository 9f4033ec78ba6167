"""A real OpenAI-compatible HTTP server on 127.0.0.1 whose every byte and delay is scripted.

Each request is answered by the script a test supplies; the server records when each request
arrived and when each write happened, on the same monotonic clock the client uses, so tests can
compare the load generator's numbers with the server's truth.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    steps: list[tuple[float, bytes]] = field(default_factory=list)  # (sleep s, bytes to write)
    status: int = 200
    content_type: str = "text/event-stream"
    body: bytes | None = None  # a plain (non-streamed) body instead of steps
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers
    abort: bool = False  # after the steps, drop the connection without ending the response


@dataclass
class Served:
    received_at: float
    body: dict[str, Any]
    writes: list[float] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    path: str = ""
    raw: bytes = b""  # the request body exactly as it arrived


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


def chat_chunk(content: str | None = None, *, role: str | None = None,
               finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    event: dict[str, Any] = {"id": "x", "object": "chat.completion.chunk",
                             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        event["usage"] = usage
    return sse(event)


def usage_chunk(prompt: int, completion: int) -> bytes:
    return sse({"id": "x", "choices": [], "usage": {
        "prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion}})


def token_stream(tokens: int, *, ttft_s: float, itl_s: float, usage: bool = True,
                 prompt_tokens: int = 10) -> Reply:
    steps = [(0.0, chat_chunk("", role="assistant")), (ttft_s, chat_chunk("tok"))]
    steps += [(itl_s, chat_chunk("tok")) for _ in range(tokens - 1)]
    steps.append((0.0, chat_chunk(finish="length")))
    if usage:
        steps.append((0.0, usage_chunk(prompt_tokens, tokens)))
    steps.append((0.0, DONE))
    return Reply(steps)


class ScriptedServer:
    def __init__(self, script: Callable[[int, dict[str, Any]], Reply]) -> None:
        self.script = script
        self.served: list[Served] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/completions", self._handle)
        app.router.add_post("/v1/messages", self._handle)
        app.router.add_get("/v1/models", self._models)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def _models(self, _request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        served = Served(time.perf_counter(), json.loads(raw), headers=dict(request.headers),
                        path=request.path, raw=raw)
        index = len(self.served)
        self.served.append(served)
        reply = self.script(index, served.body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request, reply, served)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request, reply: Reply,
                      served: Served) -> web.StreamResponse:
        if reply.body is not None:
            return web.Response(status=reply.status, body=reply.body,
                                content_type=reply.content_type, headers=reply.headers)
        response = web.StreamResponse(status=reply.status,
                                      headers={"Content-Type": reply.content_type,
                                               **reply.headers})
        await response.prepare(request)
        for delay, data in reply.steps:
            if delay:
                await asyncio.sleep(delay)
            served.writes.append(time.perf_counter())
            await response.write(data)
        if reply.abort and request.transport is not None:
            request.transport.abort()
        return response


ServerFactory = Callable[[Callable[[int, dict[str, Any]], Reply]], Awaitable[ScriptedServer]]


@asynccontextmanager
async def scripted_servers() -> AsyncIterator[ServerFactory]:
    """Start scripted servers on demand; every one is stopped on exit."""
    servers: list[ScriptedServer] = []

    async def make(script: Callable[[int, dict[str, Any]], Reply]) -> ScriptedServer:
        server = ScriptedServer(script)
        await server.start()
        servers.append(server)
        return server

    try:
        yield make
    finally:
        for server in servers:
            await server.stop()
