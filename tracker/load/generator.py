"""The load generator: streams OpenAI-compatible requests over its own HTTP/1.1 client and times them.

Timing rules (see tracker.results for the definitions):
- The send stamp is taken when the request's bytes are in the kernel
  (tracker.http_client.connection): one ``transport.write`` of head and body, stamped as it
  returns or, for a body bigger than the socket takes at once, when the buffer has drained. It
  is never taken when the request was merely issued.
- The receive stamp is taken by the connection's protocol when the network read arrives
  (``data_received``), not when a reading coroutine wakes up, so a busy event loop does not
  delay it. Every chunk of one read shares that stamp, and the body is scanned right there.
- Connections are kept alive, and the pool is opened to the concurrency before timing starts.
- In closed loop, each of ``concurrency`` workers sends its next request when one finishes.
  In open loop, requests start at planned times (``LoadPlan.arrivals_s``: a seeded schedule, or
  a trace's own times), with at most ``concurrency`` in flight. The plan is kept whatever the
  server does, and the lateness is recorded.
A failed request is data: it becomes a ``RequestRecord`` with ``error_class`` set. Multi-turn
sessions run on the same machinery (``tracker.load.sessions``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import operator
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tracker.http_client.client import WireClient
from tracker.http_client.connection import Response
from tracker.http_client.sse import (
    ERROR_TEXT_LIMIT,
    AnthropicScanner,
    StreamError,
    StreamScanner,
    error_message,
)
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.load.client_health import GcPause, HealthProbe
from tracker.results import ClientHealth, RequestRecord, TokenSource

Clock = Callable[[], float]
ProgressCallback = Callable[[int, int], None]
ScheduledJob = Callable[[int, float, float], Awaitable[None]]  # (index, planned, ready)

MAX_WARM_CONNECTIONS = 1024
TEXT_KEPT_REQUESTS = 2048  # the received text is kept (for the token-count check) for the
# requests numbered below this; later ones are checked against their chunk counts
WarmedCallback = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RequestSpec:
    body: bytes  # the JSON request body, serialised once before timing starts
    input_tokens_estimate: int  # the client's count (the length asked for, else words), used
    # when the server reports none
    requested_input_tokens: int | None = None  # what the suite asked for (kept on the record)
    arrival_s: float | None = None  # a trace's planned start, s after its first row


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


def compute_planned_rate(arrivals: Sequence[float] | None) -> float | None:
    """An open loop's planned mean rate, requests per second (None: closed loop, or too few)."""
    if not arrivals or len(arrivals) < 2 or arrivals[-1] <= 0:
        return None
    return (len(arrivals) - 1) / arrivals[-1]


def open_client(endpoint: Endpoint, clock: Clock) -> WireClient:
    """Keep-alive connections to ``endpoint`` (``async with``), with HTTP(S)_PROXY honoured."""
    return WireClient(endpoint.base_url, clock)


def request_head(client: WireClient, endpoint: Endpoint, path: str) -> bytes:
    """The POST head for ``path``, built once per client (the endpoint's headers are fixed)."""
    head = client.heads.get(path)
    if head is None:
        messages = is_messages_path(path)
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                   **(anthropic_headers(endpoint.headers) if messages else endpoint.headers)}
        head = client.heads[path] = client.prepare("POST", endpoint.url(path), headers)
    return head


def check_response(response: Response) -> None:
    """StreamError unless the answer is a 200 event stream (what went wrong, in the message)."""
    if response.status != 200:
        text = response.body.decode("utf-8", "replace")
        try:
            message = error_message(parse_untrusted_json(text))
        except UntrustedJSONError:
            message = text[:ERROR_TEXT_LIMIT]
        retry_after = response.headers.get("retry-after")
        if retry_after is not None:
            message = f"Retry-After: {retry_after}; {message}"
        raise StreamError(f"http_{response.status}", message)
    if not response.streamed:
        content_type = response.headers.get("content-type", "")
        text = response.body.decode("utf-8", "replace")
        raise StreamError("not_a_stream",
                          f"expected an SSE stream, got {content_type or 'no content type'}: "
                          f"{text[:120]}")


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
        itl_s=tuple(map(operator.sub, times[1:], times[:-1])),
        output_tokens=output, output_tokens_source=output_source,
        input_tokens=prompt, input_tokens_source=prompt_source,
        scheduled_start_s=scheduled, output_chunks=len(times),
        requested_input_tokens=spec.requested_input_tokens,
        cached_input_tokens=scanner.cached_tokens,
        output_text=scanner.received_text if index < TEXT_KEPT_REQUESTS else None,
    )


def _failed_record(index: int, spec: RequestSpec, start_s: float, error_class: str,
                   message: str, scheduled: float | None) -> RequestRecord:
    return RequestRecord(index=index, start_s=start_s, ttft_s=None, e2el_s=None, itl_s=(),
                         output_tokens=None, output_tokens_source=None, input_tokens=None,
                         input_tokens_source=None, error_class=error_class,
                         error=message[:ERROR_TEXT_LIMIT], scheduled_start_s=scheduled,
                         requested_input_tokens=spec.requested_input_tokens)


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


async def run_request(client: WireClient, endpoint: Endpoint, path: str,
                      spec: RequestSpec, *, index: int, t0: float, clock: Clock,
                      timeout_s: float, scheduled_s: float | None = None,
                      stamp: dict[str, float] | None = None,
                      scanner: StreamScanner | None = None) -> RequestRecord:
    """Send one streamed request: every failure comes back as a record, never an exception.

    ``scheduled_s`` (open loop) is the planned start on the same origin as ``t0``. ``stamp``,
    when given, receives ``issued`` and ``sent`` (the caller measures its send lag from them).
    ``scanner``, when given, reads the stream (one that keeps the answer's text, for a session).
    """
    stamp = stamp if stamp is not None else {}
    stamp["issued"] = clock()
    if scanner is None:
        scanner = AnthropicScanner() if is_messages_path(path) else StreamScanner()
    try:
        data = client.request(request_head(client, endpoint, path), spec.body)
        response = await client.exchange(data, sink=scanner.feed, timeout_s=timeout_s,
                                         stamp=stamp)
        check_response(response)
        scanner.finish()
        return _finish_record(index, spec, stamp.get("sent", stamp["issued"]), scanner, t0,
                              scheduled_s)
    except StreamError as exc:
        return _failed_record(index, spec, stamp.get("sent", stamp["issued"]) - t0,
                              exc.error_class, str(exc), scheduled_s)


class LoadGenerator:
    """Runs one ``LoadPlan``: warm-up (not measured), then the measured requests.

    ``records`` fills as requests finish, so a caller that is cancelled can keep what was measured.
    ``on_warmed``, when given, is awaited once the warm-up has ended and before the measured
    phase's clock starts (the server telemetry's first scrape: its counters then leave the
    warm-up out).
    """

    def __init__(self, endpoint: Endpoint, plan: LoadPlan, *, clock: Clock = time.perf_counter,
                 on_progress: ProgressCallback | None = None,
                 on_warmed: WarmedCallback | None = None) -> None:
        self.endpoint = endpoint
        self.plan = plan
        self.clock = clock
        self.on_progress = on_progress
        self.on_warmed = on_warmed
        self.records: list[RequestRecord] = []
        self.t0: float | None = None
        self.started_at: datetime | None = None
        self.probe = HealthProbe(clock)
        self.connections_opened = 0  # while measuring: beyond the warmed pool

    async def run(self) -> LoadOutcome:
        async with open_client(self.endpoint, self.clock) as client:
            await self._warm_pool(client)
            await self._run_warmup(client)
            if self.on_warmed is not None:
                await self.on_warmed()
            self.t0 = await self._wait_for_start()
            self.started_at = datetime.now(UTC)
            self.probe.start()
            gc_pause = GcPause()
            gc_pause.start()
            warmed = client.opened
            try:
                await self._run_measured(client)
            finally:
                gc_pause.stop()
                self.probe.stop()
                self.connections_opened = client.opened - warmed
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
        client = self.probe.summary(open_loop=self.plan.open_loop, planned_rate_per_s=rate,
                                    connections_opened=self.connections_opened,
                                    succeeded=sum(1 for r in records if r.ok))
        return LoadOutcome(records, started, datetime.now(UTC), max(duration, 0.0), complete,
                           client)

    async def _wait_for_start(self) -> float:
        """The clock origin of the measured phase: now (a worker process waits for its
        coordinator's, tracker.load.workers)."""
        return self.clock()

    def _closed_indices(self, count: int, duration_s: float | None) -> Iterator[int]:
        """The request indices this generator's closed loop sends (a worker process: its
        share)."""
        return itertools.count() if duration_s is not None else iter(range(count))

    @property
    def planned_requests(self) -> int:
        """The measured requests planned (for progress and the warmed pool)."""
        return self.plan.planned_requests

    @property
    def warmup_requests(self) -> int:
        return len(self.plan.warmup)

    async def _run_warmup(self, client: WireClient) -> None:
        await self._run_closed(client, self.plan.warmup, None, keep=False)

    async def _run_measured(self, client: WireClient) -> None:
        if self.plan.arrivals_s is not None:
            await self._run_open(client, self.plan.arrivals_s)
        else:
            await self._run_closed(client, self.plan.measured, self.plan.duration_s, keep=True)

    def _planned_rate(self) -> float | None:
        return compute_planned_rate(self.plan.arrivals_s)

    def _pool_size(self) -> int:
        """The most requests in flight at once: the connections to warm."""
        return self.plan.concurrency

    async def _warm_pool(self, client: WireClient) -> None:
        """Open the keep-alive connections before anything is timed."""
        total = self.warmup_requests + self.planned_requests
        count = min(self._pool_size(), max(total, 1), MAX_WARM_CONNECTIONS)
        try:
            probe = client.prepare("GET", self.endpoint.url("/v1/models"),
                                   self.endpoint.headers) + b"\r\n"
        except StreamError:
            return  # the measured requests will say what is wrong with the headers

        async def touch() -> None:
            with contextlib.suppress(StreamError):  # a target without /v1/models is measured too
                await client.exchange(probe, sink=None, timeout_s=30, stamp={})

        await asyncio.gather(*(touch() for _ in range(count)))

    def _keep(self, record: RequestRecord) -> None:
        self.records.append(record)
        if self.on_progress is not None:
            self.on_progress(len(self.records), max(self.planned_requests, len(self.records)))

    async def _run_closed(self, client: WireClient, specs: Sequence[RequestSpec],
                          duration_s: float | None, *, keep: bool) -> None:
        if not specs:
            return
        t0 = self.t0 if keep and self.t0 is not None else self.clock()
        counter = self._closed_indices(len(specs), duration_s)

        async def worker() -> None:
            for index in counter:
                if duration_s is not None and self.clock() - t0 >= duration_s:
                    return
                stamp: dict[str, float] = {}
                record = await run_request(client, self.endpoint, self.plan.path,
                                           specs[index % len(specs)], index=index, t0=t0,
                                           clock=self.clock, timeout_s=self.plan.request_timeout_s,
                                           stamp=stamp)
                if keep:
                    self.probe.sent(stamp)
                    self._keep(record)

        workers = self.plan.concurrency if duration_s is not None else len(specs)
        await asyncio.gather(*(worker() for _ in range(min(self.plan.concurrency, workers))))

    async def _run_open(self, client: WireClient, arrivals: Sequence[float]) -> None:
        assert self.t0 is not None
        t0, specs = self.t0, self.plan.measured

        async def one(index: int, planned: float, ready: float) -> None:
            stamp: dict[str, float] = {}
            record = await run_request(client, self.endpoint, self.plan.path,
                                       specs[index % len(specs)], index=index, t0=t0,
                                       clock=self.clock, timeout_s=self.plan.request_timeout_s,
                                       scheduled_s=planned, stamp=stamp)
            self.probe.sent(stamp, ready_s=ready)
            self._keep(record)

        await self._schedule(arrivals, one)

    async def _schedule(self, arrivals: Sequence[float], job: ScheduledJob) -> None:
        """Run ``job(index, planned, ready)`` at each planned start, at most ``concurrency`` at
        once, where ``ready`` is when it could start (for the send lag)."""
        assert self.t0 is not None
        t0 = self.t0
        slots = asyncio.Semaphore(self.plan.concurrency)
        loop = asyncio.get_running_loop()
        tasks: list[asyncio.Task[None]] = []

        async def one(index: int, planned: float) -> None:
            full = slots.locked()
            async with slots:
                # lag counts from the planned start, or from a freed slot: waiting for a
                # max_concurrency slot is the plan, not the client's lateness
                ready = max(self.clock(), t0 + planned) if full else t0 + planned
                await job(index, planned, ready)

        try:
            for index, planned in enumerate(arrivals):
                # never early: the loop's timers (uvloop's are whole milliseconds) may wake a
                # little before the planned start, which would shorten the latency from it
                while (delay := t0 + planned - self.clock()) > 0:
                    await asyncio.sleep(delay)
                tasks.append(loop.create_task(one(index, planned)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
