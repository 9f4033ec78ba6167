"""Hostile result files (issue 27, items 4, 6 and 10): each is refused with one
``ImportFormatError`` naming the file, the value and where it is, in well under a second;
nothing hangs, eats memory, overflows or is taken as a measurement."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.inputs.test_yamlfile import LAUGHS
from tracker.ingest import load_imported
from tracker.ingest.source import ImportFormatError

FIXTURES = Path(__file__).parent / "fixtures"
BOMB = LAUGHS  # nine levels of nine aliases: 9**9 strings


def vllm_with(tmp_path: Path, **changes: Any) -> Path:
    body = json.loads((FIXTURES / "vllm" / "bench_serve_detailed.json").read_text("utf-8"))
    body.update(changes)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(body), encoding="utf-8")  # NaN and Infinity written as JSON does
    return path


def refused(path: Path, fmt: str | None = None, named: Path | None = None) -> str:
    started = time.perf_counter()
    with pytest.raises(ImportFormatError) as caught:
        load_imported(path, fmt)
    assert time.perf_counter() - started < 2.0
    message = str(caught.value)
    assert "\n" not in message and str(named or path) in message
    return message


def test_an_llmd_yaml_alias_bomb_is_refused_by_the_bounded_loader(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text('version: "0.2"\n' + BOMB, encoding="utf-8")
    assert "alias bomb" in refused(path, "llmd")


def test_an_inference_perf_partial_yaml_nested_5000_deep_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ip"
    shutil.copytree(FIXTURES / "inference_perf", folder)
    partial = folder / "inference-perf.partial.stage_0.yaml"
    partial.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    message = refused(folder / "stage_0_lifecycle_metrics.json", named=partial)
    assert message.startswith(f"{partial}:1: ") and "nested deeper" in message


def test_a_stage_file_numbered_past_any_run_is_refused_without_looping(tmp_path: Path) -> None:
    folder = tmp_path / "ip"
    shutil.copytree(FIXTURES / "inference_perf", folder)
    stage = folder / "stage_999999999_lifecycle_metrics.json"
    shutil.copy(folder / "stage_1_lifecycle_metrics.json", stage)
    assert "stage 999999999" in refused(stage)


def test_a_sparse_file_of_1_gib_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    with path.open("wb") as handle:
        handle.truncate(1 << 30)
    assert "over the limit" in refused(path)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_pipe_or_a_device_is_refused_in_a_child_that_does_not_hang(tmp_path: Path,
                                                                     kind: str) -> None:
    path = tmp_path / "r.json"
    if kind == "fifo":
        os.mkfifo(path)
    target = str(path) if kind == "fifo" else "/dev/zero"
    proc = subprocess.run([sys.executable, "-m", "tracker", "import", target, "--config", "c",
                           "--db", str(tmp_path / "t.db")], capture_output=True, text=True,
                          timeout=20, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and "not a regular file" in proc.stderr
    assert not (tmp_path / "t.db").exists()


BAD_VLLM = {  # issue 27 item 6 (bad values: exit 70 before) and item 10 (nonsense: exit 0)
    "completed a string": {"completed": "23"},
    "completed 10^30": {"completed": 10**30},
    "duration NaN": {"duration": float("nan")},
    "duration 1e300": {"duration": 1e300},
    "date in the year 9999": {"date": "99991231-235959"},
    "date in the year 1": {"date": "00010101-000001"},
    "negative count": {"completed": -5},
    "negative TTFT": {"mean_ttft_ms": -5.0},
    "NaN TTFT": {"mean_ttft_ms": float("nan")},
    "per-request TTFTs NaN": {"ttfts": [float("nan")] * 24},
    "an ITL sum of Inf": {"itls": [[float("inf")]] * 24},
    "ITLs of text": {"itls": [["x"]] * 24},
    "ITLs an object": {"itls": {"a": 1}},
    "a 100,000-character workload name": {"max_concurrency": None, "request_rate": "r" * 100_000},
    "max_concurrency 1e300": {"max_concurrency": 1e300},
}


@pytest.mark.parametrize("case", sorted(BAD_VLLM))
def test_a_bad_or_nonsense_vllm_value_is_refused_with_where_and_the_value(
    tmp_path: Path, case: str
) -> None:
    message = refused(vllm_with(tmp_path, **BAD_VLLM[case]))
    assert "(got " in message


def test_a_start_after_the_end_is_refused(tmp_path: Path) -> None:
    body = json.loads((FIXTURES / "aiperf" / "profile_export_aiperf.json").read_text("utf-8"))
    body["start_time"] = "2027-01-01T00:00:00"
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    assert "is after the end time" in refused(path)


def test_guidellm_windows_and_counts_out_of_range_are_refused(tmp_path: Path) -> None:
    body = json.loads((FIXTURES / "guidellm" / "benchmarks.json").read_text("utf-8"))
    body["benchmarks"][0]["scheduler_metrics"]["measure_end_time"] = 1e300
    path = tmp_path / "b.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    assert "measure_end_time" in refused(path)
    body = json.loads((FIXTURES / "guidellm" / "benchmarks.json").read_text("utf-8"))
    body["benchmarks"][0]["metrics"]["request_totals"]["successful"] = -5
    path.write_text(json.dumps(body), encoding="utf-8")
    assert "request_totals.successful" in refused(path)


def test_the_fixtures_still_import(tmp_path: Path) -> None:
    for path in (FIXTURES / "vllm" / "bench_serve_detailed.json",
                 FIXTURES / "guidellm" / "benchmarks.json",
                 FIXTURES / "aiperf" / "profile_export_aiperf.json",
                 FIXTURES / "inference_perf" / "stage_1_lifecycle_metrics.json",
                 FIXTURES / "llmd" / "report.json"):
        assert load_imported(path)
