"""``tracker bench`` end to end against the simulator in a thread: table, JSON, JSONL, errors."""

from __future__ import annotations

import itertools
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


def _write_sharegpt(tmp_path: Path) -> Path:
    items = [{"conversations": [{"from": "human", "value": f"question number {i}"},
                                {"from": "gpt", "value": " ".join(["word"] * (i + 2))}]}
             for i in range(6)]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    return path


def test_bench_sends_a_sharegpt_sample_asking_for_the_recorded_lengths(
    sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = tmp_path / "r.jsonl"
    code = main(["bench", "--base-url", sim_url, "--dataset-name", "sharegpt", "--dataset-path",
                 str(_write_sharegpt(tmp_path)), "--num-prompts", "6", "--ignore-eos",
                 "--max-concurrency", "3", "--json", "-", "--quiet",
                 "--save-requests", str(requests)])
    assert code == 0, capsys.readouterr().err
    [workload] = json.loads(capsys.readouterr().out)["workloads"]
    assert workload["completed"] == 6
    assert workload["total_output_tokens"] == sum(i + 2 for i in range(6))  # 27
    assert workload["total_input_tokens"] == 6 * 3
    lines = [json.loads(line) for line in requests.read_text(encoding="utf-8").splitlines()]
    assert [(line["requested_input_tokens"], line["input_tokens_delta"]) for line in lines] == \
        [(3, 0)] * 6


def test_bench_custom_jsonl_asks_for_each_prompts_output_tokens(
    sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "custom.jsonl"
    data.write_text('{"prompt": "one two three", "output_tokens": 4}\n'
                    '{"prompt": "four five"}\n', encoding="utf-8")
    code = main(["bench", "--base-url", sim_url, "--dataset-name", "custom", "--dataset-path",
                 str(data), "--num-prompts", "2", "--random-output-len", "3", "--ignore-eos",
                 "--json", "-", "--quiet"])
    assert code == 0, capsys.readouterr().err
    [workload] = json.loads(capsys.readouterr().out)["workloads"]
    assert workload["total_output_tokens"] == 4 + 3  # the second has none: --random-output-len


def test_bench_replays_a_mooncake_trace_at_its_recorded_times(
    sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace.jsonl"
    rows = [{"timestamp": 1000 + 100 * i, "input_length": 20, "output_length": 2 + i,
             "hash_ids": [0]} for i in range(5)]
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    requests = tmp_path / "r.jsonl"
    code = main(["bench", "--base-url", sim_url, "--dataset-name", "mooncake", "--dataset-path",
                 str(trace), "--num-prompts", "5", "--ignore-eos", "--json", "-", "--quiet",
                 "--save-requests", str(requests)])
    assert code == 0, capsys.readouterr().err
    [workload] = json.loads(capsys.readouterr().out)["workloads"]
    assert workload["completed"] == 5 and workload["total_output_tokens"] == 2 + 3 + 4 + 5 + 6
    lines = [json.loads(line) for line in requests.read_text(encoding="utf-8").splitlines()]
    planned = sorted(line["scheduled_start_ms"] for line in lines)
    gaps = [b - a for a, b in itertools.pairwise(planned)]
    assert gaps == pytest.approx([100.0] * 4, abs=1.0)  # the trace's 100 ms, not a rate's


@pytest.mark.parametrize(("args", "fragment"), [
    (["--dataset-name", "sharegpt"], "--dataset-name sharegpt needs --dataset-path FILE"),
    (["--dataset-path", "x.json"], "--dataset-path applies to --dataset-name sharegpt, custom "
                                   "or mooncake"),
    (["--dataset-name", "custom", "--dataset-path", "surely-missing.jsonl"],
     "--dataset-path surely-missing.jsonl: no such file"),
    (["--dataset-name", "mooncake", "--dataset-path", "{trace}", "--request-rate", "5",
      "--duration", "2"], "--dataset-name mooncake replays the trace's own times: drop "
                          "--request-rate, --duration"),
    (["--dataset-name", "mooncake", "--dataset-path", "{trace}", "--num-prompts", "9"],
     "--num-prompts 9: the trace {trace} holds 1 rows, too few to measure 9"),
    (["--dataset-name", "custom", "--dataset-path", "{trace}"],
     ":1: prompt: must be a non-empty string (got null or nothing)"),
])
def test_bench_bad_datasets_are_one_line_exit_2(sim_url: str, tmp_path: Path, args: list[str],
                                                fragment: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 4, "output_length": 1}\n',
                     encoding="utf-8")
    args = [arg.replace("{trace}", str(trace)) for arg in args]
    assert main(["bench", "--base-url", sim_url, "--quiet", *args]) == 2
    err = capsys.readouterr().err
    fragment = fragment.replace("{trace}", str(trace))
    assert err.startswith("error: ") and fragment in err and err.count("\n") == 1, err


def test_bench_on_two_workers_sends_the_same_requests_and_says_so(
    sim_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", "--base-url", sim_url, "--num-prompts", "16", "--request-rate", "200",
            "--random-input-len", "8", "--random-output-len", "3", "--ignore-eos", "--quiet",
            "--json", "-"]
    assert main([*args, "--workers", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    [workload] = data["workloads"]
    assert data["environment"]["load_workers"] == 2
    assert (workload["completed"], workload["total_output_tokens"]) == (16, 16 * 3)
    with pytest.raises(SystemExit) as stopped:  # argparse's own exit for a bad flag value
        main(["bench", "--base-url", sim_url, "--workers", "0"])
    assert stopped.value.code == 2
    assert "--workers: must be a whole number of processes, 1 or more (got 0)" in \
        capsys.readouterr().err


def test_bench_against_the_simulator_records_its_kind_its_counters_and_a_text_token_check(
        sim_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b.json"
    code = main(["bench", "--base-url", sim_url, "--num-prompts", "8", "--max-concurrency", "4",
                 "--random-input-len", "16", "--random-output-len", "6", "--ignore-eos",
                 "--warmup", "3", "--json", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    data = json.loads(out.read_text(encoding="utf-8"))
    assert (data["environment"]["target_kind"], data["simulated"]) == ("sim", True)
    assert data["environment"]["engine"].startswith("tracker-sim ")
    [workload] = data["workloads"]
    server = workload["telemetry"]["server"]
    assert (server["request_success"], server["generation_tokens"]) == (8.0, 48.0)  # no warm-up
    assert "vllm /tokenize's count of the text received (within 1 token), which matched " \
           "usage on 8 of the 8 requests of one token a chunk" in workload["token_count_check"]
    assert workload["token_count_mismatches"] == 0


def test_bench_with_a_model_the_server_does_not_serve_is_a_usage_error(
        sim_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--base-url", sim_url, "--model", "meta-llama/Llama-3-8B",
                 "--num-prompts", "2"]) == 2
    err = capsys.readouterr().err
    assert "--model meta-llama/Llama-3-8B: the server at" in err
    assert "its /v1/models lists: sim/test-model" in err and err.count("\n") == 1
