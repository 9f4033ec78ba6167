"""One redaction for every text that came from outside, applied explicitly at every exit.

A gateway that echoes the key in its 401 body, a proxy that repeats the Authorization header, an
exception that quotes a URL with a password: outside text is data, not trusted. Before such a text
is stored, printed, rendered, written to a report or a log, or sent to a webhook, it goes through
``redact_text``, which hides:

- every secret registered with this process (``register_secret``: the run's key, proxy and
  webhook credentials, the database password): the whole value, its percent-encoded forms, and
  any piece of 6 or more characters of it (gateways echo a masked key, "sk-…wxyz", or its tail).
- the value of every environment variable whose name says it holds a secret (``*KEY*``,
  ``*SECRET*``, ``*TOKEN*``, ``*PASSWORD*``, ``*CREDENTIAL*``, ``*_PAT``, ``AUTH*``): whole and
  percent-encoded only, since its name is a guess and its pieces would hide ordinary words.
- anything shaped like a known token (OpenAI, Anthropic, GitHub, Hugging Face, Slack, AWS,
  Google, JWTs), ``Bearer``/``Basic`` credentials, key-bearing headers and query parameters, and
  the password of any URL.

Known values are found in any letter case (a gateway that upper-cases what it echoes). The hidden
part becomes ``[redacted]``. The function is pure given the known secrets, which only grow during
a process until ``forget_secrets``. The exits call it themselves: ``say`` for every line printed,
``RedactingFormatter`` on every log handler the tracker configures, and the store, report,
webhook and dashboard writers at their boundaries. Nothing swaps a stream or a logging hook.
"""

from __future__ import annotations

import html
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, TextIO
from urllib.parse import quote, quote_plus, unquote, urlsplit

MARK = "[redacted]"
PIECE_CHARS = 6  # any piece of a registered secret this long or longer is hidden
MIN_SECRET_CHARS = 6  # shorter values are not secrets worth hiding (and would hide words)

# Environment variable names that hold a secret (the same rule refuses them in configs).
SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|_PAT$|^PAT_|^AUTH|_AUTH$",
                         re.IGNORECASE)
# Not secrets although their names match: paths and switches of well-known tools.
_NOT_SECRET_NAMES = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KEYTIMEOUT", "XAUTHORITY",
                               "PYTHONHASHSEED", "TRACKER_TEST_KEY_NAME"})

_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-ant-[A-Za-z0-9_\-]{8,}"                  # Anthropic
    r"|(?:sk|pk|rk)-[A-Za-z0-9_\-*.]{8,}"          # OpenAI-style (sk-proj-…, masked sk-…wxyz)
    r"|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}"  # Stripe-style
    r"|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}"
    r"|glpat-[A-Za-z0-9_\-]{16,}"
    r"|hf_[A-Za-z0-9]{16,}"
    r"|xox[abprse]-[A-Za-z0-9\-]{8,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
    r")"
)
# A credential after its header name or key word (``x-api-key: …``, ``password=…``): keep the
# word, hide the value.
_AFTER_WORD = re.compile(
    r"(?P<word>\b(?:x-api-key|api-key|x-goog-api-key|authorization|proxy-authorization|"
    r"api_key|apikey|access_token|auth_token|password|passwd|secret|token)"
    r"[\"']?\s*[:=]\s*[\"']?(?:Bearer\s+|Basic\s+)?)"
    r"(?P<value>[^\s\"',;&}\]]{8,})",
    re.IGNORECASE,
)
# A credential after a command-line flag that names one (``--api-key 'x'``, ``--token=x``,
# ``--hf-token x``): the flag ends with the word, so ``--tokenizer`` and ``--max-tokens`` do not.
_AFTER_FLAG = re.compile(
    r"(?P<word>(?<![\w-])--?(?:[A-Za-z0-9]+[-_])*(?:api[-_]?key|key|token|access[-_]token|"
    r"password|passwd|secret|authorization|credentials?)(?:\s+|=)[\"']?(?:Bearer\s+)?)"
    r"(?P<value>(?!--)[^\s\"']{8,})",
    re.IGNORECASE,
)
# A credential after its scheme word (``Bearer …``, ``Token …``, ``Basic …``), when the value
# looks like one (a digit in it, or 20+ credential characters): "output token throughput" and
# "Token generation failed" are words, not credentials.
_AFTER_SCHEME = re.compile(
    r"(?P<word>\b(?:Bearer|Token|Basic)\s+)"
    r"(?P<value>(?=[^\s\"',;&}\]]*\d)[^\s\"',;&}\]]{8,}|[A-Za-z0-9._~+/=\-]{20,})",
    re.IGNORECASE,
)
# key=… in a URL's query string.
_QUERY = re.compile(r"(?P<word>[?&;](?:api[_-]?key|key|token|access_token|auth|secret|sig|"
                    r"signature|password|code)=)(?P<value>[^&#\s\"']+)", re.IGNORECASE)
# scheme://user:password@host: keep the user, hide the password; a bare token as user too.
_URL_PASSWORD = re.compile(r"(?P<word>\b[a-z][a-z0-9+.\-]*://[^/\s:@\"']*:)(?P<value>[^@\s/\"']+)@",
                           re.IGNORECASE)
_SLACK_HOOK = re.compile(r"(?P<word>hooks\.slack\.com/(?:services|workflows|triggers)/)"
                         r"(?P<value>[A-Za-z0-9/_\-]+)")


class _Known:
    """The secrets this process knows, and the patterns that find them (rebuilt on change)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.forget()

    def forget(self) -> None:
        with self._lock:
            self._values: set[str] = set()  # registered: hidden whole and in pieces
            self._whole_only: set[str] = set()  # hidden whole (a webhook's path, an env value)
            self._whole: re.Pattern[str] | None = None
            self._pieces: re.Pattern[str] | None = None
            self._grams: frozenset[str] = frozenset()
            self._env_seen: dict[str, str] = {}
            self._env_read_s: float | None = None

    @property
    def values(self) -> frozenset[str]:
        return frozenset(self._values)

    def add(self, values: Iterable[str], *, pieces: bool = True) -> None:
        fresh = {v for v in (_clean(value) for value in values) if v}
        with self._lock:
            known = self._values if pieces else self._whole_only
            if fresh - known:
                known |= fresh
                self._rebuild()

    def refresh_environment(self, environ: Mapping[str, str], *, every_s: float = 0.0) -> None:
        """Pick up secret-named variables (hidden whole) and proxy passwords (whole and in
        pieces), at most once per ``every_s`` (reading costs ~20 µs)."""
        now_s = time.monotonic()
        if self._env_read_s is not None and now_s - self._env_read_s < every_s:
            return
        self._env_read_s = now_s
        found = {name: value for name, value in environ.items()
                 if is_secret_name(name) or name.upper().endswith("_PROXY")}
        if found != self._env_seen:
            self._env_seen = dict(found)
            self.add((value for name, value in found.items()
                      if is_secret_name(name) and not _DOTTED_NAME.fullmatch(value.strip())),
                     pieces=False)
            self.add(filter(None, (_url_password(v) for n, v in found.items()
                                   if n.upper().endswith("_PROXY"))))

    def _rebuild(self) -> None:
        # Both patterns are lower-case and run over the text lower-cased (``_fold``), so an echo
        # in another letter case is found too, at the cost of one ``str.lower`` per text.
        variants = {form for value in self._values for form in _encodings(value)}
        whole = variants | {form for value in self._whole_only for form in _encodings(value)}
        ordered = sorted({_fold(form) for form in whole}, key=len, reverse=True)
        self._whole = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        grams = {_fold(v)[i:i + PIECE_CHARS] for v in variants
                 for i in range(len(v) - PIECE_CHARS + 1)}
        self._grams = frozenset(grams)
        self._pieces = re.compile("|".join(map(re.escape, sorted(grams)))) if grams else None

    def hide(self, text: str) -> str:
        whole, pieces, grams = self._whole, self._pieces, self._grams
        if whole is None:
            return text
        folded = _fold(text)
        if whole.search(folded) is not None:
            spans = [match.span() for match in whole.finditer(folded)]
            text, folded = _mark(text, spans), _mark(folded, spans)
        if pieces is None or pieces.search(folded) is None:
            return text
        covered = bytearray(len(text))
        for start in range(len(text) - PIECE_CHARS + 1):
            if folded[start:start + PIECE_CHARS] in grams:
                covered[start:start + PIECE_CHARS] = b"\x01" * PIECE_CHARS
        out: list[str] = []
        index = 0
        while index < len(text):
            if covered[index]:
                while index < len(text) and covered[index]:
                    index += 1
                out.append(MARK)
            else:
                out.append(text[index])
                index += 1
        return "".join(out)


def _mark(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of ``spans`` (in order, not overlapping) replaced by ``MARK``."""
    out: list[str] = []
    index = 0
    for start, end in spans:
        out += [text[index:start], MARK]
        index = end
    out.append(text[index:])
    return "".join(out)


def _fold(text: str) -> str:
    """``text`` lower-cased character by character, so that its indices stay those of ``text``
    (``str.lower`` makes two characters of a few, such as "İ": those are kept as they are)."""
    folded = text.lower()
    if len(folded) == len(text):
        return folded
    return "".join(low if len(low := char.lower()) == 1 else char for char in text)


def _encodings(value: str) -> set[str]:
    return {value, quote(value, safe=""), quote_plus(value, safe=""), quote(value, safe="").lower()}


def _clean(value: str) -> str | None:
    value = value.strip()
    if value.lower().startswith("bearer "):
        value = value[7:].strip()
    if len(value) < MIN_SECRET_CHARS or value.lower() in {"true", "false", "none", "null"}:
        return None
    if value.startswith(("/", "~", "./")) or any(char.isspace() for char in value):
        return None  # a path or a sentence, not a key
    return value


# A setting that names code, not a key: PYTHON_KEYRING_BACKEND=keyring.backends.null.Keyring, a
# KEY_FUNC=module.function. Not hidden: a line that names the code it ran keeps its words.
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)+")
_KNOWN = _Known()
ENV_REFRESH_S = 1.0
# Numbers and JSON arrays of them hold nothing to hide (the fast path for stored ITL lists).
_PLAIN = re.compile(r"[0-9.,eE+\-\[\] \n]*")
# Every text a pattern above can match holds one of these (lower-cased); most texts hold none.
_TRIGGERS = ("sk-", "pk-", "rk-", "sk_", "pk_", "rk_", "gh", "glpat-", "hf_", "xox", "akia",
             "asia", "aiza", "eyj", "bearer", "token", "basic", "key", "auth", "pass", "secret",
             "=", "://", "hooks.slack")


def refresh_environment() -> None:
    """Read the secret-named environment variables now (at a command's start or after an export)."""
    _KNOWN.refresh_environment(os.environ)


# An environment variable's name as people write them; anything else named as "the variable that
# holds the key" may be the key itself, pasted in the wrong place, and is never echoed.
CONVENTIONAL_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")


def is_secret_name(name: str) -> bool:
    """An environment variable or flag name whose value is a secret (``OPENAI_API_KEY``…)."""
    bare = name.lstrip("-").replace("-", "_")
    return bare.upper() not in _NOT_SECRET_NAMES and bool(SECRET_NAME.search(bare))


def forget_secrets() -> None:
    """Start again from a clean registry: every registered secret is forgotten, and the
    secret-named environment variables are read afresh at the next redaction. It serves a test,
    or a long-lived process between jobs that must not hide one job's key in the next one's
    words."""
    _KNOWN.forget()


def register_secret(*values: str | None, pieces: bool = True) -> None:
    """Hide these values in every text redacted from now on: whole, and (``pieces``) any piece
    of 6+ characters. Pass ``pieces=False`` for values that are secret but not random (a URL
    path)."""
    _KNOWN.add((value for value in values if value), pieces=pieces)


def known_secrets() -> tuple[str, ...]:
    """The secrets registered in this process (hidden whole and in pieces), for a helper process
    that redacts on its behalf (a launched server's supervisor, which writes its log)."""
    return tuple(sorted(_KNOWN.values))


def _url_password(url: str) -> str | None:
    try:
        return urlsplit(url if "://" in url else f"http://{url}").password
    except ValueError:
        return None


def register_url_credentials(url: str | None) -> None:
    """Hide the user-info password of a URL (a proxy's, a database's)."""
    password = _url_password(url) if url else None
    register_secret(unquote(password) if password else None, password)


def redact_text(text: str) -> str:
    """``text`` with every known secret and every token-shaped string replaced by ``[redacted]``."""
    if len(text) < MIN_SECRET_CHARS or _PLAIN.fullmatch(text) is not None:
        return text
    lowered = text.lower()
    if any(trigger in lowered for trigger in _TRIGGERS):
        text = _TOKEN_SHAPES.sub(MARK, text)
        for pattern in (_AFTER_WORD, _AFTER_FLAG, _AFTER_SCHEME, _QUERY, _URL_PASSWORD,
                        _SLACK_HOOK):
            text = pattern.sub(_keep_word, text)
    _KNOWN.refresh_environment(os.environ, every_s=ENV_REFRESH_S)
    return _KNOWN.hide(text)


def contains_token(text: str) -> bool:
    """Whether ``text`` holds something shaped like a known API key or token (the config check's
    rule and the redaction's are this one list)."""
    return _TOKEN_SHAPES.search(text) is not None


def _keep_word(match: re.Match[str]) -> str:
    if match["value"].startswith(MARK[:-1]):  # already hidden
        return match[0]
    tail = "@" if match[0].endswith("@") else ""
    return f"{match['word']}{MARK}{tail}"


# A JSON key or header name whose value is a credential: the whole name, or its last segment
# (``x-api-key``, ``hf_token``), so ``tokenizer_id``, ``eos_token`` and ``max_tokens`` are not.
CREDENTIAL_KEY = re.compile(
    r"^(?:token|secret|password|passwd|authorization|credentials?)$"
    r"|(?:^|[-_])(?:api[-_]?key|apikey|(?:secret|private|access|client|auth)[-_]?key"
    r"|(?:hf|auth|access|api|bearer|refresh|session|id)[-_]?token"
    r"|password|passwd|client[-_]?secret|proxy[-_]?authorization|credentials?)$",
    re.IGNORECASE,
)


def register_secrets_in(value: Any) -> None:
    """Register (``register_secret``) every value that a JSON-like document holds under a
    credential's name (``CREDENTIAL_KEY``: ``api_key``, ``Authorization``, ``hf_token``…), as
    a mapping's item or as a ``[name, value]`` pair (a header list), so that every other copy
    of it in the same document (a command line, a custom header, a URL) is hidden too."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            for key, inner in item.items():
                if isinstance(key, str) and isinstance(inner, str) and CREDENTIAL_KEY.search(key):
                    register_secret(inner)
                else:
                    pending.append(inner)
        elif isinstance(item, list | tuple):
            if (len(item) == 2 and all(isinstance(part, str) for part in item)
                    and CREDENTIAL_KEY.search(item[0])):
                register_secret(item[1])
            else:
                pending.extend(item)


def redact_optional(text: str | None) -> str | None:
    return None if text is None else redact_text(text)


def redact_data(value: Any) -> Any:
    """A JSON-like value with every string (keys included) redacted and other values unchanged."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {redact_data(k) if isinstance(k, str) else k: redact_data(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(item) for item in value]
    return value


def redact_one_line(text: str, limit: int = 240) -> str:
    """Redacted, on one line, at most ``limit`` characters: for a message quoting outside text."""
    return " ".join(redact_text(text).split())[:limit]


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~:$>])")


def escape_markdown(text: str) -> str:
    """Outside text, redacted, on one line, to be shown literally inside Markdown: HTML and every
    Markdown construct (images, links, emphasis, code, tables, Streamlit's ``:directives:`` and
    ``$math$``) come out as the characters they are, never as markup."""
    flat = " ".join(redact_text(text).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(flat, quote=False))


def say(text: str, *, err: bool = False, stream: TextIO | None = None, end: str = "\n") -> None:
    """Write ``text``, redacted, and ``end`` to stdout (or stderr with ``err``, or ``stream``),
    then flush. Every line a tracker command, the simulator or a server prints goes through here."""
    out = stream if stream is not None else sys.stderr if err else sys.stdout
    out.write(redact_text(text) + end)
    out.flush()


class RedactingFormatter(logging.Formatter):
    """A log line redacted whole (message, arguments, traceback): the formatter of every log
    handler the tracker configures (``tracker.cli.main.logging_to_stderr``)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))
