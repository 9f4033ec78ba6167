"""Helpers for the simulator tests: configs, and a real aiohttp client that times SSE chunks."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tests.waiting import wait_for_async
from tracker.inputs.configs import ServingConfig

MODEL = "sim-model"


def make_config(engine: dict[str, Any] | None = None, **simulator: Any) -> ServingConfig:
    """A sim config with fast, noise-free timings unless overridden."""
    settings = {"seed": 7, "prefill_s_per_token": 0.0, "decode_base_s": 0.001,
                "decode_per_seq_s": 0.0, "decode_s_per_kv_gib": 0.0, "noise": 0.0,
                "run_noise": 0.0, **simulator}
    return ServingConfig.model_validate({
        "name": "sim-test",
        "target": {"kind": "sim", "model": MODEL, "simulator": settings},
        "engine": engine or {},
    })


@dataclass
class StreamResult:
    status: int
    chunks: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    content_times_s: list[float] = field(default_factory=list)  # perf_counter of content chunks
    sent_s: float = 0.0
    end_s: float = 0.0

    @property
    def ttft_s(self) -> float:
        return self.content_times_s[0] - self.sent_s

    @property
    def mean_itl_s(self) -> float:
        times = self.content_times_s
        return (times[-1] - times[0]) / (len(times) - 1)

    @property
    def content_chunks(self) -> list[dict[str, Any]]:
        return [c for c in self.chunks if c["choices"] and _piece(c["choices"][0])]

    @property
    def text(self) -> str:
        return "".join(_piece(c["choices"][0]) for c in self.content_chunks)


def _piece(choice: dict[str, Any]) -> str:
    if "delta" in choice:
        return str(choice["delta"].get("content") or "")
    return str(choice.get("text") or "")


async def stream_request(
    session: aiohttp.ClientSession, base_url: str, body: dict[str, Any], chat: bool = True
) -> StreamResult:
    path = "/v1/chat/completions" if chat else "/v1/completions"
    result = StreamResult(status=0, sent_s=time.perf_counter())
    async with session.post(base_url + path, json={"model": MODEL, "stream": True, **body}) as r:
        result.status = r.status
        async for line in r.content:
            if not line.startswith(b"data: "):
                continue
            payload = line[len(b"data: "):].strip()
            if payload == b"[DONE]":
                result.done = True
                continue
            chunk = json.loads(payload)
            result.chunks.append(chunk)
            if chunk["choices"] and _piece(chunk["choices"][0]):
                result.content_times_s.append(time.perf_counter())
    result.end_s = time.perf_counter()
    return result


def chat_body(content: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "ignore_eos": True, **extra}


async def fetch_metrics(session: aiohttp.ClientSession, base_url: str) -> dict[str, float]:
    """``{series (name plus labels other than model_name): value}``."""
    async with session.get(base_url + "/metrics") as response:
        text = await response.text()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            values[series.replace(f',model_name="{MODEL}"', "").replace(
                f'{{model_name="{MODEL}"}}', "")] = float(value)
    return values


async def wait_for_metrics(session: aiohttp.ClientSession, base_url: str,
                           condition: Callable[[dict[str, float]], bool], what: str,
                           timeout_s: float = 10.0) -> dict[str, float]:
    """The first ``/metrics`` snapshot for which ``condition`` holds (a failure after
    ``timeout_s``, naming ``what`` never happened)."""
    seen: dict[str, float] = {}

    async def reached() -> bool:
        seen.update(await fetch_metrics(session, base_url))
        return condition(seen)

    await wait_for_async(reached, timeout_s, what)
    return seen


async def wait_for_metric(session: aiohttp.ClientSession, base_url: str, series: str,
                          value: float) -> dict[str, float]:
    """The first snapshot in which ``series`` is ``value``."""
    return await wait_for_metrics(session, base_url, lambda m: m[series] == value,
                                  f"{series} == {value:g}")
