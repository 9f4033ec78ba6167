"""``tracker doctor``: a preflight of an OpenAI-compatible endpoint that names cause and fix.

The checks run in the order a failure would surface: the base URL's shape, the key in the
environment, the proxy the environment names, then ``GET /v1/models`` and one minimal
``POST /v1/chat/completions``. Each gives a ``Finding``. The endpoint is ready only when the chat
completion returns ``choices``. Nothing of the key is ever printed, only facts about it
("starts with 'Bearer '"). The gateway's own error text is shown with anything key-like hidden.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import re
import socket
import ssl
import time
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from tracker.errors import ExitCode
from tracker.http_client.client import find_proxy, strip_credentials
from tracker.http_client.sse import error_message
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.load.generator import Endpoint
from tracker.redaction import CONVENTIONAL_ENV_NAME, redact_one_line, register_secret

_MODEL_MISSING = re.compile(r"model.*(not.?found|not exist|does not exist|unknown|invalid|"
                            r"no such|not available|unsupported)|(unknown|invalid) model",
                            re.IGNORECASE | re.DOTALL)


class Status(Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str | None = None
    local: bool = False  # a problem of the local setup (config, environment), not the target


@dataclass(frozen=True, slots=True)
class DoctorTarget:
    base_url: str
    model: str
    api_key_env: str | None
    timeout_s: float = 20.0


@dataclass(frozen=True, slots=True)
class Diagnosis:
    target: DoctorTarget
    findings: tuple[Finding, ...]

    @property
    def ready(self) -> bool:
        return any(f.check == "chat" and f.status is Status.OK for f in self.findings)

    @property
    def exit_code(self) -> int:
        if self.ready:
            return ExitCode.OK
        failed = [f for f in self.findings if f.status is Status.FAIL]
        return ExitCode.USAGE if failed and all(f.local for f in failed) else ExitCode.NOT_MEASURED


# --- local checks (pure) -----------------------------------------------------------------------

def check_base_url(base_url: str) -> list[Finding]:
    parts = urlsplit(base_url)
    root = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}".removesuffix("/v1")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return [Finding("base_url", Status.FAIL, f"{base_url!r} is not an http(s) URL",
                        "give the gateway root, e.g. https://taotoken.net/api", local=True)]
    if parts.query or parts.fragment:
        return [Finding("base_url", Status.FAIL, f"{strip_credentials(base_url)} has query parameters "
                        "or a fragment; the tracker appends /v1/... to the path, so they would "
                        "end up in the middle of the URL", f"use {root} (no '?...')", local=True)]
    path = parts.path.rstrip("/")
    if path.endswith(("/chat/completions", "/completions", "/messages")):
        fixed = root.rsplit("/v1/", 1)[0] if "/v1/" in root else root
        return [Finding("base_url", Status.FAIL, f"{base_url} names an endpoint, not the API root",
                        f"use the root the tracker appends /v1/chat/completions to: {fixed}",
                        local=True)]
    chat_url = Endpoint(base_url).url("/v1/chat/completions")
    if path.endswith("/v1"):
        return [Finding("base_url", Status.WARN, f"{base_url} ends in /v1; the tracker appends "
                        f"/v1/... itself and avoids doubling it (requests go to {chat_url})",
                        f"write the root without /v1: {root} (the OpenAI SDK's base_url, "
                        "by contrast, includes /v1)")]
    return [Finding("base_url", Status.OK, f"requests go to {chat_url}")]


def check_key(api_key_env: str | None, environ: dict[str, str] | None = None) -> list[Finding]:
    """Facts about the key, never the key: set, spaces, quotes, a 'Bearer ' prefix."""
    if api_key_env is None:
        return [Finding("key", Status.WARN, "no api_key_env: requests carry no Authorization",
                        "name the variable that holds the key, e.g. --api-key-env "
                        "TAOTOKEN_API_KEY (a gateway answers 401 without one)")]
    env = os.environ if environ is None else environ
    value = env.get(api_key_env)
    if value is None and not CONVENTIONAL_ENV_NAME.fullmatch(api_key_env):
        register_secret(api_key_env)  # a key pasted where its variable's name belongs
        return [Finding("key", Status.FAIL, "no key in the environment: the variable named by "
                        "api_key_env is not set (name hidden: it is not an UPPER_CASE name and "
                        "may be a pasted key)", "export the key in a variable such as "
                        "TAOTOKEN_API_KEY and name that variable", local=True)]
    if value is None or not value.strip():
        what = "is not set" if value is None else "is empty"
        return [Finding("key", Status.FAIL, f"no key in the environment: ${api_key_env} {what}",
                        f"export {api_key_env}=<your key> in the shell that runs the tracker",
                        local=True)]
    key = value.strip()
    if key.lower().startswith("bearer "):
        return [Finding("key", Status.FAIL, f"${api_key_env} starts with 'Bearer '; the tracker "
                        "sends 'Authorization: Bearer <key>' itself, so it would say it twice",
                        f"export only the key: export {api_key_env}=<key without 'Bearer '>",
                        local=True)]
    if key[0] in "'\"" or key[-1] in "'\"":
        return [Finding("key", Status.FAIL, f"${api_key_env} includes quote characters",
                        "export it without the quotes being part of the value", local=True)]
    if any(char.isspace() for char in key):
        return [Finding("key", Status.FAIL, f"${api_key_env} has spaces or line breaks inside "
                        "the key (pasted with extra text?)", "export the key alone", local=True)]
    if key != value:
        return [Finding("key", Status.WARN, f"${api_key_env} has leading or trailing spaces; "
                        "the tracker strips them, other clients send them and get 401",
                        f"export {api_key_env} again without the spaces")]
    return [Finding("key", Status.OK, f"${api_key_env} is set (value not shown)")]


def redact_text(text: str, key: str | None) -> str:
    """The gateway's words, one line, with the key (whole or in pieces) and anything key-like hidden."""
    register_secret(key)
    return redact_one_line(text)


# --- network checks ----------------------------------------------------------------------------

async def check_proxy(base_url: str, timeout_s: float = 3.0) -> list[Finding]:
    proxy = find_proxy(base_url)
    if proxy is None:
        return []
    name, url = proxy
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    shown = f"{name}={strip_credentials(url)}"
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, TimeoutError) as exc:
        why = "refuses connections" if isinstance(exc, ConnectionRefusedError) else \
            f"does not answer ({type(exc).__name__})"
        return [Finding("proxy", Status.FAIL, f"local proxy failed: {shown} {why}",
                        f"start the proxy, or unset {name} (and HTTP_PROXY/HTTPS_PROXY), or add "
                        f"{urlsplit(base_url).hostname} to NO_PROXY", local=True)]
    writer.close()
    return [Finding("proxy", Status.OK, f"requests go through {shown}, which accepts connections")]


def classify_error(exc: BaseException, url: str, timeout_s: float) -> Finding:
    host = urlsplit(url).hostname
    if isinstance(exc, aiohttp.ClientProxyConnectionError | aiohttp.ClientHttpProxyError):
        return Finding("connect", Status.FAIL, f"local proxy failed: {exc}",
                       "start the proxy or unset HTTP_PROXY/HTTPS_PROXY", local=True)
    if isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError):
        return Finding("connect", Status.FAIL, f"TLS error talking to {host}: {exc}",
                       "check the system clock and CA certificates (SSL_CERT_FILE for a "
                       "corporate proxy's CA); an http:// URL for an https-only gateway, or "
                       "https:// for a plain-http server, also fails here")
    if isinstance(exc, aiohttp.ClientConnectorDNSError) or (
            isinstance(exc, aiohttp.ClientConnectorError) and
            isinstance(exc.os_error, socket.gaierror)):
        return Finding("connect", Status.FAIL, f"cannot resolve host {host}",
                       "check the spelling of base_url and the machine's DNS/network")
    if isinstance(exc, aiohttp.ClientConnectorError) and \
            isinstance(exc.os_error, ConnectionRefusedError):
        return Finding("connect", Status.FAIL, f"connection refused by {urlsplit(url).netloc}",
                       "nothing listens there: start the server, or fix the host/port in base_url")
    if isinstance(exc, TimeoutError):
        return Finding("connect", Status.FAIL, f"no answer from {host} within {timeout_s:g} s",
                       "check the network or proxy; raise --timeout for a slow gateway")
    return Finding("connect", Status.FAIL, f"request to {url} failed: {type(exc).__name__}: {exc}",
                   "check base_url and the network")


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    body: Any  # parsed JSON, or the text when not JSON
    headers: dict[str, str]
    elapsed_s: float


async def _request(session: aiohttp.ClientSession, method: str, url: str,
                   payload: dict[str, Any] | None = None) -> _Reply:
    started_s = time.monotonic()
    async with session.request(method, url, json=payload) as response:
        text = await response.text(errors="replace")
        try:
            body: Any = parse_untrusted_json(text)
        except UntrustedJSONError:
            body = text
        return _Reply(response.status, body, dict(response.headers), time.monotonic() - started_s)


def _auth_finding(check: str, reply: _Reply, target: DoctorTarget, key: str | None) -> Finding:
    said = redact_text(error_message(reply.body), key)
    return Finding(check, Status.FAIL, f"HTTP {reply.status}: the gateway rejected the key "
                   f"(it said: {said})",
                   f"check that ${target.api_key_env} holds a current key for this gateway (not "
                   "another provider's), exported without quotes, spaces or 'Bearer '")


def _list_models(body: Any) -> list[str] | None:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]


def _model_missing(model: str, available: list[str] | None, said: str = "") -> Finding:
    detail = f"model not found: {model!r}" + (f" (the gateway said: {said})" if said else "")
    if available:
        close = difflib.get_close_matches(model, available, n=3, cutoff=0.4)
        shown = ", ".join(available[:20]) + (" …" if len(available) > 20 else "")
        detail += f"; /v1/models lists {len(available)}: {shown}"
        fix = f"set the model id to one listed{'; closest: ' + ', '.join(close) if close else ''}"
    else:
        fix = "set the model id the gateway documents (its /v1/models lists none here)"
    return Finding("model", Status.FAIL, detail, fix)


def check_models(reply: _Reply, target: DoctorTarget, key: str | None) -> list[Finding]:
    if reply.status in (401, 403):
        return [_auth_finding("auth", reply, target, key)]
    available = _list_models(reply.body) if reply.status == 200 else None
    if available is None:
        return [Finding("model", Status.WARN, f"GET /v1/models answered HTTP {reply.status} "
                        "without a model list; the model is checked by the chat request alone")]
    if target.model not in available:
        return [_model_missing(target.model, available)]
    return [Finding("model", Status.OK, f"{target.model!r} is among the {len(available)} "
                    "models /v1/models lists")]


def check_chat(reply: _Reply, target: DoctorTarget, key: str | None,
               available: list[str] | None) -> Finding:
    if reply.status in (401, 403):
        return _auth_finding("chat", reply, target, key)
    said = redact_text(error_message(reply.body), key)
    if reply.status in (400, 404, 422) and _MODEL_MISSING.search(said):
        return _model_missing(target.model, available, said)
    if reply.status == 429:
        wait = reply.headers.get("Retry-After", "not given")
        return Finding("chat", Status.FAIL, f"HTTP 429: rate limited (Retry-After: {wait}; it "
                       f"said: {said})", "wait and retry, lower the suite's concurrency, or ask "
                       "the gateway for a higher limit")
    if reply.status != 200:
        return Finding("chat", Status.FAIL, f"HTTP {reply.status} from /v1/chat/completions "
                       f"(it said: {said})", _status_fix(reply.status))
    choices = reply.body.get("choices") if isinstance(reply.body, dict) else None
    if not isinstance(choices, list) or not choices:
        return Finding("chat", Status.FAIL, f"a reply without choices: {_shape(reply.body)}",
                       "this URL answers, but not as an OpenAI chat-completions endpoint (wrong "
                       "endpoint): set base_url to the gateway's OpenAI-compatible root")
    return Finding("chat", Status.OK, f"a minimal chat completion returned choices in "
                   f"{reply.elapsed_s * 1000:.0f} ms (including the network round trip)")


def _status_fix(status: int) -> str:
    if status == 404:
        return "no chat endpoint at this URL: base_url must be the API root the gateway documents"
    if status >= 500:
        return "the gateway failed; retry later or check its status page"
    return "check base_url, the model id and the key"


def _shape(body: Any) -> str:
    if isinstance(body, dict):
        keys = ", ".join(sorted(map(str, body))[:8])
        hint = " (an Anthropic Messages reply)" if body.get("type") == "message" else ""
        return f"a JSON object with keys {keys}{hint}"
    if isinstance(body, str) and "<html" in body[:500].lower():
        return "an HTML page (a web site, not the API)"
    return f"{type(body).__name__} {str(body)[:60]!r}"


async def _network_checks(target: DoctorTarget, key: str | None) -> list[Finding]:
    endpoint = Endpoint(target.base_url, {"Authorization": f"Bearer {key}"} if key else {})
    timeout = aiohttp.ClientTimeout(total=target.timeout_s)
    findings: list[Finding] = []
    async with aiohttp.ClientSession(timeout=timeout, trust_env=True,
                                     headers=endpoint.headers) as session:
        url = endpoint.url("/v1/models")
        try:
            listing = await _request(session, "GET", url)
            findings += check_models(listing, target, key)
            if findings[-1].check == "auth":
                return findings
            url = endpoint.url("/v1/chat/completions")
            chat = await _request(session, "POST", url, {
                "model": target.model, "max_tokens": 8, "stream": False,
                "messages": [{"role": "user", "content": "Reply with the word OK."}]})
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            return [*findings, classify_error(exc, url, target.timeout_s)]
    return _merge(findings, check_chat(chat, target, key, _list_models(listing.body)))


def _merge(findings: list[Finding], chat: Finding) -> list[Finding]:
    """The chat's verdict on the model replaces the listing's. A listed-elsewhere alias is a
    warn."""
    if chat.check == "model":
        return [*(f for f in findings if f.check != "model"), chat]
    if chat.status is Status.OK:
        findings = [Finding(f.check, Status.WARN, f"{f.detail}, yet the chat request accepted it "
                            "(an alias?)") if f.check == "model" and f.status is Status.FAIL else f
                    for f in findings]
    return [*findings, chat]


async def run_doctor(target: DoctorTarget) -> Diagnosis:
    if target.api_key_env:  # hidden in every text from here on, whatever answers with it
        register_secret(os.environ.get(target.api_key_env, "").strip())
    findings = [*check_base_url(target.base_url), *check_key(target.api_key_env)]
    if not any(f.status is Status.FAIL for f in findings):
        findings += await check_proxy(target.base_url)
    if not any(f.status is Status.FAIL for f in findings):
        raw = os.environ.get(target.api_key_env) if target.api_key_env else None
        findings += await _network_checks(target, raw.strip() if raw else None)
    return Diagnosis(target, tuple(findings))


def render_diagnosis(diagnosis: Diagnosis) -> str:
    target = diagnosis.target
    key = f"key from ${target.api_key_env}" if target.api_key_env else "no key"
    lines = [f"doctor: {strip_credentials(target.base_url)}  model {target.model}  {key}"]
    for finding in diagnosis.findings:
        lines.append(f"  {finding.status.value:<5} {finding.check:<9} {finding.detail}")
        if finding.fix and finding.status is not Status.OK:
            lines.append(f"  {'':<5} {'':<9} fix: {finding.fix}")
    problems = sum(f.status is Status.FAIL for f in diagnosis.findings)
    lines.append("ready: a chat completion returned choices" if diagnosis.ready else
                 f"not ready: {problems or 1} problem{'s' if problems > 1 else ''} above")
    return "\n".join(lines)
