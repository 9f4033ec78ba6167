"""Load-generator speed and timing error, against a server of our own and a minimal client.

Run: .venv/bin/python bench/loadgen.py [--quick] [--reps 3] [--attempts 8]
     [--part throughput|timing|scaling]

Part 1 (throughput): a zero-delay streaming server (a raw asyncio protocol on uvloop, every
response pre-built, 128 content chunks in vLLM's chunk format) is pinned to CPU 0 and each client
to CPU 1 where ``taskset`` exists. Three clients run alternately, ``--reps`` times each, at 1, 32
and 256 concurrent streams, each in a fresh process, all on uvloop with a keep-alive pool warmed
to the concurrency:
- ``tracker``: the tracker's ``LoadGenerator``;
- ``minimal``: the smallest aiohttp client that measures the same things (a timestamp per read,
  each SSE event parsed with ``json.loads`` for its content and usage) -- what a lean benchmark
  client written by hand looks like;
- ``bare``: the floor: aiohttp reading the bytes and counting ``data:`` lines, no parsing at all.
Printed: req/s, output tokens/s, CPU-ms per request (the client process's user+system time over
the measured phase) and the tracker's ratios to both references.

Part 2 (timing error): the same server with a known TTFT (100 ms) and ITL (20 ms), 128 tokens,
logs the true time of every write and of each request's arrival (``time.perf_counter``, i.e.
CLOCK_MONOTONIC, shared by both processes). Its answers are driven by loop timers, one callback
per write (no task or future per token), so its own work stays small and its arrival stamps
are not held up by its other streams; client and server run under SCHED_FIFO where allowed.
The tracker's per-request TTFT, TPOT, every ITL gap and output tokens are compared with that
truth at 1, 64 and 256 streams.

Part 3 (scaling): the tracker's ``LoadGenerator`` (1 worker, the reference, in the same run)
and ``WorkerPool`` on 2, 4, ... worker processes up to the client CPUs (all but CPU 0; on a
machine with one client CPU, 2 workers share it: the coordination overhead), req/s on the
zero-delay server at 256 streams, and the timing error against the timed server at 64 streams.
On a bigger machine (bench/gpu_check.py-style) the same command prints the full table.

Nothing is asserted: this prints tables. CPU counts and Python version are in the header.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tracker.http_client.connection import PollClock  # noqa: E402 (after the path above)

TOKENS = 128
_ID = re.compile(rb'"user":"bench-(\d+)"')


# --- the server ------------------------------------------------------------------------------

def _chunk(payload: bytes) -> bytes:
    data = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(content: str | None, finish: str | None = None) -> bytes:
    delta = {"content": content} if content is not None else {}
    return json.dumps({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
                       "model": "bench", "choices": [{"index": 0, "delta": delta,
                                                      "logprobs": None,
                                                      "finish_reason": finish}]},
                      separators=(",", ":")).encode()


ROLE = _chunk(json.dumps({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
                          "created": 1, "model": "bench", "choices": [
                              {"index": 0, "delta": {"role": "assistant", "content": ""},
                               "logprobs": None, "finish_reason": None}]},
                         separators=(",", ":")).encode())
TOKEN = _chunk(_event(" tok"))
TAIL = (_chunk(_event(None, "length"))
        + _chunk(json.dumps({"id": "chatcmpl-bench", "object": "chat.completion.chunk",
                             "created": 1, "model": "bench", "choices": [],
                             "usage": {"prompt_tokens": 16, "completion_tokens": TOKENS,
                                       "total_tokens": 16 + TOKENS}},
                            separators=(",", ":")).encode())
        + _chunk(b"[DONE]") + b"0\r\n\r\n")
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")
WHOLE = HEAD + ROLE + TOKEN * TOKENS + TAIL


def _json_response(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body))


class BenchServer(asyncio.Protocol):
    """HTTP/1.1 keep-alive, just enough of it; ``ttft_s is None`` = zero delay, all in one write."""

    truth: dict[int, dict[str, Any]] = {}  # noqa: RUF012 (one server per process)

    def __init__(self, ttft_s: float | None, itl_s: float, clock: PollClock) -> None:
        # arrival truth: one clock reading per loop pass, shared by every request read in it,
        # by the same rule (and code) as the tracker's own receive stamps
        self.ttft_s, self.itl_s, self.clock = ttft_s, itl_s, clock
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        now = self.clock.now()
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            match = re.search(rb"content-length:\s*(\d+)", head)
            length = int(match.group(1)) if match else 0
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            self._answer(head, body, now)

    def _answer(self, head: bytes, body: bytes, now: float) -> None:
        assert self.transport is not None
        if head.startswith(b"get /truth"):
            self.transport.write(_json_response(json.dumps(BenchServer.truth).encode()))
        elif head.startswith(b"get "):
            self.transport.write(_json_response(b'{"object":"list","data":[{"id":"bench"}]}'))
        elif self.ttft_s is None:
            self.transport.write(WHOLE)
        else:
            match = _ID.search(body)
            _Stream(self.transport, int(match.group(1)) if match else -1, now, self.ttft_s,
                    self.itl_s).start()


class _Stream:
    """One timed answer, driven by loop timers (no task, no future per token): the server's own
    work per write stays small, so its arrival stamps are not delayed by its other streams."""

    __slots__ = ("i", "itl_s", "loop", "received", "request_id", "transport", "ttft_s", "writes")

    def __init__(self, transport: asyncio.Transport, request_id: int, received: float,
                 ttft_s: float, itl_s: float) -> None:
        self.transport, self.request_id, self.received = transport, request_id, received
        self.ttft_s, self.itl_s = ttft_s, itl_s
        self.loop = asyncio.get_running_loop()
        self.writes: list[float] = []
        self.i = 0

    def start(self) -> None:
        self.transport.write(HEAD + ROLE)
        self._next()

    def _next(self) -> None:
        delay = self.received + self.ttft_s + self.i * self.itl_s - time.perf_counter()
        if delay > 0:
            self.loop.call_later(delay, self._write)
        else:
            self._write()

    def _write(self) -> None:
        self.writes.append(time.perf_counter())
        last = self.i == TOKENS - 1
        self.transport.write(TOKEN + TAIL if last else TOKEN)
        self.i += 1
        if not last:
            self._next()
        elif self.request_id >= 0:
            BenchServer.truth[self.request_id] = {"received": self.received,
                                                  "writes": self.writes}


def serve(ttft_s: float | None, itl_s: float) -> None:
    import uvloop

    async def main() -> None:
        loop = asyncio.get_running_loop()
        clock = PollClock(loop, time.perf_counter)
        server = await loop.create_server(lambda: BenchServer(ttft_s, itl_s, clock), "127.0.0.1",
                                          0, backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Event().wait()

    uvloop.run(main())


# --- the clients -----------------------------------------------------------------------------

def _body(index: int, stream_id: bool) -> bytes:
    body: dict[str, Any] = {"model": "bench", "messages": [{"role": "user", "content": "hi"}],
                            "max_tokens": TOKENS, "stream": True,
                            "stream_options": {"include_usage": True}}
    if stream_id:
        body["user"] = f"bench-{index}"
    return json.dumps(body, separators=(",", ":")).encode()


def _lean_read(data: bytes, pending: bytes, now: float, times: list[float]) -> tuple[bytes, int]:
    """The minimal client's parsing: every event through json.loads, content and usage."""
    lines = (pending + data).split(b"\n")
    pending = lines.pop()
    usage = -1
    for line in lines:
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            event = json.loads(line[6:])
            if event.get("usage"):
                usage = event["usage"]["completion_tokens"]
            for choice in event.get("choices") or ():
                if choice.get("delta", {}).get("content"):
                    times.append(now)
    return pending, usage


async def run_reference(url: str, concurrency: int, requests: int, lean: bool) -> dict[str, Any]:
    """A reference client: keep-alive pool warmed first, one timestamp per read."""
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, read_bufsize=1 << 20) as session:
        async def warm() -> None:
            async with session.get(url + "/v1/models") as response:
                await response.read()

        await asyncio.gather(*(warm() for _ in range(concurrency)))
        todo = iter(range(requests))
        ttfts: list[float] = []
        tokens = 0
        headers = {"Content-Type": "application/json"}

        async def worker() -> None:
            nonlocal tokens
            for index in todo:
                start = time.perf_counter()
                times: list[float] = []
                pending, usage = b"", -1
                async with session.post(url + "/v1/chat/completions", data=_body(index, False),
                                        headers=headers) as response:
                    async for data in response.content.iter_any():
                        now = time.perf_counter()
                        if lean:
                            pending, found = _lean_read(data, pending, now, times)
                            usage = found if found >= 0 else usage
                        else:
                            times.append(now)
                            tokens += data.count(b"data:")
                if times:
                    ttfts.append(times[0] - start)
                    tokens += usage if lean else 0

        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"ok": len(ttfts), "wall_s": wall, "cpu_s": cpu,
            "output_tokens": tokens if lean else len(ttfts) * TOKENS}


async def run_tracker(url: str, concurrency: int, requests: int,
                      stream_id: bool, workers: int = 1) -> dict[str, Any]:
    from tracker.load.generator import Endpoint, LoadGenerator, LoadPlan, RequestSpec
    from tracker.load.workers import WorkerPool

    specs = [RequestSpec(_body(i, stream_id), 16) for i in range(requests)]
    plan = LoadPlan("/v1/chat/completions", warmup=(), measured=specs, concurrency=concurrency)
    generator = (LoadGenerator(Endpoint(url), plan) if workers == 1
                 else WorkerPool(Endpoint(url), plan, workers))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    outcome = await generator.run()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    ok = [r for r in outcome.records if r.ok]
    client = outcome.client
    result: dict[str, Any] = {
        "ok": len(ok), "wall_s": wall, "cpu_s": cpu, "measured_s": outcome.duration_s,
        "output_tokens": sum(r.output_tokens or 0 for r in ok),
        "errors": sorted({r.error_class or "" for r in outcome.records} - {""}),
        "busiest_loop_cpu": None if client is None else client.cpu_fraction,
        "client_bound": None if client is None else client.client_bound,
    }
    if stream_id:
        result["records"] = [[r.index, r.start_s, r.ttft_s, r.tpot_s, list(r.itl_s),
                              r.output_tokens] for r in ok]
        result["t0"] = generator.t0
    return result


def client_main(kind: str, url: str, concurrency: int, requests: int, truth: bool) -> None:
    import uvloop

    if kind in ("minimal", "bare"):
        result = uvloop.run(run_reference(url, concurrency, requests, kind == "minimal"))
    else:  # "tracker", or "tracker-wN": N worker processes (tracker.load.workers)
        workers = int(kind.split("-w", 1)[1]) if "-w" in kind else 1
        result = uvloop.run(run_tracker(url, concurrency, requests, truth, workers))
    json.dump(result, sys.stdout)


# --- orchestration ---------------------------------------------------------------------------

def _pin(cpu: int | str, realtime: bool = False) -> list[str]:
    """taskset to one CPU, and a higher scheduling priority where we may raise it (root), so
    other work on a shared machine preempts the measurement less: ``nice -10`` for throughput,
    SCHED_FIFO (``chrt -f 20``) for the timing part, whose processes mostly sleep."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    prefix = ["nice", "-n", "-10"] if root else []
    if realtime and root and shutil.which("chrt"):
        prefix = ["chrt", "-f", "20"]
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return [*prefix, "taskset", "-c", str(cpu)]
    return prefix


class Server:
    def __init__(self, ttft_s: float | None, itl_s: float, realtime: bool = False) -> None:
        args = [sys.executable, __file__, "_serve", "--itl", str(itl_s)]
        if ttft_s is not None:
            args += ["--ttft", str(ttft_s)]
        self.process = subprocess.Popen([*_pin(0, realtime), *args], stdout=subprocess.PIPE,
                                        text=True)
        assert self.process.stdout is not None
        self.url = f"http://127.0.0.1:{self.process.stdout.readline().strip()}"

    def truth(self) -> dict[str, Any]:
        with urllib_open(self.url + "/truth") as response:
            data: dict[str, Any] = json.loads(response.read())
            return data

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def urllib_open(url: str) -> Any:
    import urllib.request

    return urllib.request.urlopen(url, timeout=30)


def run_client(kind: str, url: str, concurrency: int, requests: int,
               truth: bool = False, cpus: str = "1") -> dict[str, Any]:
    args = [sys.executable, __file__, "_client", kind, url, str(concurrency), str(requests)]
    if truth:
        args.append("--truth")
    # never SCHED_FIFO for a worker pool: its forkserver and workers inherit it, and one left
    # behind by a killed run spun at real-time priority, holding a CPU that SIGKILL could not
    # free until its policy was lowered (seen here; `chrt -o -p 0 PID` frees it)
    realtime = truth and not kind.startswith("tracker-w")
    done = subprocess.run([*_pin(cpus, realtime), *args], capture_output=True, text=True,
                          check=False, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"client {kind} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def part_throughput(levels: list[tuple[int, int]], reps: int) -> None:
    server = Server(None, 0.0)
    rows: list[list[str]] = []
    try:
        for concurrency, requests in levels:
            kinds = ("tracker", "minimal", "bare")
            runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
            run_client("tracker", server.url, concurrency, min(requests, 200))  # warm the server
            for _ in range(reps):
                for kind in kinds:
                    runs[kind].append(run_client(kind, server.url, concurrency, requests))
            med = {k: _medians(v) for k, v in runs.items()}
            for kind in kinds:
                m = med[kind]
                ratio = "" if kind == "tracker" else (
                    f"{med['tracker']['req_s'] / m['req_s']:.2f}x req/s, "
                    f"{med['tracker']['cpu_ms'] / m['cpu_ms']:.2f}x CPU")
                rows.append([str(concurrency), kind, f"{m['req_s']:.0f}", f"{m['tok_s']:.0f}",
                             f"{m['cpu_ms']:.3f}", f"{m['ok']:.0f}/{requests}", ratio])
    finally:
        server.stop()
    print(f"Part 1: zero-delay server, {TOKENS} tokens per request, median of {reps} runs each\n")
    print(table(["streams", "client", "req/s", "out tok/s", "CPU-ms/req", "ok",
                 "tracker vs this client"], rows))


def _medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {
        "req_s": statistics.median(r["ok"] / r["wall_s"] for r in runs),
        "tok_s": statistics.median(r["output_tokens"] / r["wall_s"] for r in runs),
        "cpu_ms": statistics.median(r["cpu_s"] * 1000 / max(r["ok"], 1) for r in runs),
        "ok": statistics.median(r["ok"] for r in runs),
    }


def _percentile(values: list[float], q: float) -> float:
    data = sorted(values)
    position = (len(data) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (position - low)


def _errors(result: dict[str, Any], truth: dict[str, Any]) -> dict[str, Any]:
    ttft: list[float] = []
    tpot: list[float] = []
    itl: list[float] = []
    arrival: list[float] = []
    read: list[float] = []
    token_mismatch = 0
    for index, start_s, ttft_s, tpot_s, gaps, tokens in result["records"]:
        true = truth[str(index)]
        writes = true["writes"]
        ttft.append(ttft_s - (writes[0] - true["received"]))
        sent = result["t0"] + start_s  # the TTFT error is the sum of these two lags:
        arrival.append(true["received"] - sent)  # client's send stamp -> server's arrival stamp
        read.append(sent + ttft_s - writes[0])  # server's first write -> client's read stamp
        tpot.append(tpot_s - (writes[-1] - writes[0]) / (len(writes) - 1))
        true_gaps = [b - a for a, b in itertools.pairwise(writes)]
        if len(gaps) == len(true_gaps):
            itl.extend(g - t for g, t in zip(gaps, true_gaps, strict=True))
        token_mismatch += tokens != len(writes)
    return {"n": len(result["records"]), "ttft": ttft, "tpot": tpot, "itl": itl,
            "token_mismatch": token_mismatch, "arrival": arrival, "read": read}


def _steal_ms() -> dict[int, float]:
    """Per CPU, the time the hypervisor ran something else while this VM's CPU wanted to run
    (``steal`` in /proc/stat); empty where there is no such file."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return {}
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    return {int(f[0][3:]): int(f[8]) * tick_ms for f in (line.split() for line in lines)
            if f[0].startswith("cpu") and f[0][3:].isdigit() and len(f) > 8}


def _timing_row(concurrency: int, requests: int, kind: str = "tracker",
                cpus: str = "1") -> tuple[list[float], dict[str, Any]]:
    server = Server(0.1, 0.02, realtime=True)
    try:
        run_client(kind, server.url, concurrency, concurrency, cpus=cpus)  # warm-up
        before = _steal_ms()
        result = run_client(kind, server.url, concurrency, requests, truth=True, cpus=cpus)
        after = _steal_ms()
        errors = _errors(result, server.truth())
    finally:
        server.stop()

    def ms(values: list[float], what: str) -> float:
        return (statistics.fmean(values) if what == "mean" else _percentile(values, 99)) * 1000

    stolen = [after.get(cpu, 0.0) - before.get(cpu, 0.0) for cpu in (1, 0)]
    row = [ms(errors["ttft"], "mean"), ms(errors["ttft"], "p99"), ms(errors["tpot"], "mean"),
           ms(errors["tpot"], "p99"), ms(errors["itl"], "mean"), ms(errors["itl"], "p99"),
           float(errors["token_mismatch"]), ms(errors["arrival"], "p99"),
           ms(errors["read"], "p99"), result["cpu_s"] * 1000 / max(result["ok"], 1), *stolen]
    return row, errors


CLEAN_STEAL_MS = 20.0  # a run is "clean" when neither CPU lost more than this to the hypervisor


def part_timing(levels: list[tuple[int, int]], reps: int, attempts: int) -> None:
    """Each level until ``reps`` clean runs (or ``attempts`` runs); every run is printed."""
    rows: list[list[str]] = []
    formats = ["{:+.3f}"] * 6 + ["{:.0f}"] + ["{:+.3f}"] * 2 + ["{:.2f}", "{:.0f}", "{:.0f}"]
    for concurrency, requests in levels:
        clean: list[list[float]] = []
        for attempt in range(attempts):
            row, errors = _timing_row(concurrency, requests)
            ok = max(row[-2:]) < CLEAN_STEAL_MS
            clean += [row] if ok else []
            rows.append([str(concurrency), f"run {attempt + 1}" + ("" if ok else " (steal)"),
                         str(errors["n"]), *(f.format(v) for f, v in zip(formats, row, strict=True))])
            if len(clean) >= reps:
                break
        if clean:
            medians = [statistics.median(column) for column in zip(*clean, strict=True)]
            rows.append([str(concurrency), f"median of {len(clean)} clean", "",
                         *(f.format(v) for f, v in zip(formats, medians, strict=True))])
    print("\nPart 2: tracker error against server truth (TTFT 100 ms, ITL 20 ms, "
          f"{TOKENS} tokens); ms, measured - true; each run a fresh server and client\n")
    print(table(["streams", "", "requests", "TTFT mean", "TTFT p99", "TPOT mean", "TPOT p99",
                 "ITL mean", "ITL p99", "token mismatches", "send->arrival p99",
                 "write->read p99", "CPU-ms/req", "stolen ms client", "stolen ms server"], rows))
    print("\nThe TTFT error is the sum of two lags: the client's send stamp to the server's "
          "arrival stamp\n(network, and the server's own loop) and the server's first write to "
          "the client's read stamp.\n'stolen ms': time the hypervisor took the client's (CPU 1) "
          "or the server's (CPU 0) CPU away\nduring the measured run (/proc/stat steal); a "
          "thread that is not running stamps nothing, so a\nrun with steal shows it in its "
          f"tail. A run is clean when both lost under {CLEAN_STEAL_MS:.0f} ms; the medians are "
          "over clean runs\n(the machine's noise, not the client's, is what the others "
          "measure).")


def _client_cpus() -> list[int]:
    """The CPUs the clients may use: all but CPU 0 (the server's) where there are two or more."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = list(range(os.cpu_count() or 1))
    return [c for c in cpus if c != 0] if len(cpus) > 1 else cpus


def _worker_levels(cpus: int) -> list[int]:
    """1, 2, 4, ... up to the client CPUs (and 2 on a machine with one client CPU: the
    coordination overhead, two workers sharing one core)."""
    levels, n = [1], 2
    while n <= max(2, cpus):
        levels.append(n)
        n *= 2
    return levels if cpus in levels or cpus < 2 else [*levels, cpus]


def part_scaling(concurrency: int, requests: int, timing_requests: int, reps: int) -> None:
    """req/s on the zero-delay server and timing error on the timed one, for 1, 2, 4, ...
    worker processes; 1 worker (today's single-process generator) is the reference."""
    cpus = _client_cpus()
    cpu_list = ",".join(map(str, cpus))
    levels = _worker_levels(len(cpus))
    kinds = [f"tracker-w{n}" if n > 1 else "tracker" for n in levels]
    server = Server(None, 0.0)
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    try:
        run_client("tracker", server.url, concurrency, min(requests, 500), cpus=cpu_list)
        for _ in range(reps):  # the levels alternate, so drift on a shared machine hits each
            for kind in kinds:
                runs[kind].append(run_client(kind, server.url, concurrency, requests,
                                             cpus=cpu_list))
    finally:
        server.stop()
    rate = {k: statistics.median(r["ok"] / r["measured_s"] for r in v) for k, v in runs.items()}
    timing = {kind: _timing_row(64, timing_requests, kind, cpu_list)[0] for kind in kinds}
    rows = []
    for n, kind in zip(levels, kinds, strict=True):
        busiest = statistics.median(r["busiest_loop_cpu"] or 0.0 for r in runs[kind])
        bound = sum(bool(r["client_bound"]) for r in runs[kind])
        t = timing[kind]
        rows.append([str(n), f"{rate[kind]:.0f}", f"{rate[kind] / rate['tracker']:.2f}x",
                     f"{statistics.median(r['ok'] for r in runs[kind]):.0f}/{requests}",
                     f"{busiest:.0%}", f"{bound}/{reps}", f"{t[0]:+.3f}", f"{t[1]:+.3f}",
                     f"{t[5]:+.3f}", f"{t[6]:.0f}"])
    print(f"\nPart 3 (scaling): the tracker on N worker processes, client CPUs {cpu_list} "
          f"(server on CPU 0); {concurrency} streams, {TOKENS} tokens each, median req/s of "
          f"{reps} runs (over the measured phase)\nagainst the zero-delay server; timing error "
          f"(ms, measured - true) at 64 streams against the timed server (TTFT 100 ms, ITL 20 "
          "ms), one run each\n")
    print(table(["workers", "req/s", "vs 1 worker", "ok", "busiest loop CPU", "client-bound",
                 "TTFT err mean", "TTFT err p99", "ITL err p99", "token mismatches"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--part", choices=("all", "throughput", "timing", "scaling"),
                        default="all")
    parser.add_argument("--attempts", type=int, default=8,
                        help="timing part: runs per level at most, to find --reps clean ones")
    args = parser.parse_args()
    scale = 4 if args.quick else 1
    pinned = ("server on CPU 0, client on CPU 1" if "taskset" in _pin(0)
              else "not pinned (no taskset)") + (", nice -10" if "nice" in _pin(0) else "") \
        + (", timing part under SCHED_FIFO" if "chrt" in _pin(0, True) else "")
    print(f"Python {platform.python_version()} ({sys.executable}), aiohttp {aiohttp.__version__}, "
          f"{os.cpu_count()} CPUs, {pinned}\n")
    if args.part in ("all", "throughput"):
        part_throughput([(1, 600 // scale), (32, 3000 // scale), (256, 4000 // scale)],
                        args.reps)
    if args.part in ("all", "timing"):
        part_timing([(1, 8 // min(scale, 2)), (64, 256 // scale), (256, 768 // scale)],
                    args.reps, max(args.attempts, args.reps))
    if args.part in ("all", "scaling"):
        part_scaling(256, 4000 // scale, 256 // scale, args.reps)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_serve":
        serve_args = argparse.ArgumentParser()
        serve_args.add_argument("_serve")
        serve_args.add_argument("--ttft", type=float)
        serve_args.add_argument("--itl", type=float, default=0.0)
        parsed = serve_args.parse_args()
        serve(parsed.ttft, parsed.itl)
    elif len(sys.argv) > 1 and sys.argv[1] == "_client":
        client_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
                    "--truth" in sys.argv)
    else:
        main()
