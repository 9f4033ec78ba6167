"""The token-count check on literal records: chunks bound usage from below, and the tokenizer's
count of the text checks the rest only once it has reproduced usage on this workload's requests
of one token a chunk."""

from __future__ import annotations

from tracker.load.token_check import compute_token_count_check, describe_token_count_check
from tracker.results import RequestRecord, TokenSource


def rec(i: int, *, usage: int, chunks: int, text: int | None = None) -> RequestRecord:
    return RequestRecord(i, 0.0, 0.1, 0.5, (0.01,) * (chunks - 1), usage, TokenSource.USAGE,
                         8, TokenSource.USAGE, output_chunks=chunks, output_text_tokens=text)


ONE_A_CHUNK = [rec(i, usage=16, chunks=16, text=16 - i % 2) for i in range(10)]  # a stop token


def test_more_chunks_than_tokens_is_a_mismatch_and_fewer_is_not_without_a_tokenizer() -> None:
    check = compute_token_count_check([rec(0, usage=16, chunks=13), rec(1, usage=10, chunks=12),
                                       rec(2, usage=16, chunks=16)])
    assert (check.mismatches, check.calibration, check.text_checks) == (1, 0, False)
    assert describe_token_count_check(check, None).startswith("content chunks (a chunk carries")


def test_a_tokenizer_that_reproduces_usage_checks_the_requests_of_several_tokens_a_chunk(
) -> None:
    records = [*ONE_A_CHUNK, rec(10, usage=16, chunks=9, text=16),  # several a chunk: fits
               rec(11, usage=16, chunks=9, text=12),  # four tokens' text missing
               rec(12, usage=16, chunks=20, text=16)]  # more chunks than tokens
    check = compute_token_count_check(records)
    assert (check.mismatches, check.calibration, check.reproduced) == (2, 10, 10)
    assert check.text_checks
    said = describe_token_count_check(check, "vllm /tokenize")
    assert "where a chunk carried several tokens, vllm /tokenize's count of the text received " \
           "(within 1 token), which matched usage on 10 of the 10 requests" in said


def test_a_tokenizer_that_does_not_reproduce_usage_checks_nothing_and_says_so() -> None:
    # a random-weights model: its 64 tokens re-encode to 48..100 tokens of the same tokenizer
    random_weights = [rec(i, usage=64, chunks=64, text=64 + 9 * (i % 5) - 18) for i in range(10)]
    records = [*random_weights, rec(10, usage=64, chunks=40, text=91),
               rec(11, usage=64, chunks=70, text=64)]
    check = compute_token_count_check(records)
    assert (check.mismatches, check.calibration, check.reproduced) == (1, 10, 2)
    assert not check.text_checks
    assert "matched usage on only 2 of the 10 requests of one token a chunk (random weights, " \
           "or a tokenizer other than the server's), so it checks nothing" in \
           describe_token_count_check(check, "vllm /tokenize")


def test_without_a_request_of_one_token_a_chunk_the_tokenizer_is_not_trusted() -> None:
    check = compute_token_count_check([rec(0, usage=16, chunks=8, text=11)])
    assert (check.mismatches, check.text_checks) == (0, False)
    assert "no request arrived one token a chunk" in describe_token_count_check(check, "t")


def test_failed_requests_and_requests_without_usage_are_not_checked() -> None:
    failed = RequestRecord(0, 0.0, None, None, (), None, None, None, None, error_class="http_500")
    chunks_only = RequestRecord(1, 0.0, 0.1, 0.5, (), 3, TokenSource.CHUNKS, 8,
                                TokenSource.USAGE, output_chunks=3)
    assert compute_token_count_check([failed, chunks_only]).mismatches is None
