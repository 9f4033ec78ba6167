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
from tracker.load.generator import LoadOutcome, RequestSpec
from tracker.load.phases import WorkloadPhases, build_plan, compute_phase_result
from tracker.load.summary import compute_workload_summary
from tracker.metrics import REGISTRY, Direction, compute_summary_metrics
from tracker.results import ClientHealth, RequestRecord, TokenSource, WorkloadResult

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
