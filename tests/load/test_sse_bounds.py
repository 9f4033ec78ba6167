"""A stream's line is bounded: a server that sends a 100 MB ``data:`` line without a newline fails
its requests as ``sse_line_too_long`` (not ``timeout``) and costs the tracker no more memory than
the bound, measured as the peak RSS of a real ``tracker bench`` against a real local server."""

from __future__ import annotations

import json
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.local_http import LocalServer
from tracker.http_client.sse import MAX_LINE_BYTES, StreamError, StreamScanner

LINE_BYTES = 100 * 1024 * 1024  # what the attack sent on each stream
STREAMS = 8
PEAK_RSS_LIMIT_BYTES = 150 * 1024 * 1024
READ_BYTES = 64 * 1024
MEBIBYTE = b"x" * (1024 * 1024)


def test_a_line_past_the_bound_fails_the_stream_before_it_is_held() -> None:
    scanner = StreamScanner()
    scanner.feed(b"data: ", 0.0)
    read = b"x" * READ_BYTES
    with pytest.raises(StreamError) as raised:
        for number in range(LINE_BYTES // READ_BYTES):
            scanner.feed(read, float(number))
    assert raised.value.error_class == "sse_line_too_long"
    assert "without a newline" in str(raised.value)
    assert number * READ_BYTES <= MAX_LINE_BYTES  # refused at the bound, not at the end
    assert len(scanner.pending) <= MAX_LINE_BYTES


def test_a_long_line_within_the_bound_is_still_read() -> None:
    text = "w" * (MAX_LINE_BYTES // 2)
    event = b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode()
    scanner = StreamScanner()
    for start in range(0, len(event), READ_BYTES):
        scanner.feed(event[start:start + READ_BYTES], 1.0)
    scanner.feed(b"\n\ndata: [DONE]\n\n", 2.0)
    assert scanner.done and len(scanner.chunk_times) == 1
    assert scanner.received_text == text


class _EndlessLine(BaseHTTPRequestHandler):
    """Every chat request: a 200 event stream of one 100 MB ``data:`` line, then the close."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _nothing(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._nothing()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not self.path.endswith("/chat/completions"):
            self._nothing()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            self.wfile.write(b"data: ")
            for _ in range(LINE_BYTES // len(MEBIBYTE)):
                self.wfile.write(MEBIBYTE)
        except OSError:
            pass  # the client hung up: what a bounded client does
        self.close_connection = True


# ``python -m tracker ARGS`` that writes its peak RSS (VmHWM, bytes) to argv[1] as it exits. Not
# getrusage: Linux carries the parent's high-water mark into a child across fork and exec, so
# a child of a big test process would report the test process's peak.
REPORTING_PEAK_RSS = """\
import atexit, runpy, sys
out = sys.argv[1]
def report() -> None:
    for line in open("/proc/self/status", encoding="ascii"):
        if line.startswith("VmHWM:"):
            open(out, "w", encoding="ascii").write(str(int(line.split()[1]) * 1024))
atexit.register(report)
sys.argv = ["tracker", *sys.argv[2:]]
runpy.run_module("tracker", run_name="__main__", alter_sys=True)
"""


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux's /proc")
def test_a_100_mb_line_at_8_streams_fails_them_in_bounded_memory(tmp_path: Path) -> None:
    requests, output, peak = (tmp_path / name for name in ("requests.jsonl", "output.txt",
                                                            "peak_rss_bytes"))
    with LocalServer(_EndlessLine) as server, output.open("wb") as sink:
        bench = subprocess.run(
            [sys.executable, "-c", REPORTING_PEAK_RSS, str(peak), "bench", "--base-url",
             server.address(""), "--model", "m", "--num-prompts", str(STREAMS),
             "--max-concurrency", str(STREAMS), "--timeout", "30", "--save-requests",
             str(requests), "--quiet"],
            stdout=sink, stderr=subprocess.STDOUT, timeout=120, check=False)
    peak_rss_bytes = int(peak.read_text())
    said = output.read_text(encoding="utf-8", errors="replace")
    records = [json.loads(line) for line in requests.read_text().splitlines()]
    assert bench.returncode == 3, said  # nothing completed: could not measure
    assert "Traceback" not in said
    assert [r["error_class"] for r in records] == ["sse_line_too_long"] * STREAMS
    assert peak_rss_bytes < PEAK_RSS_LIMIT_BYTES, f"peak RSS {peak_rss_bytes / 2**20:.0f} MiB"
