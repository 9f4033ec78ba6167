"""A suite's ``workers``: the run's load sent by worker processes, recorded in its environment;
``auto`` reruns a client-bound phase once on more processes and keeps both results. Against the
embedded simulator, served over HTTP on an ephemeral port."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.runner.test_exact_prompts_in_runs import Sink
from tests.simconfigs import FAST_SIM
from tracker.inputs.configs import ServingConfig, build_loaded_config
from tracker.inputs.suites import LoadedSuite, Suite, build_loaded_suite
from tracker.load.client_health import BoundKind, compute_bound_kind, count_usable_cpus
from tracker.results import RunStatus
from tracker.runner.suite_runner import SuiteRunner


def suite(workers: Any, **shape: Any) -> LoadedSuite:
    return build_loaded_suite(Suite.model_validate({"name": "s", "seed": 5, "workers": workers,
                                                    "workloads": [{
        "name": "w", "max_tokens": 3, "ignore_eos": True, "warmup_requests": 0,
        "prompts": {"source": "synthetic", "input_tokens": 8}, **shape}]}), "-")


def sim() -> Any:
    return build_loaded_config(ServingConfig.model_validate(yaml.safe_load(FAST_SIM)), "-")


async def test_a_suite_on_two_workers_records_them_and_keeps_its_version() -> None:
    sink, two = Sink(), suite(2, concurrency=4, num_requests=12)
    outcome = await SuiteRunner(sim(), two, sink).run()
    assert outcome.status is RunStatus.COMPLETED
    assert sink.environment["load_workers"] == 2
    [result] = sink.workloads
    assert result.params["load"]["workers"] == 2
    assert (result.summary.completed, result.summary.total_output_tokens) == (12, 12 * 3)
    assert two.version == suite(1, concurrency=4, num_requests=12).version  # how, not what


@pytest.mark.skipif(count_usable_cpus() < 2, reason="auto needs 2 usable CPUs to add a worker")
async def test_auto_reruns_a_client_bound_phase_on_more_workers_and_keeps_both() -> None:
    sink = Sink()
    await SuiteRunner(sim(), suite("auto", request_rate=1_000_000, num_requests=600),
                      sink).run()
    assert sink.environment["load_workers"] == "auto"
    if len(sink.workloads) == 1:  # a busy host took the cores: starved, and more workers
        (only,) = sink.workloads  # would not help, so the phase is not rerun (by design)
        assert only.summary.client is not None
        assert compute_bound_kind(only.summary.client) is BoundKind.STARVED, only.summary.client
        assert "pin the server and the client" in (only.summary.client.reason or "")
        pytest.skip("the host was busy: the phase was starved, not overloaded, so no rerun")
    first, retry = sink.workloads
    assert first.name == "w@1-worker" and first.summary.client is not None
    assert first.summary.client.client_bound and first.summary.client.reason is not None
    assert "would have been needed" in first.summary.client.reason
    assert retry.name == "w" and retry.params["load"]["workers"] >= 2
    assert retry.summary.completed == first.summary.completed == 600

