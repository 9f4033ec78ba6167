"""The received text counted in the model's tokenizer for the token-count check: the simulator's
vLLM-shaped /tokenize on a real port, the word tokenizer, and a tokenizer that stops answering."""

from __future__ import annotations

from dataclasses import replace

import aiohttp

from tests.sim.sim_support import MODEL, make_config
from tracker.load.generator import Endpoint
from tracker.load.summary import compute_token_count_mismatches
from tracker.results import RequestRecord, TokenSource
from tracker.sim import SimServer
from tracker.targets.model_tokenizer import VllmTokenizer, WordTokenizer
from tracker.targets.output_tokens import run_output_token_counts

CHUNKS_CHECK = ("content chunks (a chunk carries one token or more: more chunks than usage "
                "tokens is a mismatch)")


def record(index: int, text: str | None, *, usage: int, chunks: int,
           error: str | None = None) -> RequestRecord:
    return RequestRecord(index, 0.0, 0.1, 0.5, (0.01,) * (chunks - 1), usage, TokenSource.USAGE,
                         8, TokenSource.USAGE, output_chunks=chunks, output_text=text,
                         error_class=error)


RECORDS = (
    record(0, "alpha beta gamma delta", usage=4, chunks=2),  # two tokens a chunk: fine
    record(1, "alpha beta", usage=4, chunks=2),  # usage says 4, two arrived
    record(2, None, usage=4, chunks=5),  # no text kept: more chunks than tokens
    *(record(3 + i, "one token each", usage=3, chunks=3) for i in range(3)),  # the tokenizer's
    # counts are tried on these first
)


async def test_the_text_is_counted_in_the_targets_tokenizer_and_then_dropped() -> None:
    async with SimServer(make_config()) as sim, aiohttp.ClientSession() as session:
        tokenizer = VllmTokenizer(session, Endpoint(sim.base_url), MODEL)
        counted = await run_output_token_counts(RECORDS, tokenizer)
    assert [r.output_text_tokens for r in counted.records] == [4, 2, None, 3, 3, 3]
    assert all(r.output_text is None for r in counted.records)
    assert "vllm /tokenize's count of the text received (within 1 token), which matched usage " \
           "on 3 of the 3 requests of one token a chunk" in counted.check
    assert counted.check.endswith("; 1 requests without their text: content chunks only")
    assert compute_token_count_mismatches(counted.records) == 2  # 4 vs 2 tokens; 5 chunks > 4


async def test_without_a_model_tokenizer_the_chunks_are_checked() -> None:
    counted = await run_output_token_counts(RECORDS, WordTokenizer())
    assert counted.check == CHUNKS_CHECK
    assert {r.output_text_tokens for r in counted.records} == {None}
    assert all(r.output_text is None for r in counted.records)
    assert compute_token_count_mismatches(counted.records) == 1  # only 5 chunks for 4 tokens
    assert (await run_output_token_counts(RECORDS, None)).check == CHUNKS_CHECK


async def test_a_tokenizer_that_stops_answering_leaves_the_chunk_check_with_the_reason() -> None:
    async with SimServer(make_config()) as sim:
        base_url = sim.base_url
    async with aiohttp.ClientSession() as session:
        tokenizer = VllmTokenizer(session, Endpoint(base_url), MODEL, timeout_s=2.0)
        counted = await run_output_token_counts(RECORDS, tokenizer)
    assert counted.check.startswith(f"{CHUNKS_CHECK}; vllm /tokenize failed while counting")
    assert {r.output_text_tokens for r in counted.records} == {None}


async def test_failed_requests_are_not_counted() -> None:
    failed = replace(RECORDS[0], error_class="http_500", output_tokens=None,
                     output_tokens_source=None)
    counted = await run_output_token_counts([failed], WordTokenizer())
    assert counted.records[0].output_text is None
    assert compute_token_count_mismatches(counted.records) is None
