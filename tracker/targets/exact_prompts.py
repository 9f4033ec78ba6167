"""Prompts rebuilt to the exact token counts a suite asks for, in the model's tokenizer.

A suite's synthetic prompts are seeded words (``tracker.inputs.prompts``): exact in the tracker's
word tokenizer, but a model's tokenizer splits words into several tokens (640 words were 2,116
tokens in a small llama.cpp model's vocabulary). Once the target is up, ``adapt_suite_traffic``
cuts each prompt to exactly the requested count in the tokenizer ``open_tokenizer`` found:

- Each text is encoded, its first N ids decoded and the result re-encoded. A boundary where
  tokens merge or split moves the cut until the count is exact (a bounded search).
- For chat and messages endpoints, the system prompt is exactly ``system_prompt_tokens`` and
  each user prompt exactly ``input_tokens`` (the server's chat template adds its own tokens on
  top).
- For completions, the prompt as sent (system, a blank line, user) is exactly ``system_prompt_tokens
  + input_tokens`` including the special tokens the server adds (BOS), as ``vllm bench``'s random
  dataset does, so ``usage.prompt_tokens`` equals what was asked.
- Trace rows (``source: trace``) are each exactly their ``input_length``. A Mooncake row's blocks
  (runs of ``block_tokens`` words, one per hash id) are each fitted once to ``block_tokens``
  tokens, so equal hash ids stay byte-identical prefixes, and the row's rest makes the total
  exact.
- Fixed prompts, datasets and conversations (real text) are sent as written.

The result is the same for the same tokenizer every time (pure apart from the tokenizer's calls).
A tokenizer that fails mid-way leaves every workload in words, and the result says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from tracker.inputs.suites import SyntheticPrompts, Workload, compute_prompts_digest
from tracker.inputs.traffic import Message, PlannedRequest, WorkloadTraffic
from tracker.targets.model_tokenizer import (
    WORDS,
    Tokenizer,
    TokenizerFailed,
    count_tokens,
)

MAX_FIT_ROUNDS = 24  # cuts tried per prompt before the tokenizer is called unusable
CONCURRENT_CALLS = 8  # tokenizer requests in flight at once (an endpoint's)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TokenizedTraffic:
    """A suite's traffic as it will be sent, and which tokenizer its lengths are exact in."""

    traffic: Mapping[str, WorkloadTraffic]
    tokenizer: str  # "words" when the word tokenizer is used
    special_tokens: int  # what the server adds to a completions prompt (BOS), as measured
    fallback: str | None  # why words are used although a model's tokenizer was looked for
    prompts_digest: str  # sha256 of the bytes sent (the suite's own when nothing changed)

    def environment_facts(self) -> dict[str, object]:
        """What a run records about its prompt lengths (never a secret)."""
        return {"tokenizer": self.tokenizer, "tokenizer_special_tokens": self.special_tokens,
                "tokenizer_fallback": self.fallback, "sent_prompts_digest": self.prompts_digest}


async def fit_text(tokenizer: Tokenizer, source: str, tokens: int, prefix: str = "") -> str:
    """A text cut from the start of ``source`` (repeated when short) such that ``prefix + text``
    is exactly ``tokens`` tokens. Raises ``TokenizerFailed`` when no cut is exact."""
    measure = _measure(tokenizer, prefix)
    wanted = tokens - (await measure("") if prefix else 0)
    if wanted <= 0 or not source.strip():
        raise TokenizerFailed(f"cannot build {tokens} tokens after a prefix of "
                              f"{tokens - wanted} from {source[:40]!r}")
    ids = await tokenizer.encode(source)
    text = source
    while len(ids) < wanted + 16:  # enough to cut from, with room for a boundary that merges
        text = f"{text} {source}"
        ids = await tokenizer.encode(text)
    return await _search_cut(tokenizer, ids, wanted, tokens, measure,
                             strip=not source[:1].isspace())


def _measure(tokenizer: Tokenizer, prefix: str) -> Callable[[str], Awaitable[int]]:
    async def measure(text: str) -> int:
        return await count_tokens(tokenizer, prefix + text)
    return measure


async def _search_cut(tokenizer: Tokenizer, ids: list[int], cut: int, tokens: int,
                      measure: Callable[[str], Awaitable[int]], *, strip: bool) -> str:
    """Decode ``ids[:cut]``, count it, move the cut by the difference, and never try a cut twice.
    ``strip``: drop the leading space a SentencePiece decoder gives back (llama.cpp's does)."""
    tried: dict[int, int] = {}
    for _ in range(MAX_FIT_ROUNDS):
        text = await tokenizer.decode(ids[:cut])
        text = text.lstrip() if strip else text
        got = await measure(text)
        if got == tokens:
            return text
        tried[cut] = got
        step = 1 if got < tokens else -1
        cut = min(max(cut + tokens - got, 1), len(ids))
        while cut in tried and 1 <= cut + step <= len(ids):
            cut += step
        if cut in tried:
            break
    closest = sorted(tried.values(), key=lambda got: abs(got - tokens))[:1]
    raise TokenizerFailed(f"no cut of a prompt is exactly {tokens} tokens in {tokenizer.name} "
                          f"(closest: {closest[0] if closest else 'none'})")


async def adapt_traffic(traffic: WorkloadTraffic, workload: Workload,
                        tokenizer: Tokenizer) -> WorkloadTraffic:
    """``traffic`` with its synthetic prompts and trace blocks at exact lengths in ``tokenizer``
    (unchanged for words and for sources sent as written). Raises ``TokenizerFailed``."""
    source = workload.prompts
    if tokenizer.name == WORDS or not traffic.requests:
        return traffic
    gate = asyncio.Semaphore(CONCURRENT_CALLS)
    if isinstance(source, SyntheticPrompts):
        requests = await _adapt_synthetic(traffic.requests, workload, source, tokenizer, gate)
    elif getattr(source, "source", None) == "trace":
        blocks = getattr(source, "block_tokens", None) if getattr(source, "format", None) \
            == "mooncake" else None
        requests = await _adapt_trace(traffic.requests, workload, blocks, tokenizer, gate)
    else:
        return traffic
    return replace(traffic, requests=requests, tokenizer=tokenizer.name)


def _bos(workload: Workload, tokenizer: Tokenizer) -> int:
    """The special tokens a completions prompt gets from the server (chat: in its template)."""
    return tokenizer.special_tokens if workload.endpoint_type == "completions" else 0


async def _adapt_synthetic(requests: tuple[PlannedRequest, ...], workload: Workload,
                           source: SyntheticPrompts, tokenizer: Tokenizer,
                           gate: asyncio.Semaphore) -> tuple[PlannedRequest, ...]:
    system = None
    if source.system_prompt_tokens:
        async with gate:
            system = await fit_text(tokenizer, _system_of(requests[0]),
                                    source.system_prompt_tokens)
    if workload.endpoint_type == "completions":  # the prompt as sent: system, blank line, user
        total = source.system_prompt_tokens + max(source.input_tokens - _bos(workload, tokenizer),
                                                  1)
        prefix = f"{system}\n\n" if system else ""
    else:
        total, prefix = source.input_tokens, ""

    async def rebuild(request: PlannedRequest) -> PlannedRequest:
        async with gate:
            user = await fit_text(tokenizer, request.messages[-1].content, total, prefix)
        opening = (Message("system", system),) if system else ()
        return replace(request, messages=(*opening, Message("user", user)))

    return tuple(await _all(rebuild(r) for r in requests))


def _system_of(request: PlannedRequest) -> str:
    return next(m.content for m in request.messages if m.role == "system")


async def _adapt_trace(requests: tuple[PlannedRequest, ...], workload: Workload,
                       block_tokens: int | None, tokenizer: Tokenizer,
                       gate: asyncio.Semaphore) -> tuple[PlannedRequest, ...]:
    """A trace row's prompt is its blocks' words (``block_tokens`` each), then a shorter rest.
    Each distinct block is fitted once, so equal hash ids stay byte-identical. The rest (or,
    with none, the last block) is fitted so that the whole prompt is exact."""
    chunked = [_chunks(r.messages[-1].content, block_tokens) for r in requests]
    distinct = sorted({c for chunks in chunked for c in chunks[:-1]})
    fitted: dict[str, str] = {}

    async def fit_block(text: str) -> None:
        async with gate:
            fitted[text] = await fit_text(tokenizer, text, block_tokens or 0)

    await _all(fit_block(text) for text in distinct)

    async def rebuild(request: PlannedRequest, chunks: list[str]) -> PlannedRequest:
        head = " ".join(fitted[c] for c in chunks[:-1])
        total = request.requested_input_tokens or len(chunks[-1].split())
        async with gate:
            rest = await fit_text(tokenizer, chunks[-1], max(total - _bos(workload, tokenizer), 1),
                                  f"{head} " if head else "")
        user = f"{head} {rest}" if head else rest
        return replace(request, messages=(*request.messages[:-1], Message("user", user)))

    return tuple(await _all(rebuild(r, c) for r, c in zip(requests, chunked, strict=True)))


async def _all(calls: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """Every call's result, in order. The first failure cancels the rest and is raised."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except ExceptionGroup as failures:
        first = next((e for e in failures.exceptions if isinstance(e, TokenizerFailed)), None)
        if first is None:
            raise
        raise first from None
    return [task.result() for task in tasks]


def _chunks(text: str, block_tokens: int | None) -> list[str]:
    """``text``'s words in runs of ``block_tokens`` (the last may be shorter), or one run if
    None."""
    words = text.split(" ")
    if block_tokens is None or len(words) <= block_tokens:
        return [text]
    return [" ".join(words[i:i + block_tokens]) for i in range(0, len(words), block_tokens)]


async def adapt_suite_traffic(traffic: Mapping[str, WorkloadTraffic],
                              workloads: Sequence[Workload],
                              tokenizer: Tokenizer) -> TokenizedTraffic:
    """Every workload's traffic at exact lengths in ``tokenizer``. If it fails on any, all stay
    in words (one tokenizer for the whole run) and ``fallback`` says why. Never raises for it."""
    fallback: str | None = getattr(tokenizer, "fallback", None)
    adapted: dict[str, WorkloadTraffic] = dict(traffic)
    name, special = tokenizer.name, tokenizer.special_tokens
    try:
        for workload in workloads:
            adapted[workload.name] = await adapt_traffic(traffic[workload.name], workload,
                                                         tokenizer)
    except TokenizerFailed as exc:
        adapted, name, special = dict(traffic), WORDS, 0
        fallback = f"{tokenizer.name} failed while the prompts were built: {exc}"
    return TokenizedTraffic(adapted, name, special, fallback, compute_prompts_digest(adapted))
