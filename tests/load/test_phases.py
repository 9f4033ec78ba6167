"""Load shapes in suites: validation, phases, plans and the sweep's capacity result."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tracker.errors import ConfigError
from tracker.inputs.suites import Workload, load_suite
from tracker.inputs.traffic import PlannedSession, PlannedTurn, WorkloadTraffic
from tracker.load.bodies import build_session_requests
from tracker.load.generator import LoadOutcome, RequestSpec
from tracker.load.phases import (
    Phase,
    WorkloadPhases,
    build_plan,
    build_session_plan,
    compute_phase_result,
    compute_turn_results,
)
from tracker.load.sessions import SessionPlan
from tracker.load.summary import complete_cached_tokens, compute_workload_summary
from tracker.metrics import REGISTRY, Direction, compute_summary_metrics, compute_workload_metrics
from tracker.results import (
    ClientHealth,
    RequestRecord,
    ServerTelemetry,
    TokenSource,
    WorkloadResult,
)

BASE: dict[str, Any] = {"name": "w", "prompts": {"source": "fixed", "text": "hi"},
                        "max_tokens": 4, "num_requests": 5}
SPECS = [RequestSpec(b"{}", 1)] * 5


def workload(**shape: Any) -> Workload:
    return Workload.model_validate({**BASE, **shape})


def phases_of(w: Workload) -> list[str]:
    driver = WorkloadPhases(w, seed=1)
    names = []
    while (phase := driver.next_phase()) is not None:
        names.append(phase.name)
        driver.record(phase, result(phase.name, attainment=1.0))
    return names


def record(i: int, ttft: float) -> RequestRecord:
    return RequestRecord(i, 0.0, ttft, ttft + 0.3, (0.1,) * 3, 4, TokenSource.USAGE, 1,
                         TokenSource.USAGE, output_chunks=4)


def result(name: str, *, attainment: float, bound: bool = False) -> WorkloadResult:
    summary = compute_workload_summary([record(0, 0.1)], 1.0,
                                       client=ClientHealth(0.1, None, None, None, None, None,
                                                           bound, "slow" if bound else None))
    now = datetime.now(UTC)
    return WorkloadResult(name, 1, 1, 0, {"load": {"mode": "open"}}, now, now, (),
                          replace(summary, slo_attainment=attainment))


def test_plain_shapes_keep_the_workload_name() -> None:
    assert phases_of(workload(concurrency=2)) == ["w"]
    assert phases_of(workload(request_rate=3.5)) == ["w"]


def test_stages_are_named_by_their_shape() -> None:
    w = workload(stages=[{"concurrency": 4}, {"request_rate": 2},
                         {"request_rate": 2, "burstiness": 0.5, "max_concurrency": 8}])
    assert phases_of(w) == ["w@c4", "w@2rps", "w@2rps-b0.5-max8"]


@pytest.mark.parametrize(("shape", "message"), [
    ({}, "exactly one load shape"),
    ({"concurrency": 2, "request_rate": 3}, "exactly one load shape"),
    ({"concurrency": 2, "burstiness": 2}, "apply to request_rate only"),
    ({"sweep": {"start_rate": 1}}, "a sweep needs slos"),
    ({"stages": [{"concurrency": 2}, {"concurrency": 2}]}, "same shape"),
    ({"stages": [{"concurrency": 2, "request_rate": 1}]}, "exactly one of concurrency"),
    ({"request_rate": 2, "slos": {}}, "at least one of ttft_ms"),
])
def test_bad_shapes_are_config_errors_with_the_place(tmp_path: Path, shape: dict[str, Any],
                                                     message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "workloads": [{**BASE, **shape}]}),
                    encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as caught:
        load_suite(path)
    assert str(caught.value).startswith(str(path))


def test_open_loop_plans_carry_a_seeded_schedule_and_warmup_only_first() -> None:
    w = workload(stages=[{"request_rate": 10, "max_concurrency": 3}, {"concurrency": 2}],
                 warmup_requests=1)
    driver = WorkloadPhases(w, seed=1)
    first = driver.next_phase()
    assert first is not None
    plan = build_plan(w, first, SPECS[:1], SPECS)
    assert plan.open_loop and plan.concurrency == 3 and len(plan.warmup) == 1
    assert plan.arrivals_s == build_plan(w, first, SPECS[:1], SPECS).arrivals_s
    driver.record(first, result(first.name, attainment=1.0))
    second = driver.next_phase()
    assert second is not None
    closed = build_plan(w, second, SPECS[:1], SPECS)
    assert not closed.open_loop and closed.warmup == [] and closed.concurrency == 2


def test_the_sweep_stores_capacity_under_the_workload_name() -> None:
    w = workload(slos={"ttft_ms": 200}, sweep={"start_rate": 1, "refine_steps": 1})
    driver = WorkloadPhases(w, seed=1)
    while (phase := driver.next_phase()) is not None:
        assert phase.request_rate is not None
        driver.record(phase, result(phase.name, attainment=1.0 if phase.request_rate <= 5
                                    else 0.5))
    [final] = driver.final_results()
    assert final.name == "w" and final.records == ()
    assert final.summary.capacity_at_slo_req_per_s == 4.0  # 1, 2, 4 pass; 8 fails; 6 fails
    assert final.params["sweep_result"]["capacity_from"] == "w@4rps"
    metrics = compute_summary_metrics(final.summary)
    assert metrics["capacity_at_slo_req_per_s"] == 4.0
    assert REGISTRY["capacity_at_slo_req_per_s"].direction is Direction.HIGHER_IS_BETTER


def test_a_client_bound_probe_marks_the_capacity_client_bound() -> None:
    w = workload(slos={"ttft_ms": 200}, sweep={"start_rate": 1})
    driver = WorkloadPhases(w, seed=1)
    while (phase := driver.next_phase()) is not None:
        driver.record(phase, result(phase.name, attainment=1.0,
                                    bound=(phase.request_rate or 0) >= 4))
    [final] = driver.final_results()
    assert final.summary.capacity_at_slo_req_per_s == 2.0
    assert final.client_bound and "client" in (final.summary.client.reason or "")  # type: ignore[union-attr]


def test_phase_results_carry_the_load_shape_and_goodput() -> None:
    w = workload(request_rate=4, slos={"ttft_ms": 150})
    phase = WorkloadPhases(w, seed=1).next_phase()
    assert phase is not None
    plan = build_plan(w, phase, [], SPECS)
    now = datetime.now(UTC)
    outcome = LoadOutcome((record(0, 0.1), record(1, 0.2)), now, now, 2.0, True)
    res = compute_phase_result(w, phase, plan, outcome)
    assert res.params["load"] == {"mode": "open", "request_rate": 4.0, "burstiness": 1.0,
                                  "max_concurrency": None}
    assert res.summary.goodput_req_per_s == 0.5 and res.summary.slo_attainment == 0.5


def session_phase(num_sessions: int = 2, turns: int = 3) -> tuple[Workload, Phase, SessionPlan]:
    w = workload(name="chat", concurrency=2, num_requests=num_sessions)
    traffic = WorkloadTraffic(sessions=tuple(
        PlannedSession(tuple(PlannedTurn(f"s{s} q{t}", f"a{t}") for t in range(1, turns + 1)),
                       system="be brief") for s in range(num_sessions)))
    warm, measured = build_session_requests(w, traffic, model="m", supports_ignore_eos=False)
    phase = WorkloadPhases(w, 0, traffic).next_phase()
    assert phase is not None
    return w, phase, build_session_plan(w, phase, warm, measured, think_time_s=0.0)


def turn_record(i: int, turn: int, input_tokens: int, cached: int | None) -> RequestRecord:
    return RequestRecord(i, i * 0.1, 0.05, 0.3, (0.1,) * 3, 4, TokenSource.USAGE, input_tokens,
                         TokenSource.USAGE, session=i // 3, turn=turn, cached_input_tokens=cached)


# per session: turn 1 misses (vLLM then sends no prompt_tokens_details: None), later turns hit
TURNS = ((1, 100, None), (2, 400, 300), (3, 600, 500))


def test_each_turn_split_gets_the_hit_rate_of_its_own_requests() -> None:
    w, phase, plan = session_phase()
    records = tuple(turn_record(s * 3 + k, *TURNS[k]) for s in range(2) for k in range(3))
    now = datetime.now(UTC)
    whole = compute_phase_result(w, phase, plan, LoadOutcome(records, now, now, 2.0, True))
    splits = {r.name: r for r in compute_turn_results(w, plan, whole)}
    assert [r.cached_input_tokens for r in whole.records] == [0, 300, 500] * 2  # misses: 0
    rates = {name: compute_workload_metrics(r)["prefix_cache_hit_rate"]
             for name, r in {"chat": whole, **splits}.items()}
    assert rates == {"chat": 1600 / 2200, "chat/turn-1": 0.0, "chat/turns-2+": 1600 / 2000}
    assert REGISTRY["prefix_cache_hit_rate"].direction is Direction.HIGHER_IS_BETTER


def test_a_server_that_never_says_what_it_cached_gives_no_hit_rate() -> None:
    w, phase, plan = session_phase()
    records = tuple(turn_record(s * 3 + k, TURNS[k][0], TURNS[k][1], None)
                    for s in range(2) for k in range(3))
    now = datetime.now(UTC)
    whole = compute_phase_result(w, phase, plan, LoadOutcome(records, now, now, 2.0, True))
    for result_ in (whole, *compute_turn_results(w, plan, whole)):
        assert "prefix_cache_hit_rate" not in compute_workload_metrics(result_), result_.name
        assert all(r.cached_input_tokens is None for r in result_.records)


def test_the_servers_counters_win_for_the_whole_workload_not_for_its_splits() -> None:
    w, phase, plan = session_phase()
    records = tuple(turn_record(s * 3 + k, *TURNS[k]) for s in range(2) for k in range(3))
    now = datetime.now(UTC)
    whole = replace(compute_phase_result(w, phase, plan, LoadOutcome(records, now, now, 2.0, True)),
                    server=ServerTelemetry(True, scrapes=4, values={"prefix_cache_hit_rate": 0.5}))
    assert compute_workload_metrics(whole)["prefix_cache_hit_rate"] == 0.5
    later = compute_turn_results(w, plan, whole)[1]
    assert later.server is None
    assert compute_workload_metrics(later)["prefix_cache_hit_rate"] == 1600 / 2000


def test_failed_requests_and_client_counted_prompts_are_left_out_of_the_hit_rate() -> None:
    failed = RequestRecord(9, 0.0, None, None, (), None, None, None, None, error_class="http_500")
    estimated = replace(turn_record(7, 2, 1000, None), input_tokens_source=TokenSource.CLIENT)
    records = complete_cached_tokens((turn_record(0, 1, 100, 25), failed, estimated))
    assert [r.cached_input_tokens for r in records] == [25, None, None]
    now = datetime.now(UTC)
    result_ = WorkloadResult("w", 1, 3, 0, {}, now, now, records,
                             compute_workload_summary(records, 1.0))
    assert compute_workload_metrics(result_)["prefix_cache_hit_rate"] == 0.25
