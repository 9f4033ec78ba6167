"""``tracker bench`` end to end against the simulator in a thread: table, JSON, JSONL, errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.simconfigs import FAST_SIM
from tracker.cli.main import main
from tracker.inputs.configs import ServingConfig
from tracker.sim.server import ThreadedSimServer
from tracker.targets.launcher import find_free_port


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    config = ServingConfig.model_validate(yaml.safe_load(FAST_SIM))
    with ThreadedSimServer(config) as server:
        yield server.base_url


def test_bench_open_loop_writes_the_run_json_and_every_request(
    sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, requests = tmp_path / "b.json", tmp_path / "r.jsonl"
    code = main(["bench", "--base-url", sim_url, "--num-prompts", "12", "--request-rate", "50",
                 "--max-concurrency", "4", "--random-input-len", "16",
                 "--random-output-len", "6", "--ignore-eos", "--goodput", "ttft:2000",
                 "--warmup", "2", "--seed", "3", "--json", str(out),
                 "--save-requests", str(requests), "--quiet"])
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "Serving Benchmark Result" in printed and "TTFT from planned start" in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["schema"] == "tracker.run/1" and data["run_id"] is None
    assert "scheduled_ttft" in data["definitions"] and "client_bound" in data["definitions"]
    [workload] = data["workloads"]
    assert (workload["completed"], workload["request_rate"], workload["max_concurrency"]) == \
        (12, 50.0, 4)
    assert workload["total_output_tokens"] == 12 * 6  # ignore_eos reached the server
    assert workload["p99_scheduled_ttft_ms"] >= workload["p99_ttft_ms"] > 0
    assert workload["request_goodput"] > 0 and workload["slo_attainment"] == 1.0
    assert workload["token_count_mismatches"] == 0
    assert workload["client_health"]["cpu_fraction"] is not None
    lines = [json.loads(line) for line in requests.read_text(encoding="utf-8").splitlines()]
    assert [line["index"] for line in lines] == list(range(12))
    assert all(line["scheduled_start_ms"] is not None and line["ttft_ms"] > 0 for line in lines)
    assert all(len(line["itl_ms"]) == 5 for line in lines)


def test_bench_closed_loop_for_a_duration(sim_url: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--base-url", sim_url, "--model", "sim/test-model",
                 "--endpoint-type", "completions", "--num-prompts", "3", "--duration", "0.3",
                 "--max-concurrency", "2", "--random-output-len", "4", "--json", "-"])
    assert code == 0
    [workload] = json.loads(capsys.readouterr().out)["workloads"]
    assert workload["completed"] > 3 and workload["request_rate"] is None
    assert workload["mean_scheduled_ttft_ms"] is None  # closed loop: no plan to be late for


@pytest.mark.parametrize(("args", "fragment"), [
    (["--goodput", "ttft"], "--goodput ttft"),
    (["--duration", "1"], "--duration with --request-rate inf needs --max-concurrency"),
    (["--api-key-env", "TRACKER_TEST_SURELY_UNSET"], "TRACKER_TEST_SURELY_UNSET"),
    (["--num-prompts", "0"], "num_requests"),
])
def test_bench_usage_errors_are_one_line_exit_2(sim_url: str, args: list[str], fragment: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--base-url", sim_url, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and fragment in err and err.count("\n") == 1


def test_bench_against_nothing_reports_the_failures_and_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = find_free_port()  # nothing listens there
    code = main(["bench", "--base-url", f"http://127.0.0.1:{port}", "--model", "m",
                 "--num-prompts", "3", "--quiet"])
    assert code == 3
    assert "connection_refused x3" in capsys.readouterr().out
