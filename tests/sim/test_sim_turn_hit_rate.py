"""The prefix-cache hit rate per turn of multi-turn sessions on the real simulator: a later turn
carries the earlier ones, so with prefix caching on its requests report more cached tokens
(``usage.prompt_tokens_details.cached_tokens``) than the first turns; with it off, none."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import aiohttp
import pytest

from tests.sim.conftest import ServerFactory
from tests.sim.sim_support import MODEL, make_config
from tracker.http_client.sse import StreamScanner
from tracker.inputs.suites import Workload
from tracker.inputs.traffic import PlannedSession, PlannedTurn, WorkloadTraffic
from tracker.load.bodies import build_session_requests
from tracker.load.generator import Endpoint, LoadOutcome
from tracker.load.phases import (
    Phase,
    WorkloadPhases,
    build_session_plan,
    compute_phase_result,
    compute_turn_results,
)
from tracker.load.sessions import SessionGenerator, SessionPlan
from tracker.metrics import compute_workload_metrics
from tracker.reports.load_report import render_load_json, render_request_json
from tracker.results import RequestRecord, TokenSource, WorkloadResult

HIT_RATE = "prefix_cache_hit_rate"
SESSIONS, TURNS = 3, 3


def _words(tag: str, count: int) -> str:
    return " ".join(f"{tag}{i}" for i in range(count))


def _session_plan() -> tuple[Workload, Phase, SessionPlan]:
    """Three conversations of three turns behind one shared 64-token system prompt, with the
    recorded answers as history (so every body is known before it is sent)."""
    workload = Workload.model_validate({
        "name": "chat", "prompts": {"source": "fixed", "text": "x"}, "max_tokens": 4,
        "ignore_eos": True, "concurrency": 1, "num_requests": SESSIONS})
    traffic = WorkloadTraffic(sessions=tuple(
        PlannedSession(tuple(PlannedTurn(_words(f"s{s}q{t}x", 20), _words(f"s{s}a{t}x", 20))
                             for t in range(1, TURNS + 1)), system=_words("sys", 64))
        for s in range(SESSIONS)), history="recorded")
    warm, measured = build_session_requests(workload, traffic, model=MODEL,
                                            supports_ignore_eos=True)
    phase = WorkloadPhases(workload, 0, traffic).next_phase()
    assert phase is not None
    return workload, phase, build_session_plan(workload, phase, warm, measured, think_time_s=0.0)


async def _send_turn_by_turn(base_url: str, plan: SessionPlan) -> tuple[RequestRecord, ...]:
    """Each conversation's turns one after another, read with the tracker's SSE scanner."""
    records = []
    async with aiohttp.ClientSession() as client:
        for number, session in enumerate(plan.measured):
            for turn in range(session.turns):
                spec = session.request(turn, [])
                scanner, sent = StreamScanner(), time.perf_counter()
                async with client.post(base_url + plan.load.path, data=spec.body,
                                       headers={"Content-Type": "application/json"}) as reply:
                    assert reply.status == 200
                    async for data in reply.content.iter_any():
                        scanner.feed(data, time.perf_counter())
                scanner.finish()
                assert scanner.done and scanner.prompt_tokens is not None
                records.append(RequestRecord(
                    len(records), sent, scanner.chunk_times[0] - sent, time.perf_counter() - sent,
                    (), scanner.completion_tokens, TokenSource.USAGE, scanner.prompt_tokens,
                    TokenSource.USAGE, session=number, turn=turn + 1,
                    cached_input_tokens=scanner.cached_tokens))
    return tuple(records)


def _results(outcome: LoadOutcome) -> dict[str, WorkloadResult]:
    """The phase's result and its /turn-1 and /turns-2+ splits, by name."""
    workload, phase, plan = _session_plan()
    whole = compute_phase_result(workload, phase, plan, outcome)
    return {r.name: r for r in (whole, *compute_turn_results(workload, plan, whole))}


@pytest.mark.parametrize("caching", [True, False])
async def test_later_turns_have_a_higher_hit_rate_with_prefix_caching_on(
        start_server: ServerFactory, caching: bool) -> None:
    server = await start_server(make_config({"enable_prefix_caching": caching, "block_size": 16}))
    _, _, plan = _session_plan()
    now = datetime.now(UTC)
    records = await _send_turn_by_turn(server.base_url, plan)
    results = _results(LoadOutcome(records, now, now, 1.0, True))
    rates = {name: compute_workload_metrics(r).get(HIT_RATE) for name, r in results.items()}
    if not caching:  # the simulator, as vLLM, says nothing when nothing was cached
        assert rates == {"chat": None, "chat/turn-1": None, "chat/turns-2+": None}
        body = render_load_json(results["chat"])
        assert (body["prefix_cache_hit_rate"], body["prefix_cache_hit_rate_source"]) == (None, None)
        return
    first, later = rates["chat/turn-1"], rates["chat/turns-2+"]
    assert first is not None and later is not None
    # turn 1: the first conversation misses, the others find the shared system prompt (64 of 84)
    assert first == pytest.approx(2 * 64 / (3 * 84))
    # turn t finds the full blocks of turn t-1's prompt: 80 of 124, then 112 of 164 tokens
    assert later == pytest.approx((80 + 112) / (124 + 164))
    assert later > first
    assert [r.cached_input_tokens for r in results["chat"].records][:3] == [0, 80, 112]
    # the result JSON: per workload with where the rate came from, per turn, per request line
    body = render_load_json(results["chat/turns-2+"])
    assert (body["prefix_cache_hit_rate"], body["prefix_cache_hit_rate_source"]) == \
        (later, "request_usage")
    turns = render_load_json(results["chat"])["sessions"]["turns"]
    assert [t["prefix_cache_hit_rate"] for t in turns] == pytest.approx(
        [first, 3 * 80 / (3 * 124), 3 * 112 / (3 * 164)])
    assert render_request_json(results["chat"].records[1])["cached_input_tokens"] == 80


async def test_the_load_generator_records_the_cached_tokens_the_simulator_reports(
        start_server: ServerFactory) -> None:
    server = await start_server(make_config({"enable_prefix_caching": True, "block_size": 16}))
    _, _, plan = _session_plan()
    results = _results(await SessionGenerator(Endpoint(server.base_url), plan).run())
    assert [r.cached_input_tokens for r in results["chat"].records][:3] == [0, 80, 112]
    later = compute_workload_metrics(results["chat/turns-2+"]).get(HIT_RATE)
    first = compute_workload_metrics(results["chat/turn-1"]).get(HIT_RATE)
    assert first is not None and later is not None and later > first
