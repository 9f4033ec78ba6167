"""Trace replay: requests leave at the trace's own times, against a real server that records them."""

from __future__ import annotations

from typing import Any

from tests.scripted_server import Reply, ScriptedServer, ServerFactory, token_stream
from tracker.inputs.prompts import derive_seed, generate_words
from tracker.inputs.suites import Workload
from tracker.inputs.traffic import Message, PlannedRequest, WorkloadTraffic
from tracker.load.bodies import build_request_specs
from tracker.load.generator import Endpoint, LoadGenerator
from tracker.load.phases import WorkloadPhases, build_plan, compute_phase_result
from tracker.reports.load_report import render_load_json, render_load_label
from tracker.results import WorkloadResult

BLOCK_WORDS = 64


def workload(**fields: Any) -> Workload:
    return Workload.model_validate({"name": "trace", "prompts": {"source": "fixed", "text": "x"},
                                    "max_tokens": 64, "num_requests": 1, "concurrency": 8,
                                    **fields})


def row(arrival_s: float, prompt: str = "hello", max_tokens: int = 4,
        requested: int | None = None) -> PlannedRequest:
    return PlannedRequest((Message("user", prompt),), max_tokens=max_tokens, arrival_s=arrival_s,
                          requested_input_tokens=requested)


async def replay(server: ScriptedServer, w: Workload, rows: list[PlannedRequest]
                 ) -> WorkloadResult:
    traffic = WorkloadTraffic(requests=tuple(rows))
    warm, measured = build_request_specs(w, traffic, model="m", supports_ignore_eos=False)
    phases = WorkloadPhases(w, 0, traffic)
    phase = phases.next_phase()
    assert phase is not None and phase.trace
    plan = build_plan(w, phase, warm, measured)
    outcome = await LoadGenerator(Endpoint(server.url), plan).run()
    phases.record(phase, compute_phase_result(w, phase, plan, outcome))
    assert phases.next_phase() is None  # a trace is one phase
    return compute_phase_result(w, phase, plan, outcome)


async def test_requests_leave_at_the_traces_times_and_never_before(
        scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(2, ttft_s=0.0, itl_s=0.0))
    times = [0.0, 0.03, 0.06, 0.12, 0.2]
    result = await replay(server, workload(), [row(t) for t in times])
    assert [r.scheduled_start_s for r in result.records] == times
    assert all(r.start_s >= r.scheduled_start_s for r in result.records
               if r.scheduled_start_s is not None)
    arrivals = [s.received_at - server.served[0].received_at for s in server.served]
    assert all(got >= planned - 0.005 for got, planned in zip(arrivals[1:], times[1:],
                                                               strict=True))
    assert result.params["load"]["mode"] == "trace"
    assert result.params["load"]["request_rate"] == (len(times) - 1) / times[-1]
    assert render_load_label(result) == "trace max8"
    assert render_load_json(result)["load_mode"] == "trace"


async def test_warmup_rows_go_first_and_the_replay_counts_from_the_first_measured_row(
        scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(2, ttft_s=0.0, itl_s=0.0))
    rows = [row(-0.5, "warm"), row(0.0, "a"), row(0.05, "b")]
    result = await replay(server, workload(warmup_requests=1), rows)
    assert [s.body["messages"][0]["content"] for s in server.served] == ["warm", "a", "b"]
    assert [r.scheduled_start_s for r in result.records] == [0.0, 0.05]
    assert result.warmup_requests == 1 and result.num_requests == 2


async def test_each_row_asks_for_its_own_output_and_records_the_requested_input(
        scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(2, ttft_s=0.0, itl_s=0.0,
                                                      prompt_tokens=257))
    rows = [row(0.0, max_tokens=7, requested=256), row(0.01, max_tokens=300, requested=257)]
    result = await replay(server, workload(), rows)
    assert [s.body["max_tokens"] for s in server.served] == [7, 300]
    assert [(r.requested_input_tokens, r.input_tokens) for r in result.records] == [
        (256, 257), (257, 257)]
    assert result.summary.input_token_count_mismatches == 1
    assert render_load_json(result)["input_token_count_mismatches"] == 1


async def test_scheduled_latency_counts_from_the_trace_when_the_server_falls_behind(
        scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(2, ttft_s=0.1, itl_s=0.0))
    result = await replay(server, workload(concurrency=1), [row(t) for t in (0.0, 0.01, 0.02)])
    last = result.records[-1]
    assert server.max_in_flight == 1
    assert last.ttft_s is not None and last.scheduled_ttft_s is not None
    assert last.scheduled_ttft_s >= 0.2 + 0.1 - 0.02  # two answers ahead of it, then its own
    assert last.scheduled_ttft_s - last.ttft_s >= 0.18
    assert result.summary.scheduled_ttft is not None


def blocks(hash_ids: list[int]) -> str:
    """A Mooncake row's prompt: one seeded block of words per hash id (equal ids, equal text)."""
    return " ".join(generate_words(derive_seed(7, "block", h), BLOCK_WORDS) for h in hash_ids)


def shared_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes ``a`` and ``b`` have in common."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


async def test_equal_hash_ids_give_byte_identical_prefixes_and_different_ones_do_not(
        scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: token_stream(2, ttft_s=0.0, itl_s=0.0))
    ids = [[1, 2, 3], [1, 2, 4], [9, 2, 3], [1, 2, 3]]
    await replay(server, workload(), [row(i * 0.01, blocks(h)) for i, h in enumerate(ids)])
    raws = {s.body["messages"][0]["content"]: s.raw for s in server.served}
    bodies = [raws[blocks(h)] for h in ids]
    head = bodies[0].index(blocks([1]).encode())  # the JSON before the prompt
    two_blocks = len(blocks([1, 2]).encode())
    assert bodies[0][:head] == bodies[2][:head]
    assert head + two_blocks <= shared_prefix(bodies[0], bodies[1]) \
        < head + len(blocks([1, 2, 3]).encode())  # blocks 1 and 2 shared, block 3 not
    assert shared_prefix(bodies[0], bodies[2]) < head + BLOCK_WORDS  # block 1 differs
    assert bodies[0] == bodies[3]  # the same ids: the same bytes


async def test_a_trace_whose_server_fails_keeps_the_failures_as_records(
        scripted: ServerFactory) -> None:
    server = await scripted(lambda i, b: Reply(status=503, content_type="text/plain",
                                               body=b"overloaded") if i == 1 else
                            token_stream(2, ttft_s=0.0, itl_s=0.0))
    result = await replay(server, workload(), [row(t) for t in (0.0, 0.01, 0.02)])
    assert [r.error_class for r in result.records] == [None, "http_503", None]
    assert result.records[1].scheduled_start_s == 0.01
