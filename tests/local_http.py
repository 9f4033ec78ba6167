"""Real HTTP servers on 127.0.0.1 (an ephemeral port, a thread each) for the tests that need a
receiver: a webhook endpoint, an image a hostile page would make the browser fetch; and the
tracker's own servers as a user starts them (``simulator_process``, ``wait_until_answers``)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.waiting import wait_for
from tracker.targets.launcher import find_free_port

PIXEL = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000"
                      "010001000002024401003b")  # a 1x1 GIF


class LocalServer:
    """``with LocalServer(Handler) as server:`` serves until the block ends (then shuts down)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def address(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def __enter__(self) -> LocalServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


class WebhookReceiver(LocalServer):
    """A Slack-like webhook on 127.0.0.1 that answers with the queued statuses, then 200, and
    keeps every body (``texts`` as received, ``bodies`` parsed)."""

    def __init__(self, statuses: Sequence[int] = ()) -> None:
        self.texts: list[str] = []
        self.paths: list[str] = []
        self.statuses = list(statuses)
        self.redirect_to: str | None = None  # answer 307 with this Location instead
        receiver = self

        class Handler(_Quiet):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                receiver.texts.append(self.rfile.read(length).decode("utf-8", "replace"))
                receiver.paths.append(self.path)
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                if receiver.redirect_to is not None:
                    self.send_response(307)  # method and body kept: a follower resends it
                    self.send_header("Location", receiver.redirect_to)
                    self.end_headers()
                    return
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

        super().__init__(Handler)
        self.url = self.address("/services/T000/B000/secret")

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(text) for text in self.texts]


class CountingServer(LocalServer):
    """Answers every GET with a one-pixel image and counts the paths asked for."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        counted = self.paths

        class Handler(_Quiet):
            def do_GET(self) -> None:
                counted.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/gif")
                self.send_header("Content-Length", str(len(PIXEL)))
                self.end_headers()
                self.wfile.write(PIXEL)

        super().__init__(Handler)
        self.url = self.address("/pixel.gif")


def wait_until_answers(url: str, process: subprocess.Popen[bytes],
                       timeout_s: float = 120.0) -> None:
    """Until ``url`` answers 200; fails at once if ``process`` (the server) exits first."""

    def answers() -> bool:
        assert process.poll() is None, f"{process.args} exited with {process.returncode}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    wait_for(answers, timeout_s, f"{url} to answer", interval_s=0.2)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def simulator_process(model: str, *flags: str) -> Iterator[str]:
    """``python -m tracker.sim MODEL --port P [flags]`` as a user starts it: its URL once
    /health answers; stopped when the block ends."""
    port = find_free_port()
    process = subprocess.Popen([sys.executable, "-m", "tracker.sim", model, "--port", str(port),
                                *flags], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answers(f"{url}/health", process)
        yield url
    finally:
        stop_process(process)
