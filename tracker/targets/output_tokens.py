"""The token-count check's other side: the text each request received, in the model's tokenizer.

A streamed chunk may carry several tokens (vLLM puts them in one chunk when the client falls
behind), so the number of chunks is no count of tokens. After a workload, never while it is
timed, each successful request's received text (``RequestRecord.output_text``) is encoded with
the tokenizer the prompts were built with (the target's ``/tokenize`` or the config's
tokenizer.json) and the count goes in ``output_text_tokens``, which ``tracker.load.summary``
compares with the server's ``usage.completion_tokens``. The text itself is dropped here: it is
never stored.

Without a model tokenizer (words: the embedded simulator, a gateway without ``/tokenize``), or when
it stops answering, nothing is counted and the check falls back to the chunks: only more content
chunks than usage tokens is a mismatch. Where the counts are not the server's (a random-weights
model re-tokenizes otherwise) the check finds it out itself (``tracker.load.token_check``).
``params["token_count_check"]`` of each workload says what its check compared usage with
(``with_token_check``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tracker.load.token_check import compute_token_count_check, describe_token_count_check
from tracker.results import RequestRecord, WorkloadResult
from tracker.targets.model_tokenizer import WORDS, Tokenizer, TokenizerFailed, count_tokens

CONCURRENT_CALLS = 8  # tokenizer requests in flight at once (an endpoint's)
CHECK_KEY = "token_count_check"  # the workload's params entry: what usage was checked against


@dataclass(frozen=True, slots=True)
class OutputCounts:
    records: tuple[RequestRecord, ...]  # with output_text_tokens where counted, no texts
    check: str  # what usage was checked against, in words (``CHECK_KEY``)


def drop_output_texts(records: Sequence[RequestRecord]) -> tuple[RequestRecord, ...]:
    """The records without their received texts (what is kept of a cut-short workload)."""
    return tuple(replace(r, output_text=None) if r.output_text is not None else r
                 for r in records)


async def run_output_token_counts(records: Sequence[RequestRecord],
                                  tokenizer: Tokenizer | None) -> OutputCounts:
    """Each successful record's received text counted in ``tokenizer`` (one call per distinct
    text, a few at once). When there is no model tokenizer or it fails, the chunk check is used,
    with the reason. It never raises for the tokenizer."""
    if tokenizer is None or tokenizer.name == WORDS:
        return _uncounted(records)
    texts = sorted({r.output_text for r in records if r.ok and r.output_text is not None})
    gate = asyncio.Semaphore(CONCURRENT_CALLS)
    counts: dict[str, int] = {}

    async def count(text: str) -> None:
        async with gate:
            counts[text] = await count_tokens(tokenizer, text) if text else 0

    try:
        async with asyncio.TaskGroup() as group:
            for text in texts:
                group.create_task(count(text))
    except ExceptionGroup as failures:
        first = next((e for e in failures.exceptions if isinstance(e, TokenizerFailed)), None)
        if first is None:
            raise
        return _uncounted(records, f"{tokenizer.name} failed while counting the text "
                                   f"received: {first}")
    counted = tuple(
        replace(r, output_text=None, output_text_tokens=counts[r.output_text])
        if r.ok and r.output_text is not None else replace(r, output_text=None)
        for r in records)
    check = describe_token_count_check(compute_token_count_check(counted), tokenizer.name)
    uncounted = sum(1 for r in counted if r.ok and r.output_text_tokens is None)
    if uncounted:  # past the requests whose text is kept (TEXT_KEPT_REQUESTS), or undecodable
        check += f"; {uncounted} requests without their text: content chunks only"
    return OutputCounts(counted, check)


def _uncounted(records: Sequence[RequestRecord], why: str | None = None) -> OutputCounts:
    """The records without their texts, checked against their chunks alone."""
    dropped = drop_output_texts(records)
    check = describe_token_count_check(compute_token_count_check(dropped), None)
    return OutputCounts(dropped, check if why is None else f"{check}; {why}")


def with_token_check(result: WorkloadResult, check: str) -> WorkloadResult:
    """The result with what its token-count check compared usage with in its params."""
    return replace(result, params={**result.params, CHECK_KEY: check})
