"""The load generator: streams OpenAI-compatible requests with aiohttp and times them.

Timing rules (see tracker.results for the definitions):
- the send stamp is taken when aiohttp writes the request body (``on_request_chunk_sent``), not
  when the request is issued: on Python 3.11 aiohttp writes the body from a separately scheduled
  task, so a stamp taken earlier would add the client's own queueing to TTFT;
- the receive stamp is taken by the connection's protocol when the network read arrives
  (``data_received``), not when the reading coroutine wakes up, so a busy event loop does not
  delay it; every chunk of one read shares that stamp;
- connections are kept alive and the pool is opened to the concurrency before timing starts;
- closed loop: ``concurrency`` workers, each sends its next request when one finishes;
  open loop: requests start at planned times (``LoadPlan.arrivals_s``), at most ``concurrency``
  in flight; the plan is kept whatever the server does, and the lateness is recorded.
A failed request is data: it becomes a ``RequestRecord`` with ``error_class`` set.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import json
import os
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import aiohttp

from tracker.clienthealth import HealthProbe
from tracker.results import ClientHealth, RequestRecord, TokenSource
from tracker.sse import (
    ERROR_TEXT_LIMIT,
    AnthropicScanner,
    StreamError,
    StreamScanner,
    error_message,
)
from tracker.stamping import StampingConnector, StampingProtocol, send_stamp_config

Clock = Callable[[], float]
ProgressCallback = Callable[[int, int], None]

READ_BUFSIZE = 1 << 20  # long contexts must not stall the client on small reads (vllm#39963)
MAX_WARM_CONNECTIONS = 1024


@dataclass(frozen=True, slots=True)
class RequestSpec:
    body: bytes  # the JSON request body, serialised once before timing starts
    input_tokens_estimate: int  # the tracker tokenizer's count, used when the server reports none


@dataclass(frozen=True, slots=True)
class LoadPlan:
    path: str  # e.g. "/v1/chat/completions"
    warmup: Sequence[RequestSpec]
    measured: Sequence[RequestSpec]
    concurrency: int  # closed loop: the workers; open loop: the most requests in flight
    request_timeout_s: float = 600.0
    arrivals_s: Sequence[float] | None = None  # open loop: planned starts, s after the origin
    duration_s: float | None = None  # closed loop: start no request after this (specs cycle)

    @property
    def open_loop(self) -> bool:
        return self.arrivals_s is not None

    @property
    def planned_requests(self) -> int:
        return len(self.arrivals_s) if self.arrivals_s is not None else len(self.measured)


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
    client: ClientHealth | None = None


def environment_configures_proxy() -> bool:
    """True when HTTP(S)_PROXY/ALL_PROXY or a netrc file could change how requests are sent."""
    netrc = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    return bool(urllib.request.getproxies()) or os.path.isfile(netrc)


def open_session(concurrency: int, clock: Clock) -> aiohttp.ClientSession:
    """A session for one workload: keep-alive pool of ``concurrency``, proxies from the env.

    ``trust_env`` (HTTP(S)_PROXY, NO_PROXY, netrc, as the OpenAI SDK honours them) is on whenever
    the environment sets any of them; aiohttp then looks them up in a worker thread for every
    request, so it stays off when there is nothing to find.
    """
    connector = StampingConnector(clock, limit=concurrency, limit_per_host=concurrency,
                                  ttl_dns_cache=300)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        trace_configs=[send_stamp_config(clock)],
        read_bufsize=READ_BUFSIZE,
        auto_decompress=False,
        trust_env=environment_configures_proxy(),
    )


async def _check_response(response: aiohttp.ClientResponse) -> None:
    if response.status != 200:
        text = await response.text(errors="replace")
        try:
            message = error_message(json.loads(text))
        except ValueError:
            message = text[:ERROR_TEXT_LIMIT]
        retry_after = response.headers.get("Retry-After")
        if retry_after is not None:
            message = f"Retry-After: {retry_after}; {message}"
        raise StreamError(f"http_{response.status}", message)
    content_type = response.headers.get("Content-Type", "")
    if "text/event-stream" not in content_type:
        text = await response.text(errors="replace")
        raise StreamError("not_a_stream",
                          f"expected an SSE stream, got {content_type or 'no content type'}: "
                          f"{text[:120]}")


async def _read_stream(response: aiohttp.ClientResponse, clock: Clock,
                       scanner: StreamScanner) -> StreamScanner:
    # the connection is released as soon as the body has arrived, which can be before we read;
    # the response keeps its protocol (private in aiohttp 3.x; without it: stamp on wake-up)
    protocol = getattr(response, "_protocol", None)
    if not isinstance(protocol, StampingProtocol):
        return await _read_stream_awake(response, clock, scanner)
    content = response.content

    def drain(now: float) -> None:  # runs inside data_received: must never raise
        if content.exception() is not None:
            return
        data = content.read_nowait()
        if data:
            try:
                scanner.feed(data, now)
            except StreamError as exc:
                content.set_exception(exc)  # wakes wait_eof below with it

    drain(protocol.read_s)  # what came with the headers
    protocol.sink = drain
    try:
        await content.wait_eof()  # raises what drain set (a StreamError) or the connection's
    finally:
        if protocol.sink is drain:  # a reused connection may already serve the next request
            protocol.sink = None
    drain(clock())
    failure = content.exception()
    if isinstance(failure, StreamError):
        raise failure
    scanner.finish()
    return scanner


async def _read_stream_awake(response: aiohttp.ClientResponse, clock: Clock,
                             scanner: StreamScanner) -> StreamScanner:
    """The plain path: each read stamped when the reading coroutine wakes up."""
    while data := await response.content.readany():
        scanner.feed(data, clock())
    scanner.finish()
    return scanner


def _finish_record(index: int, spec: RequestSpec, sent: float, scanner: StreamScanner,
                   t0: float, scheduled: float | None) -> RequestRecord:
    times = scanner.chunk_times
    if not scanner.done:
        marker = "message_stop" if isinstance(scanner, AnthropicScanner) else "[DONE]"
        raise StreamError("truncated_stream", f"the stream ended without {marker}")
    if not times:
        raise StreamError("empty_response", "the stream carried no content")
    if scanner.completion_tokens is not None:
        output, output_source = int(scanner.completion_tokens), TokenSource.USAGE
    else:
        output, output_source = len(times), TokenSource.CHUNKS
    if scanner.prompt_tokens is not None:
        prompt, prompt_source = int(scanner.prompt_tokens), TokenSource.USAGE
    else:
        prompt, prompt_source = spec.input_tokens_estimate, TokenSource.CLIENT
    end = scanner.end_s if scanner.end_s is not None else times[-1]
    return RequestRecord(
        index=index, start_s=sent - t0, ttft_s=times[0] - sent, e2el_s=end - sent,
        itl_s=tuple(b - a for a, b in itertools.pairwise(times)),
        output_tokens=output, output_tokens_source=output_source,
        input_tokens=prompt, input_tokens_source=prompt_source,
        scheduled_start_s=scheduled, output_chunks=len(times),
    )


def _failed_record(index: int, start_s: float, error_class: str, message: str,
                   scheduled: float | None) -> RequestRecord:
    return RequestRecord(index=index, start_s=start_s, ttft_s=None, e2el_s=None, itl_s=(),
                         output_tokens=None, output_tokens_source=None, input_tokens=None,
                         input_tokens_source=None, error_class=error_class,
                         error=message[:ERROR_TEXT_LIMIT], scheduled_start_s=scheduled)


def classify_connection_error(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connection_refused"
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError |
                  ConnectionResetError | BrokenPipeError):
        return "connection_reset"
    if isinstance(exc, OSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE):
        return "connection_reset"
    return "connection_error"


ANTHROPIC_VERSION = "2023-06-01"


def is_messages_path(path: str) -> bool:
    """The Anthropic Messages API (``/v1/messages``) rather than OpenAI's endpoints."""
    return path.rstrip("/").endswith("/messages")


def anthropic_headers(headers: dict[str, str]) -> dict[str, str]:
    """The Messages API's key header: ``x-api-key`` instead of ``Authorization: Bearer``."""
    out = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    token = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
    if token is not None:
        out["x-api-key"] = token.removeprefix("Bearer ").strip()
    out.setdefault("anthropic-version", ANTHROPIC_VERSION)
    return out


async def run_request(session: aiohttp.ClientSession, endpoint: Endpoint, path: str,
                      spec: RequestSpec, *, index: int, t0: float, clock: Clock,
                      timeout_s: float, scheduled_s: float | None = None,
                      stamp: dict[str, float] | None = None) -> RequestRecord:
    """Send one streamed request; every failure comes back as a record, never an exception.

    ``scheduled_s`` (open loop) is the planned start on the same origin as ``t0``; ``stamp``, when
    given, receives ``issued`` and ``sent`` (the caller measures its send lag from them).
    """
    stamp = stamp if stamp is not None else {}
    stamp["issued"] = clock()
    messages = is_messages_path(path)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
               **(anthropic_headers(endpoint.headers) if messages else endpoint.headers)}
    try:
        async with session.post(endpoint.url(path), data=spec.body, headers=headers,
                                trace_request_ctx=stamp,
                                timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
            await _check_response(response)
            scanner = await _read_stream(response, clock,
                                         AnthropicScanner() if messages else StreamScanner())
        return _finish_record(index, spec, stamp.get("sent", stamp["issued"]), scanner, t0,
                              scheduled_s)
    except StreamError as exc:
        return _failed_record(index, stamp.get("sent", stamp["issued"]) - t0, exc.error_class,
                              str(exc), scheduled_s)
    except TimeoutError:
        return _failed_record(index, stamp["issued"] - t0, "timeout",
                              f"no complete answer within {timeout_s:g} s", scheduled_s)
    except (aiohttp.ClientError, OSError) as exc:
        return _failed_record(index, stamp["issued"] - t0, classify_connection_error(exc),
                              f"{type(exc).__name__}: {exc}", scheduled_s)


class LoadGenerator:
    """Runs one ``LoadPlan``: warm-up (not measured), then the measured requests.

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
        self.probe = HealthProbe(clock)

    async def run(self) -> LoadOutcome:
        async with open_session(self.plan.concurrency, self.clock) as session:
            await self._warm_pool(session)
            await self._run_closed(session, self.plan.warmup, None, keep=False)
            self.t0 = self.clock()
            self.started_at = datetime.now(UTC)
            self.probe.start()
            try:
                if self.plan.arrivals_s is not None:
                    await self._run_open(session, self.plan.arrivals_s)
                else:
                    await self._run_closed(session, self.plan.measured, self.plan.duration_s,
                                           keep=True)
            finally:
                self.probe.stop()
            return self.outcome(complete=True)

    def outcome(self, *, complete: bool) -> LoadOutcome:
        """What has been measured so far (also after a cancellation)."""
        now = self.clock()
        t0 = self.t0 if self.t0 is not None else now
        ends = [r.start_s + r.e2el_s for r in self.records if r.e2el_s is not None]
        duration = max(ends, default=now - t0) if complete else now - t0
        records = tuple(sorted(self.records, key=lambda r: r.index))
        started = self.started_at or datetime.now(UTC)
        rate = self._planned_rate()
        client = self.probe.summary(open_loop=self.plan.open_loop, planned_rate_per_s=rate)
        return LoadOutcome(records, started, datetime.now(UTC), max(duration, 0.0), complete,
                           client)

    def _planned_rate(self) -> float | None:
        arrivals = self.plan.arrivals_s
        if not arrivals or len(arrivals) < 2 or arrivals[-1] <= 0:
            return None
        return (len(arrivals) - 1) / arrivals[-1]

    async def _warm_pool(self, session: aiohttp.ClientSession) -> None:
        """Open the keep-alive connections before anything is timed."""
        total = len(self.plan.warmup) + self.plan.planned_requests
        count = min(self.plan.concurrency, max(total, 1), MAX_WARM_CONNECTIONS)

        async def touch() -> None:
            try:
                async with session.get(self.endpoint.url("/v1/models"),
                                       headers=self.endpoint.headers,
                                       timeout=aiohttp.ClientTimeout(total=30)) as response:
                    await response.read()
            except (aiohttp.ClientError, OSError, TimeoutError):
                pass  # a target without /v1/models still gets measured

        await asyncio.gather(*(touch() for _ in range(count)))

    def _keep(self, record: RequestRecord) -> None:
        self.records.append(record)
        if self.on_progress is not None:
            self.on_progress(len(self.records), max(self.plan.planned_requests, len(self.records)))

    async def _run_closed(self, session: aiohttp.ClientSession, specs: Sequence[RequestSpec],
                          duration_s: float | None, *, keep: bool) -> None:
        if not specs:
            return
        t0 = self.t0 if keep and self.t0 is not None else self.clock()
        counter = itertools.count() if duration_s is not None else iter(range(len(specs)))

        async def worker() -> None:
            for index in counter:
                if duration_s is not None and self.clock() - t0 >= duration_s:
                    return
                stamp: dict[str, float] = {}
                record = await run_request(session, self.endpoint, self.plan.path,
                                           specs[index % len(specs)], index=index, t0=t0,
                                           clock=self.clock, timeout_s=self.plan.request_timeout_s,
                                           stamp=stamp)
                if keep:
                    self.probe.sent(stamp)
                    self._keep(record)

        workers = self.plan.concurrency if duration_s is not None else len(specs)
        await asyncio.gather(*(worker() for _ in range(min(self.plan.concurrency, workers))))

    async def _run_open(self, session: aiohttp.ClientSession, arrivals: Sequence[float]) -> None:
        assert self.t0 is not None
        t0, specs = self.t0, self.plan.measured
        slots = asyncio.Semaphore(self.plan.concurrency)
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[None]] = []

        async def one(index: int, planned: float) -> None:
            full = slots.locked()
            async with slots:
                # lag counts from the planned start, or from a freed slot: waiting for a
                # max_concurrency slot is the plan, not the client's lateness
                ready = max(self.clock(), t0 + planned) if full else t0 + planned
                stamp: dict[str, float] = {}
                record = await run_request(session, self.endpoint, self.plan.path,
                                           specs[index % len(specs)], index=index, t0=t0,
                                           clock=self.clock, timeout_s=self.plan.request_timeout_s,
                                           scheduled_s=planned, stamp=stamp)
            self.probe.sent(stamp, ready_s=ready)
            self._keep(record)

        try:
            for index, planned in enumerate(arrivals):
                delay = t0 + planned - self.clock()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(loop.create_task(one(index, planned)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
