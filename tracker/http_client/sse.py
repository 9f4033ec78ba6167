"""Server-sent events of an OpenAI-compatible stream, scanned per network read.

What the metrics need from a stream is small: which reads carried how many content chunks, the
text they carried (for the token-count check, ``tracker.targets.output_tokens``), the server's
``usage``, whether ``[DONE]`` came, and whether anything was wrong. So a read is scanned as a
block, not event by event:

- The fast path: a block whose every event is ``data: {…}`` with a ``choices`` list, and which
  holds no ``"usage"``, ``"error"`` or ``[DONE]``, is checked with one regular expression and
  counted with byte searches. A content chunk is a ``content``/``text``/``reasoning`` value that
  is not the empty string, and its escaped text is kept as bytes and decoded once, at the end.
- Everything else (the first block of a stream, usage, errors, ``[DONE]``, comments, anything the
  fast path does not recognise) is parsed line by line with ``parse_untrusted_json``.
Both paths give the same counts, and tests/load/test_sse.py checks them against each other.
A line is held until its newline comes, up to ``MAX_LINE_BYTES``: a server that goes on past
that without one fails the request (``sse_line_too_long``) instead of filling the memory.

A multi-turn session whose next request carries the model's answer reads that turn's stream with
an ``AnswerScanner`` (``AnthropicAnswerScanner`` for the Messages API): every event parsed, the
content deltas joined. Only those turns pay for it. Single-turn streams keep the fast path.
"""

from __future__ import annotations

import re
from typing import Any

from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.redaction import redact_text

ERROR_TEXT_LIMIT = 300
# The longest SSE line kept while waiting for its newline: a real server's event is a few KiB
# (a whole answer with its logprobs in one event, some hundred KiB); past this, the stream is
# failed (``sse_line_too_long``) rather than held in memory.
MAX_LINE_BYTES = 4 << 20

_BLOCK = re.compile(rb"(?:data: ?\{[^\n]*\}\r?\n|\r?\n)*")  # object events and blank lines
_CHOICES = re.compile(rb'"choices"\s*:\s*\[')
# a non-empty content value; the group is its JSON-escaped text (escapes never span two values,
# so escaped parts joined are the escaped whole)
_CONTENT = re.compile(rb'"(?:content|text|reasoning_content|reasoning)"\s*:\s*"(?!")'
                      rb'([^"\\]*(?:\\.[^"\\]*)*)"')
_TEXT_KEYS = ("content", "reasoning_content", "reasoning")


class StreamError(Exception):
    """A stream that cannot be measured, whose ``error_class`` names the kind (data, not a crash).

    The message quotes what the server (or the network) said, so it is redacted here, once, before
    it can become a stored request error, a run's reason or a printed line.
    """

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(redact_text(message))
        self.error_class = error_class


def error_message(payload: Any) -> str:
    """The human part of an OpenAI-style error body (or a ``detail``), cut to a stored length."""
    if isinstance(payload, dict):
        error = payload.get("error", payload)
        if isinstance(error, dict):
            return str(error.get("message") or error.get("detail") or error)[:ERROR_TEXT_LIMIT]
        return str(error)[:ERROR_TEXT_LIMIT]
    return str(payload)[:ERROR_TEXT_LIMIT]


def _cached_tokens(usage: dict[str, Any], before: int | None) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens`` (vLLM with --enable-prompt-tokens-details,
    llama.cpp, SGLang), or ``before`` when the usage does not carry a count (absent, null, not an
    integer): the server did not say, which is not 0."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(cached, int) and not isinstance(cached, bool) and cached >= 0:
        return cached
    return before


def _values_of(choice: Any) -> list[Any]:
    """What one choice of an event carries where content goes (answer and reasoning alike, or
    a completion's text). A truthy one makes the choice a content chunk."""
    if not isinstance(choice, dict):
        return []
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return [delta.get(key) for key in _TEXT_KEYS]
    return [choice.get("text")]


def join_received_text(parts: list[bytes | str]) -> str | None:
    """The text of a stream's parts: the fast path's JSON-escaped bytes and the parsed events'
    strings, in order, or None when an escaped part does not decode."""
    out: list[str] = []
    run: list[bytes] = []
    try:
        for part in [*parts, ""]:
            if isinstance(part, bytes):
                run.append(part)
                continue
            if run:
                out.append(parse_untrusted_json(b'"' + b"".join(run) + b'"'))
                run = []
            out.append(part)
    except UntrustedJSONError:
        return None
    return "".join(out)


class StreamScanner:
    """Feeds on the bytes of one response, read by read, giving ``chunk_times`` one stamp per
    chunk."""

    __slots__ = ("cached_tokens", "chunk_times", "completion_tokens", "done", "end_s", "model",
                 "pending", "prompt_tokens", "text_parts", "verified")

    def __init__(self) -> None:
        self.chunk_times: list[float] = []
        self.completion_tokens: int | None = None
        self.prompt_tokens: int | None = None
        self.cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens
        self.done = False
        self.end_s: float | None = None
        self.model: str | None = None  # the model the server says answered (may differ)
        self.pending = b""
        self.verified = False  # one event has been fully parsed (the fast path trusts the rest)
        self.text_parts: list[bytes | str] = []  # the content received (``received_text``)

    @property
    def received_text(self) -> str | None:
        """Every content chunk's text joined (answer and reasoning), or None if it did not
        decode."""
        return join_received_text(self.text_parts)

    def feed(self, data: bytes, now: float) -> None:
        """Scan one network read, stamped ``now``, raising StreamError for a stream that is wrong
        (``sse_line_too_long``: a line that goes on past ``MAX_LINE_BYTES``)."""
        self.end_s = now
        cut = data.rfind(b"\n") + 1
        if not cut:  # the line goes on
            self._hold(data)
            return
        block = data if cut == len(data) else data[:cut]
        if self.pending:
            block, self.pending = self.pending + block, b""
        self._hold(data[cut:])
        self._scan(block, now)

    def _hold(self, part: bytes) -> None:
        """Keep ``part`` of an unfinished line, up to ``MAX_LINE_BYTES`` of it."""
        if not part:
            return
        if len(self.pending) + len(part) > MAX_LINE_BYTES:
            self.pending = b""
            raise StreamError("sse_line_too_long",
                              f"an SSE line went on past {MAX_LINE_BYTES >> 20} MiB without a "
                              "newline; no real server sends one, so the stream was dropped")
        self.pending += part

    def finish(self) -> None:
        """The body ended: parse a last line that came without a newline."""
        if self.pending.strip():
            line, self.pending = self.pending, b""
            self._slow(line + b"\n", self.end_s or 0.0)

    def _scan(self, block: bytes, now: float) -> None:
        # usage and [DONE] end a stream: the events from the first of them go to the JSON parser.
        # (An error event has no "choices", so the fast path's count check sends it there too;
        # [DONE] anywhere but the end fails the fast path's pattern.)
        usage = block.find(b'"usage"')
        done = block.find(b"[DONE]", max(len(block) - 64, 0))
        found = [at for at in (usage, done) if at >= 0]
        if not found:
            self._fast(block, now)
            return
        head = block.rfind(b"\n", 0, min(found)) + 1
        if head:
            self._fast(block[:head], now)
        self._slow(block[head:], now)

    def _fast(self, block: bytes, now: float) -> None:
        while not self.verified and block:  # parse events until one has been verified
            first = block.find(b"\n") + 1 or len(block)
            self._slow(block[:first], now)
            block = block[first:]
        if not block:
            return
        if _BLOCK.fullmatch(block) is None:
            self._slow(block, now)
            return
        events = block.count(b"data:")
        if events != block.count(b'"choices":[') and events != len(_CHOICES.findall(block)):
            self._slow(block, now)  # an event without a choices list, or "data:" in a value
            return
        texts = _CONTENT.findall(block)
        if texts:
            self.chunk_times.extend([now] * len(texts))
            self.text_parts.extend(texts)

    def _slow(self, block: bytes, now: float) -> None:
        for raw in block.split(b"\n"):
            line = raw.strip()
            if line.startswith(b"data:"):
                self._event(line[5:].strip(), now)
            elif line and not line.startswith((b":", b"event:", b"id:", b"retry:")):
                raise StreamError("malformed_sse", f"not an SSE field: {line[:80]!r}")

    def _event(self, payload: bytes, now: float) -> None:
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            event = parse_untrusted_json(payload)
        except UntrustedJSONError:  # a chunk of [[[[… past any depth too
            raise StreamError("malformed_sse", f"not JSON: {payload[:80]!r}") from None
        if not isinstance(event, dict):
            raise StreamError("malformed_sse", f"not a JSON object: {payload[:80]!r}")
        if "error" in event:
            raise StreamError("stream_error", error_message(event))
        usage = event.get("usage")
        if isinstance(usage, dict):
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            self.cached_tokens = _cached_tokens(usage, self.cached_tokens)
        choices = event.get("choices")
        if not isinstance(choices, list):
            if isinstance(usage, dict) and choices is None:
                return
            raise StreamError("no_choices", f"event without a 'choices' list: {payload[:80]!r}")
        if self.model is None and isinstance(event.get("model"), str):
            self.model = event["model"]
        self.verified = True
        self._choices(choices, now)

    def _choices(self, choices: list[Any], now: float) -> None:
        carried = [values for values in map(_values_of, choices) if any(values)]
        if carried:
            self.chunk_times.extend([now] * len(carried))
            self.text_parts.extend(value for values in carried for value in values
                                   if isinstance(value, str) and value)


def _answer_part(choice: Any) -> str | None:
    """The answer text one choice of an event adds: chat's ``delta.content``, completions'
    ``text`` (reasoning is not part of the answer). Only the first choice counts."""
    if not isinstance(choice, dict) or choice.get("index", 0) != 0:
        return None
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return text if isinstance(text, str) else None


class AnswerScanner(StreamScanner):
    """A ``StreamScanner`` that also keeps the answer's text, for a conversation whose next turn
    carries it. Every event is parsed (no fast path), so only the turns whose answer is needed
    use it. The counts and stamps are the plain scanner's."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    @property
    def answer(self) -> str:
        return "".join(self.parts)

    def _scan(self, block: bytes, now: float) -> None:
        self._slow(block, now)

    def _choices(self, choices: list[Any], now: float) -> None:
        super()._choices(choices, now)
        for choice in choices:
            part = _answer_part(choice)
            if part:
                self.parts.append(part)


class AnthropicScanner(StreamScanner):
    """The Anthropic Messages stream (``/v1/messages``), as gateways such as TaoToken serve it.

    Events: ``message_start`` (``message.usage.input_tokens``, the model), ``content_block_delta``
    (a ``text_delta``/``thinking_delta`` with non-empty text is a content chunk), ``message_delta``
    (``usage.output_tokens``), ``message_stop`` (the end, in place of ``[DONE]``), ``error``.
    Every block is parsed as JSON: these streams come from remote gateways, where the
    client's per-event cost is far below the network's.
    """

    __slots__ = ()

    def _scan(self, block: bytes, now: float) -> None:
        self._slow(block, now)

    def _event(self, payload: bytes, now: float) -> None:
        try:
            event = parse_untrusted_json(payload)
        except UntrustedJSONError:  # a chunk of [[[[… past any depth too
            raise StreamError("malformed_sse", f"not JSON: {payload[:80]!r}") from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise StreamError("malformed_sse", f"not a typed Messages event: {payload[:80]!r}")
        kind = event["type"]
        if kind == "error":
            raise StreamError("stream_error", error_message(event))
        if kind == "message_start":
            self._start(event.get("message"))
        elif kind == "content_block_delta":
            delta = event.get("delta")
            if isinstance(delta, dict) and (delta.get("text") or delta.get("thinking")):
                self.chunk_times.append(now)
                self.text_parts.extend(v for v in (delta.get("thinking"), delta.get("text"))
                                       if isinstance(v, str) and v)
                self._text(delta)
        elif kind == "message_delta":
            usage = event.get("usage")
            if isinstance(usage, dict) and usage.get("output_tokens") is not None:
                self.completion_tokens = usage["output_tokens"]
        elif kind == "message_stop":
            self.done = True

    def _text(self, delta: dict[str, Any]) -> None:
        """A content delta's text (kept by ``AnthropicAnswerScanner``)."""

    def _start(self, message: Any) -> None:
        if not isinstance(message, dict):
            raise StreamError("malformed_sse", "message_start without a message")
        usage = message.get("usage")
        if isinstance(usage, dict) and usage.get("input_tokens") is not None:
            self.prompt_tokens = usage["input_tokens"]
        if isinstance(message.get("model"), str):
            self.model = message["model"]


class AnthropicAnswerScanner(AnthropicScanner):
    """An ``AnthropicScanner`` that keeps the answer's text (its ``text_delta``s, not thinking)."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    @property
    def answer(self) -> str:
        return "".join(self.parts)

    def _text(self, delta: dict[str, Any]) -> None:
        text = delta.get("text")
        if isinstance(text, str):
            self.parts.append(text)
