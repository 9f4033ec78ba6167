"""inference-perf's own lifecycle reports (inference-perf 0.7.0 run against the simulator,
fixtures/inference_perf/ORIGIN.md): its summary survives the documented mapping; a bad file is
one line, exit 2, nothing stored."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tracker.cli.main import main
from tracker.ingest import ImportFormatError, load_imported, sniff_format
from tracker.ingest.source import read_source
from tracker.results import compute_run_source
from tracker.store.db import open_store
from tracker.store.models import RunModel
from tracker.store.runs import fetch_run

FIXTURES = Path(__file__).parent / "fixtures" / "inference_perf"
SUMMARY = FIXTURES / "summary_lifecycle_metrics.json"
STAGES = [FIXTURES / f"stage_{k}_lifecycle_metrics.json" for k in (0, 1)]
PER_REQUEST = FIXTURES / "per_request_lifecycle_metrics.json"
SAME_AS_OURS = ("time_to_first_token", "request_latency")  # same definition, same numpy
STATS = (("mean", "mean_s"), ("median", "median_s"), ("p90", "p90_s"), ("p99", "p99_s"))


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _latency(path: Path, name: str) -> dict[str, float]:
    found: dict[str, float] = _json(path)["successes"]["latency"][name]
    return found


@pytest.mark.parametrize("path", [SUMMARY, *STAGES])
def test_each_report_is_recognised_and_is_one_run(path: Path) -> None:
    assert sniff_format(read_source(path)) == "inference-perf"
    [run] = load_imported(path)
    assert (run.tool, run.tool_version, run.host) == ("inference-perf", None, "imported")
    assert run.notes == ()  # per-request report and partial reports beside it


@pytest.mark.parametrize("path", [SUMMARY, *STAGES])
def test_ttft_e2el_and_throughputs_equal_inference_perfs_own_summary(path: Path) -> None:
    body = _json(path)
    [run] = load_imported(path)
    summary = run.workload.summary
    for name, stats in (("time_to_first_token", summary.ttft), ("request_latency", summary.e2el)):
        assert stats is not None
        for key, attr in STATS:
            assert getattr(stats, attr) == pytest.approx(_latency(path, name)[key], abs=1e-9)
    throughput = body["successes"]["throughput"]
    assert summary.request_throughput_per_s == pytest.approx(throughput["requests_per_sec"],
                                                             abs=1e-9)
    assert summary.output_throughput_tokens_per_s == pytest.approx(
        throughput["output_tokens_per_sec"], abs=1e-9)
    assert summary.total_token_throughput_tokens_per_s == pytest.approx(
        throughput["total_tokens_per_sec"], abs=1e-9)
    assert summary.duration_s == body["benchmark_time_seconds"]
    assert (summary.completed, summary.failed) == (body["successes"]["count"],
                                                  body["failures"]["count"])
    assert summary.total_output_tokens == body["successes"]["output_tokens"]["total"]
    assert summary.request_throughput_per_s == pytest.approx(
        summary.completed / summary.duration_s, abs=1e-9)  # a total over the wall time


@pytest.mark.parametrize("path", [SUMMARY, *STAGES])
def test_inference_perfs_own_latencies_are_kept_under_its_names(path: Path) -> None:
    [run] = load_imported(path)
    for name in ("time_to_first_token", "time_per_output_token",
                 "normalized_time_per_output_token", "inter_token_latency", "request_latency"):
        for key, _ in STATS:
            assert run.source_values[f"inference_perf_{name}_{key}_s"] == pytest.approx(
                _latency(path, name)[key], abs=1e-9)


def test_itl_is_every_chunk_gap_and_tpot_the_trackers_definition() -> None:
    rows = sorted(_json(PER_REQUEST), key=lambda row: row["start_time"])
    [run] = load_imported(STAGES[1])
    summary = run.workload.summary
    stage = rows[24:]
    gaps = [b - a for row in stage for a, b in zip(
        row["info"]["response_metrics"]["chunk_times"],
        row["info"]["response_metrics"]["chunk_times"][1:], strict=False)]
    assert summary.itl is not None and summary.itl.count == len(gaps)
    assert summary.itl.std_s == pytest.approx(float(np.std(gaps)), abs=1e-12)
    # one token per chunk on the simulator, so inference-perf's token gaps are the chunk gaps
    assert all(row["info"]["response_metrics"]["chunk_times"]
               == row["info"]["response_metrics"]["output_token_times"] for row in stage)
    assert summary.itl.median_s == pytest.approx(
        _latency(STAGES[1], "inter_token_latency")["median"], abs=1e-9)
    tpots = [(row["end_time"] - row["info"]["response_metrics"]["chunk_times"][0])
             / (row["info"]["response_metrics"]["server_usage"]["completion_tokens"] - 1)
             for row in stage]  # (E2E - TTFT) / (out - 1): the stream's tail included
    assert summary.tpot is not None
    assert summary.tpot.median_s == pytest.approx(float(np.median(tpots)), abs=1e-12)
    theirs = run.source_values["inference_perf_time_per_output_token_median_s"]
    assert summary.tpot.median_s > theirs  # theirs ends at the last token, not the stream's end


def test_a_stage_takes_its_own_requests_and_its_wall_clock_time() -> None:
    first, second = (load_imported(path)[0] for path in STAGES)
    assert [first.workload.name, second.workload.name] == ["c2", "c4"]
    assert first.workload.concurrency == 2 and len(second.workload.records) == 24
    partial = (FIXTURES / "inference-perf.partial.stage_1.yaml").read_text(encoding="utf-8")
    assert second.started_at.strftime("%Y-%m-%dT%H:%M:%S.%f") in partial
    assert first.ended_at <= second.started_at
    assert load_imported(SUMMARY)[0].workload.name == "all-stages"


def test_a_report_alone_stores_no_latencies_and_says_why(tmp_path: Path) -> None:
    shutil.copyfile(STAGES[1], tmp_path / STAGES[1].name)
    [run] = load_imported(tmp_path / STAGES[1].name)
    assert run.workload.summary.ttft is None and run.workload.records == ()
    assert any("no per_request_lifecycle_metrics.json" in note for note in run.notes)
    assert any("modification time" in note for note in run.notes)
    assert run.started_at.tzinfo is UTC and run.ended_at <= datetime.now(UTC)
    assert run.source_values["inference_perf_time_to_first_token_median_s"] == pytest.approx(
        _latency(STAGES[1], "time_to_first_token")["median"], abs=1e-12)
    assert run.workload.summary.request_throughput_per_s is not None


def test_a_stage_whose_earlier_stage_report_is_missing_gets_no_records(tmp_path: Path) -> None:
    for path in (STAGES[1], PER_REQUEST):
        shutil.copyfile(path, tmp_path / path.name)
    [run] = load_imported(tmp_path / STAGES[1].name)
    assert run.workload.records == () and run.workload.summary.ttft is None
    assert any("does not hold this report's 24 requests" in note for note in run.notes)


def test_the_per_request_report_alone_points_to_the_summary() -> None:
    assert sniff_format(read_source(PER_REQUEST)) == "inference-perf"
    with pytest.raises(ImportFormatError, match=r"import the summary or a stage report"):
        load_imported(PER_REQUEST)


def _runs(url: str) -> int:
    engine = open_store(url)
    try:
        with Session(engine) as session:
            return int(session.scalar(select(func.count()).select_from(RunModel)) or 0)
    finally:
        engine.dispose()


def test_the_import_command_stores_the_stage_once(sqlite_url: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "reports"
    shutil.copytree(FIXTURES, copy)
    args = ["import", str(copy / STAGES[0].name), "--config", "llama-8b", "--db", sqlite_url]
    assert main(args) == 0
    assert main([*args, "--format", "inference-perf"]) == 0
    assert "already imported" in capsys.readouterr().out
    engine = open_store(sqlite_url)
    try:
        with Session(engine) as session:
            run = fetch_run(session, 1)
    finally:
        engine.dispose()
    assert _runs(sqlite_url) == 1 and len(run.workloads[0].records) == 24
    assert compute_run_source(run.environment) == "inference-perf"
    assert run.suite.name == "imported-inference-perf"


@pytest.mark.parametrize(("text", "fmt", "why"), [
    ("", "inference-perf", "the file is empty"),
    (SUMMARY.read_text(encoding="utf-8")[:300], None, "may be truncated"),
    (SUMMARY.read_text(encoding="utf-8")[:300], "inference-perf", "may be truncated"),
    ('{"benchmarks": []}', "inference-perf", "no 'load_summary' object"),
    ('{"load_summary": {}, "successes": {"latency": {}}}', "inference-perf",
     "'benchmark_time_seconds' must be a number > 0"),
    ('{"hello": 1}', None, "'load_summary' (inference-perf)"),
])
def test_a_bad_file_exits_2_with_one_line_and_stores_nothing(
        sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
        fmt: str | None, why: str) -> None:
    path = tmp_path / "summary_lifecycle_metrics.json"
    path.write_text(text, encoding="utf-8")
    args = ["import", str(path), "--config", "c", "--db", sqlite_url]
    assert main([*args, *(["--format", fmt] if fmt else [])]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: not ") and why in err and "\n" not in err, err
    assert _runs(sqlite_url) == 0


def test_a_cut_per_request_report_is_one_line_naming_it(
        sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copyfile(SUMMARY, tmp_path / SUMMARY.name)
    (tmp_path / PER_REQUEST.name).write_text(PER_REQUEST.read_text(encoding="utf-8")[:5000],
                                             encoding="utf-8")
    assert main(["import", str(tmp_path / SUMMARY.name), "--config", "c",
                 "--db", sqlite_url]) == 2
    err = capsys.readouterr().err.strip()
    assert "per_request_lifecycle_metrics.json: not inference-perf's per-request report" in err
    assert "\n" not in err and _runs(sqlite_url) == 0
