"""``tracker bench --dataset-name mooncake`` without ``--num-prompts`` replays the whole trace;
asking for more rows than the trace holds is one clear error."""

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

ROWS = 60


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    config = ServingConfig.model_validate(yaml.safe_load(FAST_SIM))
    with ThreadedSimServer(config) as server:
        yield server.base_url


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    rows = [{"timestamp": 5 * i, "input_length": 8, "output_length": 2} for i in range(ROWS)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_bench_without_num_prompts_replays_every_row_of_the_trace(
        sim_url: str, trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--base-url", sim_url, "--dataset-name", "mooncake", "--dataset-path",
                 str(trace), "--json", "-", "--quiet"])
    assert code == 0, capsys.readouterr().err
    [workload] = json.loads(capsys.readouterr().out)["workloads"]
    assert (workload["num_requests"], workload["completed"]) == (ROWS, ROWS)


def test_bench_without_num_prompts_measures_the_rows_after_the_warmup(
        sim_url: str, trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--base-url", sim_url, "--dataset-name", "mooncake", "--dataset-path",
                 str(trace), "--warmup", "10", "--json", "-", "--quiet"])
    assert code == 0, capsys.readouterr().err
    [workload] = json.loads(capsys.readouterr().out)["workloads"]
    assert (workload["num_requests"], workload["warmup_requests"]) == (ROWS - 10, 10)


@pytest.mark.parametrize(("flags", "fragment"), [
    (["--num-prompts", "61"], f"--num-prompts 61: the trace {{trace}} holds {ROWS} rows, too few "
                              "to measure 61; lower --num-prompts (at most 60), or leave it out"),
    (["--num-prompts", "55", "--warmup", "10"], "too few to measure 55 after --warmup 10; "
                                                "lower --num-prompts (at most 50)"),
    (["--warmup", "60"], f"the trace holds {ROWS} rows, none left to measure after --warmup 60"),
])
def test_bench_asking_for_more_than_the_trace_is_one_line_exit_2(
        sim_url: str, trace: Path, flags: list[str], fragment: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--base-url", sim_url, "--dataset-name", "mooncake", "--dataset-path",
                 str(trace), "--quiet", *flags])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert fragment.replace("{trace}", str(trace)) in err, err
