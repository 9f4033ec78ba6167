"""Ask the target every item of a quality set: small non-streaming chat calls at the item's
temperature (0 unless it says), a sampled item once per sample (``QualityItem.ask_ids``).

Quality is measured after the timed workloads, never during them. A failed call is data: the
item comes back with ``output`` None, ``score`` None and the error class and message.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import urllib.request
from typing import Any

import aiohttp

from tracker.http_client.sse import ERROR_TEXT_LIMIT, StreamError, error_message
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.load.generator import Endpoint
from tracker.quality.scorers import score_output
from tracker.quality.sets import QualityItem, QualitySet
from tracker.redaction import redact_one_line
from tracker.results import QualityItemResult

CHAT_PATH = "/v1/chat/completions"


def environment_configures_proxy() -> bool:
    """True when HTTP(S)_PROXY/ALL_PROXY or a netrc file could change how requests are sent
    (aiohttp's ``trust_env`` looks them up in a worker thread per request: off when unneeded)."""
    netrc = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    return bool(urllib.request.getproxies()) or os.path.isfile(netrc)


def classify_connection_error(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connection_refused"
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError |
                  ConnectionResetError | BrokenPipeError):
        return "connection_reset"
    if isinstance(exc, OSError) and exc.errno in (errno.ECONNRESET, errno.EPIPE):
        return "connection_reset"
    return "connection_error"


def build_quality_body(item: QualityItem, model: str, max_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": item.prompt}],
        "max_tokens": item.max_tokens or max_tokens,
        "temperature": item.temperature,
        "stream": False,
    }


def parse_answer(payload: object) -> str:
    """The answer text of a chat completion body."""
    if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list) \
            or not payload["choices"]:
        raise StreamError("no_choices", f"a body without choices: {str(payload)[:120]}")
    choice = payload["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if isinstance(message, dict) and isinstance(message.get("content"), str):
        return str(message["content"])
    if isinstance(choice, dict) and isinstance(choice.get("text"), str):
        return str(choice["text"])
    raise StreamError("empty_response", "the first choice carries no text")


async def _call(session: aiohttp.ClientSession, endpoint: Endpoint, body: dict[str, Any],
                timeout_s: float) -> str:
    headers = {"Content-Type": "application/json", **endpoint.headers}
    async with session.post(endpoint.url(CHAT_PATH), data=json.dumps(body), headers=headers,
                            timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
        text = await response.text(errors="replace")
        try:
            payload = parse_untrusted_json(text)
        except UntrustedJSONError:
            payload = None
        if response.status != 200:
            said = error_message(payload) if payload is not None else text[:ERROR_TEXT_LIMIT]
            raise StreamError(f"http_{response.status}", said)
        if payload is None:
            raise StreamError("not_json", text[:120])
        return parse_answer(payload)


async def run_quality_item(session: aiohttp.ClientSession, endpoint: Endpoint, model: str,
                           item: QualityItem, max_tokens: int, timeout_s: float,
                           ask_id: str | None = None) -> QualityItemResult:
    """One ask of ``item``, whose result is named ``ask_id`` (default: the item's id)."""
    result_id = item.id if ask_id is None else ask_id
    body = build_quality_body(item, model, max_tokens)
    try:
        output = await _call(session, endpoint, body, timeout_s)
    except StreamError as exc:
        return QualityItemResult(result_id, item.scorer, None, None, f"{exc.error_class}: {exc}")
    except TimeoutError:
        return QualityItemResult(result_id, item.scorer, None, None,
                                 f"timeout: no answer within {timeout_s:g} s")
    except (aiohttp.ClientError, OSError) as exc:
        said = f"{classify_connection_error(exc)}: {type(exc).__name__}: {exc}"
        return QualityItemResult(result_id, item.scorer, None, None,
                                 redact_one_line(said, ERROR_TEXT_LIMIT))
    return QualityItemResult(result_id, item.scorer, output, score_output(item, output))


async def run_quality_set(endpoint: Endpoint, model: str, quality_set: QualitySet, *,
                          max_tokens: int, concurrency: int,
                          timeout_s: float) -> tuple[QualityItemResult, ...]:
    """Every ask's answer and score, in the set's order (a sampled item's asks in a row)."""
    limit = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector,
                                     trust_env=environment_configures_proxy()) as session:
        async def one(item: QualityItem, ask_id: str) -> QualityItemResult:
            async with limit:
                return await run_quality_item(session, endpoint, model, item, max_tokens,
                                              timeout_s, ask_id)

        return tuple(await asyncio.gather(*(one(item, ask_id) for item in quality_set.items
                                            for ask_id in item.ask_ids)))
