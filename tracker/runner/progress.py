"""Progress on stderr: one updating line on a terminal, one line per workload elsewhere.
Every line goes through the one redaction (a workload's name and a server's words are outside
text)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tracker.inputs.traffic import describe_fallback
from tracker.redaction import say
from tracker.results import WorkloadResult


class ProgressPrinter:
    def __init__(self, stream: TextIO | None = None, label: str = "") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.label = label
        self._prefix = ""
        self._last_draw = 0.0

    def workload_started(self, name: str, position: int, count: int, requests: int) -> None:
        self._prefix = f"{self.label}[{position + 1}/{count}] {name}"
        if self.tty:
            self._draw(0, requests, force=True)
        else:
            say(f"{self._prefix}: {requests} requests ...", stream=self.stream)

    def request_done(self, done: int, total: int) -> None:
        if self.tty:
            self._draw(done, total, force=done == total)

    def workload_finished(self, result: WorkloadResult) -> None:
        s = result.summary
        rate = s.request_throughput_per_s or 0.0
        text = (f"{self._prefix}: {s.completed} ok, {s.failed} failed, "
                f"{rate:.1f} req/s in {s.duration_s:.1f} s")
        if self.tty:
            say("\r\x1b[2K" + text, stream=self.stream)
        else:
            say(text, stream=self.stream)

    def prompts_built(self, tokenizer: str, fallback: str | None) -> None:
        """One line when the prompt lengths are not in the model's tokenizer, and why."""
        if fallback is not None:
            say(self.label + describe_fallback(tokenizer, fallback), stream=self.stream)

    def server_checked(self, warnings: tuple[str, ...]) -> None:
        """One line per way the server contradicts the config, before the first workload."""
        for warning in warnings:
            say(f"{self.label}warning: {warning}", stream=self.stream)

    def _draw(self, done: int, total: int, *, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        width = 24
        filled = width * done // max(total, 1)
        bar = "#" * filled + "." * (width - filled)
        say(f"\r\x1b[2K{self._prefix} [{bar}] {done}/{total}", stream=self.stream, end="")
