"""The load generator: streams OpenAI-compatible requests with aiohttp and times them.

Timing rules (see tracker.results for the definitions):
- the send stamp is taken when aiohttp has written the request body (``on_request_chunk_sent``),
  not when the request is issued, so the client's own queueing never counts as server time;
- every network read gets one timestamp, shared by all chunks that arrived in it;
- connections are kept alive and the pool is opened to the concurrency before timing starts.
A failed request is data: it becomes a ``RequestRecord`` with ``error_class`` set.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import aiohttp

from tracker.results import RequestRecord, TokenSource

Clock = Callable[[], float]
ProgressCallback = Callable[[int, int], None]

READ_BUFSIZE = 1 << 20  # long contexts must not stall the client on small reads
ERROR_TEXT_LIMIT = 300


@dataclass(frozen=True, slots=True)
class RequestSpec:
    body: bytes  # the JSON request body, serialised once before timing starts
    input_tokens_estimate: int  # the tracker tokenizer's count, used when the server reports none


@dataclass(frozen=True, slots=True)
class LoadPlan:
    path: str  # e.g. "/v1/chat/completions"
    warmup: Sequence[RequestSpec]
    measured: Sequence[RequestSpec]
    concurrency: int
    request_timeout_s: float = 600.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str  # without the trailing /v1
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # may hold a key: no repr

    def url(self, path: str) -> str:
        base = self.base_url.rstrip("/")
        if base.endswith("/v1") and path.startswith("/v1/"):
            path = path[3:]
        return base + path


@dataclass(frozen=True, slots=True)
class LoadOutcome:
    records: tuple[RequestRecord, ...]
    started_at: datetime
    ended_at: datetime
    duration_s: float
    complete: bool


class StreamError(Exception):
    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


@dataclass(slots=True)
class _StreamState:
    chunk_times: list[float] = field(default_factory=list)
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    done: bool = False
    end: float | None = None


def _send_stamp_config(clock: Clock) -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()

    async def on_chunk_sent(
        _session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: Any
    ) -> None:
        stamp = ctx.trace_request_ctx
        if isinstance(stamp, dict):
            stamp["sent"] = clock()

    trace.on_request_chunk_sent.append(on_chunk_sent)
    return trace


def open_session(concurrency: int, clock: Clock) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency,
                                     ttl_dns_cache=300)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        trace_configs=[_send_stamp_config(clock)],
        read_bufsize=READ_BUFSIZE,
        auto_decompress=False,
    )


def _content_of(choice: dict[str, Any]) -> str:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        for key in ("content", "reasoning_content", "reasoning"):
            text = delta.get(key)
            if text:
                return str(text)
        return ""
    text = choice.get("text")
    return str(text) if text else ""


def _error_message(payload: Any) -> str:
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            return str(error.get("message") or error)[:ERROR_TEXT_LIMIT]
        return str(error)[:ERROR_TEXT_LIMIT]
    return str(payload)[:ERROR_TEXT_LIMIT]


def _handle_event(state: _StreamState, payload: bytes, now: float) -> None:
    if payload == b"[DONE]":
        state.done = True
        return
    try:
        event = json.loads(payload)
    except ValueError:
        raise StreamError("malformed_sse", f"not JSON: {payload[:80]!r}") from None
    if not isinstance(event, dict):
        raise StreamError("malformed_sse", f"not a JSON object: {payload[:80]!r}")
    if "error" in event:
        raise StreamError("stream_error", _error_message(event))
    usage = event.get("usage")
    if isinstance(usage, dict):
        state.completion_tokens = usage.get("completion_tokens", state.completion_tokens)
        state.prompt_tokens = usage.get("prompt_tokens", state.prompt_tokens)
    choices = event.get("choices")
    if choices is None and not isinstance(usage, dict):
        raise StreamError("no_choices", f"event without 'choices': {payload[:80]!r}")
    for choice in choices or ():
        if _content_of(choice):
            state.chunk_times.append(now)
            break


async def _read_stream(response: aiohttp.ClientResponse, clock: Clock) -> _StreamState:
    state = _StreamState()
    pending = b""
    async for data in response.content.iter_any():
        now = clock()
        lines = (pending + data).split(b"\n")
        pending = lines.pop()
        for line in lines:
            line = line.strip()
            if line.startswith(b"data:"):
                _handle_event(state, line[5:].strip(), now)
        state.end = now
    if pending.strip().startswith(b"data:"):
        _handle_event(state, pending.strip()[5:].strip(), state.end or clock())
    return state


async def _check_response(response: aiohttp.ClientResponse) -> None:
    if response.status != 200:
        text = await response.text(errors="replace")
        try:
            message = _error_message(json.loads(text))
        except ValueError:
            message = text[:ERROR_TEXT_LIMIT]
        raise StreamError(f"http_{response.status}", message)
    content_type = response.headers.get("Content-Type", "")
    if "text/event-stream" not in content_type:
        text = await response.text(errors="replace")
        raise StreamError("not_a_stream",
                          f"expected an SSE stream, got {content_type or 'no content type'}: "
                          f"{text[:120]}")


def _finish_record(index: int, spec: RequestSpec, sent: float, state: _StreamState,
                   t0: float) -> RequestRecord:
    times = state.chunk_times
    if not state.done:
        raise StreamError("truncated_stream", "the stream ended without [DONE]")
    if not times:
        raise StreamError("empty_response", "the stream carried no content")
    if state.completion_tokens is not None:
        output, output_source = int(state.completion_tokens), TokenSource.USAGE
    else:
        output, output_source = len(times), TokenSource.CHUNKS
    if state.prompt_tokens is not None:
        prompt, prompt_source = int(state.prompt_tokens), TokenSource.USAGE
    else:
        prompt, prompt_source = spec.input_tokens_estimate, TokenSource.CLIENT
    end = state.end if state.end is not None else times[-1]
    return RequestRecord(
        index=index, start_s=sent - t0, ttft_s=times[0] - sent, e2el_s=end - sent,
        itl_s=tuple(b - a for a, b in itertools.pairwise(times)),
        output_tokens=output, output_tokens_source=output_source,
        input_tokens=prompt, input_tokens_source=prompt_source,
    )


def _failed_record(index: int, start_s: float, error_class: str, message: str) -> RequestRecord:
    return RequestRecord(index=index, start_s=start_s, ttft_s=None, e2el_s=None, itl_s=(),
                         output_tokens=None, output_tokens_source=None, input_tokens=None,
                         input_tokens_source=None, error_class=error_class,
                         error=message[:ERROR_TEXT_LIMIT])


async def run_request(session: aiohttp.ClientSession, endpoint: Endpoint, path: str,
                      spec: RequestSpec, *, index: int, t0: float, clock: Clock,
                      timeout_s: float) -> RequestRecord:
    """Send one streamed request; every failure comes back as a record, never an exception."""
    stamp: dict[str, float] = {"issued": clock()}
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
               **endpoint.headers}
    try:
        async with session.post(endpoint.url(path), data=spec.body, headers=headers,
                                trace_request_ctx=stamp,
                                timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
            await _check_response(response)
            state = await _read_stream(response, clock)
        return _finish_record(index, spec, stamp.get("sent", stamp["issued"]), state, t0)
    except StreamError as exc:
        return _failed_record(index, stamp.get("sent", stamp["issued"]) - t0, exc.error_class,
                              str(exc))
    except TimeoutError:
        return _failed_record(index, stamp["issued"] - t0, "timeout",
                              f"no complete answer within {timeout_s:g} s")
    except aiohttp.ClientConnectorError as exc:
        return _failed_record(index, stamp["issued"] - t0, "connection_refused", str(exc))
    except (aiohttp.ClientError, OSError) as exc:
        return _failed_record(index, stamp["issued"] - t0, "connection_error",
                              f"{type(exc).__name__}: {exc}")


class LoadGenerator:
    """Closed-loop load: ``concurrency`` workers, each sends its next request when one finishes.

    ``records`` fills as requests finish, so a caller that is cancelled can keep what was measured.
    """

    def __init__(self, endpoint: Endpoint, plan: LoadPlan, *, clock: Clock = time.perf_counter,
                 on_progress: ProgressCallback | None = None) -> None:
        self.endpoint = endpoint
        self.plan = plan
        self.clock = clock
        self.on_progress = on_progress
        self.records: list[RequestRecord] = []
        self.t0: float | None = None
        self.started_at: datetime | None = None

    async def run(self) -> LoadOutcome:
        async with open_session(self.plan.concurrency, self.clock) as session:
            await self._warm_pool(session)
            await self._run_phase(session, self.plan.warmup, keep=False)
            self.t0 = self.clock()
            self.started_at = datetime.now(UTC)
            await self._run_phase(session, self.plan.measured, keep=True)
            return self.outcome(complete=True)

    def outcome(self, *, complete: bool) -> LoadOutcome:
        """What has been measured so far (also after a cancellation)."""
        now = self.clock()
        t0 = self.t0 if self.t0 is not None else now
        ends = [r.start_s + r.e2el_s for r in self.records if r.e2el_s is not None]
        duration = max(ends, default=now - t0) if complete else now - t0
        records = tuple(sorted(self.records, key=lambda r: r.index))
        started = self.started_at or datetime.now(UTC)
        return LoadOutcome(records, started, datetime.now(UTC), max(duration, 0.0), complete)

    async def _warm_pool(self, session: aiohttp.ClientSession) -> None:
        """Open ``concurrency`` keep-alive connections before anything is timed."""
        async def touch() -> None:
            try:
                async with session.get(self.endpoint.url("/v1/models"),
                                       headers=self.endpoint.headers,
                                       timeout=aiohttp.ClientTimeout(total=30)) as response:
                    await response.read()
            except (aiohttp.ClientError, OSError, TimeoutError):
                pass  # a target without /v1/models still gets measured

        await asyncio.gather(*(touch() for _ in range(self.plan.concurrency)))

    async def _run_phase(self, session: aiohttp.ClientSession, specs: Sequence[RequestSpec],
                         *, keep: bool) -> None:
        if not specs:
            return
        next_index = iter(range(len(specs)))
        t0 = self.t0 if keep and self.t0 is not None else self.clock()

        async def worker() -> None:
            for index in next_index:
                record = await run_request(session, self.endpoint, self.plan.path, specs[index],
                                           index=index, t0=t0, clock=self.clock,
                                           timeout_s=self.plan.request_timeout_s)
                if keep:
                    self.records.append(record)
                    if self.on_progress is not None:
                        self.on_progress(len(self.records), len(specs))

        workers = min(self.plan.concurrency, len(specs))
        await asyncio.gather(*(worker() for _ in range(workers)))
