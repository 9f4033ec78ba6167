"""Whether the server's ``usage.completion_tokens`` fits what arrived (pure).

A content chunk carries at least one token, and often several: vLLM puts every token generated
since the last one it sent into the next chunk when the client falls behind. So:

- More content chunks than usage tokens cannot happen: it is a mismatch, always.
- As many chunks as tokens: usage is confirmed, one token a chunk.
- Fewer chunks than tokens: the chunks cannot say. Where the received text was counted in the
  model's tokenizer (``RequestRecord.output_text_tokens``), that count checks usage, within
  ``TEXT_TOKEN_SLACK`` (a stop token is counted but not sent as text) — once the tokenizer has
  shown it reproduces the server's counts on this workload's own requests that arrived one token
  a chunk (at least ``FAITHFUL_SHARE`` of them within the slack). Re-tokenizing a model's output
  is not always its token count: a random-weights model's text re-encodes to other tokens
  (measured on vLLM 0.32 with a 4,096-token BPE: 64 tokens re-counted as 48 to 100), and a
  tokenizer other than the server's counts its own way. Such a tokenizer checks nothing, and the
  check says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tracker.results import RequestRecord, TokenSource

TEXT_TOKEN_SLACK = 1  # a stop token is counted in usage but not sent as text
FAITHFUL_SHARE = 0.9  # of the one-token-a-chunk requests the tokenizer must count within slack


@dataclass(frozen=True, slots=True)
class TokenCountCheck:
    """A workload's check, where ``mismatches`` is None when no request had usage to check."""

    mismatches: int | None
    calibration: int  # requests of one token a chunk whose text was counted
    reproduced: int  # of those, the ones the tokenizer counted within the slack

    @property
    def text_checks(self) -> bool:
        """The tokenizer's counts check the requests whose chunks carried several tokens."""
        return self.calibration > 0 and self.reproduced >= FAITHFUL_SHARE * self.calibration


def _checked(records: Iterable[RequestRecord]) -> list[tuple[int, int, int | None]]:
    """(usage, chunks, text count) of the successful requests with usage and a chunk count."""
    return [(r.output_tokens, r.output_chunks, r.output_text_tokens) for r in records
            if r.ok and r.output_tokens_source is TokenSource.USAGE
            and r.output_tokens is not None and r.output_chunks is not None]


def compute_token_count_check(records: Iterable[RequestRecord]) -> TokenCountCheck:
    checked = _checked(records)
    calibration = [(usage, text) for usage, chunks, text in checked
                   if chunks == usage and text is not None]
    reproduced = sum(1 for usage, text in calibration if abs(usage - text) <= TEXT_TOKEN_SLACK)
    check = TokenCountCheck(None, len(calibration), reproduced)
    if not checked:
        return check
    mismatches = 0
    for usage, chunks, text in checked:
        if chunks > usage:
            mismatches += 1
        elif chunks < usage and text is not None and check.text_checks:
            mismatches += abs(usage - text) > TEXT_TOKEN_SLACK
    return TokenCountCheck(mismatches, check.calibration, check.reproduced)


def describe_token_count_check(check: TokenCountCheck, tokenizer: str | None) -> str:
    """What usage was checked against, in words (``tokenizer`` is the one that counted the text
    received, or None when none did)."""
    chunks = ("content chunks (a chunk carries one token or more: more chunks than usage tokens "
              "is a mismatch)")
    if tokenizer is None:
        return chunks
    if check.text_checks:
        return (f"{chunks}; where a chunk carried several tokens, {tokenizer}'s count of the "
                f"text received (within {TEXT_TOKEN_SLACK} token), which matched usage on "
                f"{check.reproduced} of the {check.calibration} requests of one token a chunk")
    if not check.calibration:
        return (f"{chunks}; no request arrived one token a chunk to try {tokenizer}'s count of "
                "the text received against, so it checks nothing")
    return (f"{chunks}; {tokenizer}'s count of the text received matched usage on only "
            f"{check.reproduced} of the {check.calibration} requests of one token a chunk "
            "(random weights, or a tokenizer other than the server's), so it checks nothing")
