"""The load generator's part of the result JSON and of the terminal text (an edge: ms here).

Keys follow ``vllm bench serve`` where it has one (``request_rate``, ``burstiness``,
``max_concurrency``, ``request_goodput``). The scheduled latencies use its key pattern
(``mean_scheduled_ttft_ms``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracker.load.summary import (
    compute_input_token_overhead,
    compute_turn_summaries,
)
from tracker.metrics import compute_hit_rate, compute_request_hit_rate
from tracker.redaction import redact_optional
from tracker.results import (
    LatencyStats,
    RequestRecord,
    RunResult,
    WorkloadResult,
    compute_latency_stats,
    compute_session_durations,
)
from tracker.targets.output_tokens import CHECK_KEY

LOAD_DEFINITIONS = {
    "scheduled_ttft": "open loop only: time to first token from the request's planned start, so "
                      "waiting for a concurrency slot, a connection or the client's event loop "
                      "is not hidden",
    "scheduled_e2el": "open loop only: end-to-end latency from the request's planned start",
    "arrivals": "open loop: gaps between planned starts are gamma distributed with shape "
                "burstiness and mean 1/request_rate (burstiness 1 = Poisson); request_rate "
                "null = all at once",
    "request_goodput": "requests per second that met every SLO (slos); TTFT and E2E from the "
                       "planned start in open loop",
    "slo_attainment": "share of all requests, failed ones included, that met every SLO",
    "capacity_at_slo_req_per_s": "sweep: the highest planned request rate whose probe met the "
                                 "SLOs for at least min_attainment of its requests",
    "token_count_mismatches": "successful requests whose usage.completion_tokens does not fit "
                              "what arrived: more content chunks than usage tokens (a chunk "
                              "carries one token or more), or, where chunks carried several, "
                              "more than 1 token away from the model's tokenizer's count of the "
                              "text received, once that tokenizer matched usage on the "
                              "workload's requests of one token a chunk; token_count_check says "
                              "what was compared",
    "input_token_count_mismatches": "successful requests whose usage.prompt_tokens is not the "
                                    "input length the suite asked for (requested_input_tokens) "
                                    "plus the workload's input_token_overhead, within one token",
    "input_token_overhead": "median of usage.prompt_tokens - requested_input_tokens: the tokens "
                            "the server adds itself (a chat template's, a BOS); 0 when prompt "
                            "lengths are exact on completions",
    "prefix_cache_hit_rate": "share of the prompt tokens the server served from its prefix "
                             "cache: its /metrics counters over the whole workload where it "
                             "exposes them (prefix_cache_hit_rate_source server_counters), else "
                             "sum(cached_input_tokens) / sum(input_tokens) over the requests "
                             "whose usage gave both (request_usage; the /turn-1 and /turns-2+ "
                             "splits always); null: not measured",
    "cached_input_tokens": "per request: usage.prompt_tokens_details.cached_tokens (vLLM with "
                           "--enable-prompt-tokens-details, llama.cpp, SGLang); vLLM leaves it "
                           "out on a miss, so where any request of a workload reported it, a "
                           "request with usage but without it counts 0; null: the server did "
                           "not say",
    "trace": "load mode trace: requests start at the trace's own times (after time_scale); "
             "scheduled latencies count from those times, so a server that falls behind shows it",
    "sessions": "multi-turn: each request carries the whole conversation so far; a failed turn "
                "ends its conversation and its later turns are not sent (unsent_turns); "
                "<workload>/turn-1 and <workload>/turns-2+ are the same records split by turn",
    "client_bound": "the load generator, not the server, set the pace (requests left late, its "
                    "event loop lagged, or its CPU was saturated); such a workload is never "
                    "compared as the server's numbers",
}


def to_ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


def render_stats_ms(key: str, stats: LatencyStats | None) -> dict[str, float | None]:
    """``mean_/median_/std_/p90_/p99_{key}_ms``, as ``vllm bench serve`` names them."""
    return {f"{stat}_{key}_ms": to_ms(getattr(stats, f"{stat}_s") if stats else None)
            for stat in ("mean", "median", "std", "p90", "p99")}


def render_load_json(result: WorkloadResult) -> dict[str, Any]:
    """The load shape, open-loop latencies, goodput and client health of one workload."""
    s, load = result.summary, result.params.get("load") or {}
    open_loop = load.get("mode") in ("open", "trace")
    client, hit_rate = s.client, compute_hit_rate(result)
    body: dict[str, Any] = {
        "request_rate": load.get("request_rate") if open_loop else None,
        "burstiness": load.get("burstiness") if open_loop else None,
        "max_concurrency": load.get("max_concurrency") if open_loop else None,
        **render_stats_ms("scheduled_ttft", s.scheduled_ttft),
        **render_stats_ms("scheduled_e2el", s.scheduled_e2el),
        "request_goodput": s.goodput_req_per_s,
        "slo_attainment": s.slo_attainment,
        "slos": result.params.get("slos"),
        "capacity_at_slo_req_per_s": s.capacity_at_slo_req_per_s,
        "token_count_mismatches": s.token_count_mismatches,
        "token_count_check": result.params.get(CHECK_KEY),
        "input_token_count_mismatches": s.input_token_count_mismatches,
        "input_token_overhead": compute_input_token_overhead(result.records),
        "prefix_cache_hit_rate": None if hit_rate is None else hit_rate[0],
        "prefix_cache_hit_rate_source": None if hit_rate is None else hit_rate[1],
        "client_bound": result.client_bound,
        "client_health": None if client is None else {
            "cpu_fraction": client.cpu_fraction,
            "loop_lag_p99_ms": to_ms(client.loop_lag_p99_s),
            "loop_lag_max_ms": to_ms(client.loop_lag_max_s),
            "send_lag_p50_ms": to_ms(client.send_lag_p50_s),
            "send_lag_p99_ms": to_ms(client.send_lag_p99_s),
            "send_lag_max_ms": to_ms(client.send_lag_max_s),
            "reason": client.reason,
        },
    }
    if "sweep_result" in result.params:
        body["sweep"] = result.params["sweep_result"]
    if load.get("mode") == "trace":
        body["load_mode"] = "trace"
    if "sessions" in load:
        body["sessions"] = render_sessions_json(result)
    return body


def render_sessions_json(result: WorkloadResult) -> dict[str, Any]:
    """A multi-turn workload's conversations and its summary per turn number (from its records,
    where a derived ``/turn-1`` or ``/turns-2+`` result names the workload it was split from)."""
    s, sessions = result.summary, dict(result.params["load"]["sessions"])
    records = result.records
    ended = {r.session for r in records if not r.ok and r.session is not None}
    by_turn: dict[int, list[RequestRecord]] = {}
    for record in records:
        by_turn.setdefault(record.turn or 0, []).append(record)
    sent = s.completed + s.failed
    sessions.update(
        unsent_turns=result.num_requests - sent if result.complete and records else None,
        ended_by_a_failure=len(ended) if records else None,
        split_from=(result.params.get("turns") or {}).get("of"),
        turns=[{"turn": turn, "completed": t.completed, "failed": t.failed,
                "mean_input_tokens": t.total_input_tokens / t.completed if t.completed else None,
                "prefix_cache_hit_rate": compute_request_hit_rate(by_turn[turn]),
                **render_stats_ms("ttft", t.ttft), **render_stats_ms("e2el", t.e2el)}
               for turn, t in compute_turn_summaries(records, s.duration_s).items()],
        **_per_session(records),
    )
    return sessions


def _per_session(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """Per conversation: how many ran every turn they were sent without a failure, and how long
    one took from its first request leaving to its last answer's end (think time included)."""
    by_session: dict[int, list[RequestRecord]] = {}
    for record in records:
        if record.session is not None:
            by_session.setdefault(record.session, []).append(record)
    durations = compute_session_durations(records)  # the sessions without a failure
    return {"sessions_without_a_failure": len(durations) if by_session else None,
            "mean_turns_per_session": (sum(len(t) for t in by_session.values()) / len(by_session)
                                       if by_session else None),
            **render_stats_ms("session_duration", compute_latency_stats(durations))}


def render_request_json(record: RequestRecord) -> dict[str, Any]:
    """One request as ``--save-requests`` writes it (a JSON line, milliseconds)."""
    requested, used = record.requested_input_tokens, record.input_tokens
    return {
        "index": record.index, "session": record.session, "turn": record.turn,
        "scheduled_start_ms": to_ms(record.scheduled_start_s), "start_ms": to_ms(record.start_s),
        "ttft_ms": to_ms(record.ttft_s), "tpot_ms": to_ms(record.tpot_s),
        "e2el_ms": to_ms(record.e2el_s), "scheduled_ttft_ms": to_ms(record.scheduled_ttft_s),
        "itl_ms": [gap * 1000.0 for gap in record.itl_s], "output_tokens": record.output_tokens,
        "output_tokens_source": record.output_tokens_source, "output_chunks": record.output_chunks,
        "output_text_tokens": record.output_text_tokens, "requested_input_tokens": requested,
        "input_tokens": used,
        "input_tokens_source": record.input_tokens_source,
        "input_tokens_delta": used - requested
        if used is not None and requested is not None and record.ok else None,
        "cached_input_tokens": record.cached_input_tokens,
        "error_class": record.error_class, "error": redact_optional(record.error),
    }


def render_load_label(result: WorkloadResult) -> str:
    """The ``conc`` column: the concurrency, or the open-loop rate."""
    load = result.params.get("load") or {}
    if load.get("mode") == "trace":
        label = "trace"
    elif load.get("mode") != "open":
        return str(result.concurrency)
    else:
        rate = load.get("request_rate")
        label = "inf" if rate is None else f"{rate:g}/s"
    if load.get("max_concurrency"):
        label += f" max{load['max_concurrency']}"
    return label


def render_load_lines(workloads: Sequence[WorkloadResult]) -> list[str]:
    """Goodput, capacity and client-bound lines for the text report."""
    lines: list[str] = []
    for w in workloads:
        s = w.summary
        if s.capacity_at_slo_req_per_s is not None or "sweep_result" in w.params:
            capacity = s.capacity_at_slo_req_per_s
            lines.append(f"{w.name}: capacity at SLO "
                         + (f"{capacity:g} req/s" if capacity is not None
                            else "not found (no probed rate met the SLOs)"))
        elif s.goodput_req_per_s is not None and s.slo_attainment is not None:
            lines.append(f"{w.name}: goodput {s.goodput_req_per_s:.2f} req/s "
                         f"({s.slo_attainment:.0%} of requests met the SLOs)")
        if s.scheduled_ttft is not None and s.ttft is not None:
            lines.append(f"{w.name}: TTFT p99 from the planned start "
                         f"{s.scheduled_ttft.p99_s * 1000:.1f} ms (from the send "
                         f"{s.ttft.p99_s * 1000:.1f} ms)")
        if s.token_count_mismatches:
            check = w.params.get(CHECK_KEY)
            lines.append(f"{w.name}: {s.token_count_mismatches} requests where the server's token "
                         "count does not fit what arrived"
                         + (f" (checked against {check})" if check else ""))
        if s.input_token_count_mismatches:
            overhead = compute_input_token_overhead(w.records)
            lines.append(f"{w.name}: {s.input_token_count_mismatches} requests where the server's "
                         "prompt token count is not the input length asked for"
                         + (f" (plus the {overhead} tokens it adds to most)" if overhead else ""))
        if w.client_bound and s.client is not None:
            lines.append(f"CLIENT-BOUND {w.name}: {s.client.reason}")
    return lines


def render_run_load_lines(run: RunResult) -> list[str]:
    return render_load_lines(run.workloads)
