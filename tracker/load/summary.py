"""Per-workload summaries from request records (pure, with vLLM ``bench serve`` semantics).

Latency statistics (``tracker.results.compute_latency_stats``, which imported tools' per-request
values share): percentiles interpolate linearly between order statistics (numpy's default) and
the standard deviation is the population one (``ddof=0``), as ``vllm bench serve`` computes
them, so numbers can be compared with it. Only successful requests enter latency statistics and
token totals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace

from tracker.load.slo import Slo, compute_goodput
from tracker.load.token_check import compute_token_count_check
from tracker.results import (
    ClientHealth,
    RequestRecord,
    TokenSource,
    WorkloadSummary,
    compute_latency_stats,
)


def compute_token_source(sources: Iterable[TokenSource | None]) -> TokenSource | None:
    seen = {s for s in sources if s is not None}
    if not seen:
        return None
    if len(seen) == 1:
        return seen.pop()
    return TokenSource.MIXED


def _per_second(amount: float, duration_s: float) -> float | None:
    return amount / duration_s if duration_s > 0 else None


def compute_token_count_mismatches(records: Iterable[RequestRecord]) -> int | None:
    """Successful requests whose server usage does not fit what arrived
    (``tracker.load.token_check``: more chunks than tokens, or, where a chunk carried several,
    the model's tokenizer's count of the text), or None when no request had usage."""
    return compute_token_count_check(records).mismatches


INPUT_TOKEN_SLACK = 1  # a prompt's first word may merge with a chat template's last token


def _input_token_overheads(records: Iterable[RequestRecord]) -> list[int]:
    return [r.input_tokens - r.requested_input_tokens for r in records
            if r.ok and r.input_tokens_source is TokenSource.USAGE
            and r.input_tokens is not None and r.requested_input_tokens is not None]


def _typical(overheads: list[int]) -> int:
    """The lower median: a token count that one of the requests had."""
    return sorted(overheads)[(len(overheads) - 1) // 2]


def compute_input_token_overhead(records: Iterable[RequestRecord]) -> int | None:
    """The median of ``usage.prompt_tokens`` minus the input length asked for: the tokens the
    server adds on its own (a chat template's, a BOS), 0 when lengths are exact on completions,
    or None when no request had both."""
    overheads = _input_token_overheads(records)
    return _typical(overheads) if overheads else None


def compute_input_token_count_mismatches(records: Iterable[RequestRecord]) -> int | None:
    """Successful requests whose server ``usage.prompt_tokens`` is not the input length the
    suite asked for plus the workload's own overhead (``compute_input_token_overhead``, within
    one token where the server adds some, as a template's last token may merge): prompts the
    server did not count as asked (words in another tokenizer, a cut prompt). A chat
    template's tokens, the same on every request, are not a mismatch. The count is None when no
    request had both counts (nothing asked, or no usage)."""
    overheads = _input_token_overheads(records)
    if not overheads:
        return None
    typical = _typical(overheads)
    slack = INPUT_TOKEN_SLACK if typical else 0  # exact prompts with nothing added: exact
    return sum(1 for o in overheads if abs(o - typical) > slack)


def complete_cached_tokens(records: Sequence[RequestRecord]) -> tuple[RequestRecord, ...]:
    """The records with vLLM's silent misses made 0: vLLM leaves ``prompt_tokens_details`` out
    of the usage when no prompt token was cached, even with ``--enable-prompt-tokens-details``.
    So where any request of the workload carried ``cached_input_tokens``, a successful request
    whose usage gave ``prompt_tokens`` but no cached count cached none. Where no request
    carried one (the server does not report it) every count stays None: not measured."""
    if not any(r.cached_input_tokens is not None for r in records):
        return tuple(records)
    return tuple(replace(r, cached_input_tokens=0)
                 if r.ok and r.cached_input_tokens is None
                 and r.input_tokens_source is TokenSource.USAGE else r
                 for r in records)


def compute_turn_summaries(records: Sequence[RequestRecord],
                           duration_s: float) -> dict[int, WorkloadSummary]:
    """Turn number -> the summary of that turn's records (multi-turn workloads, empty for
    others), with throughputs over the whole ``duration_s``."""
    by_turn: dict[int, list[RequestRecord]] = {}
    for record in records:
        if record.turn is not None:
            by_turn.setdefault(record.turn, []).append(record)
    return {turn: compute_workload_summary(found, duration_s)
            for turn, found in sorted(by_turn.items())}


def compute_workload_summary(records: Sequence[RequestRecord], duration_s: float, *,
                             slo: Slo | None = None,
                             client: ClientHealth | None = None) -> WorkloadSummary:
    ok = [r for r in records if r.ok]
    input_tokens = sum(r.input_tokens or 0 for r in ok)
    output_tokens = sum(r.output_tokens or 0 for r in ok)
    goodput, attainment = compute_goodput(records, slo, duration_s) if slo else (None, None)
    return WorkloadSummary(
        completed=len(ok),
        failed=len(records) - len(ok),
        duration_s=duration_s,
        total_input_tokens=input_tokens,
        total_output_tokens=output_tokens,
        request_throughput_per_s=_per_second(len(ok), duration_s),
        output_throughput_tokens_per_s=_per_second(output_tokens, duration_s),
        total_token_throughput_tokens_per_s=_per_second(input_tokens + output_tokens, duration_s),
        ttft=compute_latency_stats(r.ttft_s for r in ok if r.ttft_s is not None),
        tpot=compute_latency_stats(t for r in ok if (t := r.tpot_s) is not None),
        itl=compute_latency_stats(gap for r in ok for gap in r.itl_s),
        e2el=compute_latency_stats(r.e2el_s for r in ok if r.e2el_s is not None),
        output_tokens_source=compute_token_source(r.output_tokens_source for r in ok),
        input_tokens_source=compute_token_source(r.input_tokens_source for r in ok),
        errors=dict(Counter(r.error_class for r in records if r.error_class is not None)),
        scheduled_ttft=compute_latency_stats(
            t for r in ok if (t := r.scheduled_ttft_s) is not None),
        scheduled_e2el=compute_latency_stats(
            t for r in ok if (t := r.scheduled_e2el_s) is not None),
        goodput_req_per_s=goodput,
        slo_attainment=attainment,
        token_count_mismatches=compute_token_count_mismatches(records),
        input_token_count_mismatches=compute_input_token_count_mismatches(records),
        client=client,
    )
