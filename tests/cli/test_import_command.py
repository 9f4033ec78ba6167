"""``tracker import``: real result files into a real store, once; a bad file stores nothing."""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from tracker.cli.main import main
from tracker.dashboard.trend_series import shape_trend
from tracker.inputs.configs import EngineArgs, ServingConfig, Target, build_loaded_config
from tracker.inputs.suites import FixedPrompt, Suite, Workload, build_loaded_suite
from tracker.load.summary import compute_workload_summary
from tracker.results import (
    RequestRecord,
    RunStatus,
    TokenSource,
    WorkloadResult,
    compute_run_source,
)
from tracker.store import queries
from tracker.store.db import open_store
from tracker.store.models import RunModel
from tracker.store.regressions import SeriesKey, fetch_metric_series
from tracker.store.runs import (
    begin_run,
    fetch_run,
    finish_run,
    save_config_version,
    save_suite,
    save_workload,
)

FIXTURES = Path(__file__).parents[1] / "ingest" / "fixtures"
VLLM = FIXTURES / "vllm" / "bench_serve_detailed.json"
AIPERF = FIXTURES / "aiperf" / "profile_export_aiperf.json"


def _runs(url: str) -> int:
    engine = open_store(url)
    try:
        with Session(engine) as session:
            return int(session.scalar(select(func.count()).select_from(RunModel)) or 0)
    finally:
        engine.dispose()


def test_a_vllm_file_becomes_one_run_with_its_source_and_twice_adds_nothing(
        db_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["import", str(VLLM), "--config", "llama-8b", "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "imported from vllm" in out and "workload c4, 23 ok, 1 failed" in out
    assert main(["import", str(VLLM), "--format", "vllm", "--config", "llama-8b",
                 "--db", db_url]) == 0
    assert "already imported" in capsys.readouterr().out
    assert _runs(db_url) == 1
    shown = tmp_path / "run.json"
    assert main(["show", "1", "--db", db_url, "--json", str(shown)]) == 0
    body = json.loads(shown.read_text(encoding="utf-8"))
    source = body["environment"]["import"]
    assert source["tool"] == "vllm"
    assert source["sha256"] == hashlib.sha256(VLLM.read_bytes()).hexdigest()
    assert (body["config"]["name"], body["suite"]["name"]) == ("llama-8b", "imported-vllm")
    assert body["workloads"][0]["median_ttft_ms"] == pytest.approx(
        json.loads(VLLM.read_text(encoding="utf-8"))["median_ttft_ms"], abs=1e-9)
    capsys.readouterr()
    assert main(["show", "1", "--db", db_url]) == 0
    text = capsys.readouterr().out
    assert "imported from vllm" in text and source["sha256"][:12] in text  # not only in JSON


def test_aiperf_summary_and_records_are_stored(sqlite_url: str, tmp_path: Path) -> None:
    copy = tmp_path / "aiperf"
    shutil.copytree(AIPERF.parent, copy)
    assert main(["import", str(copy / AIPERF.name), "--config", "llama-8b",
                 "--db", sqlite_url]) == 0
    engine = open_store(sqlite_url)
    try:
        with Session(engine) as session:
            run = fetch_run(session, 1)
    finally:
        engine.dispose()
    assert compute_run_source(run.environment) == "aiperf"
    assert run.environment["import"]["tool_version"] == "0.13.0"
    assert len(run.workloads[0].records) == 24 and run.status is RunStatus.COMPLETED


def test_a_key_an_aiperf_file_recorded_is_stored_nowhere(
        sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """AIPerf keeps its endpoint config and command line: a key given with ``--api-key`` or a
    header is in the file, under its name and in copies (a custom header, the command)."""
    key = uuid.uuid4().hex[:20]  # no token shape: only where it sits says it is a key
    copy = tmp_path / "aiperf"
    shutil.copytree(AIPERF.parent, copy)
    body = json.loads((copy / AIPERF.name).read_text(encoding="utf-8"))
    body["input_config"]["endpoint"].update(
        api_key=key, headers=[["Authorization", f"Bearer {key}"], ["X-Team-Quota", f"{key}-q"]])
    body["run_info"]["cli_command"] += f" --api-key '{key}' --header 'X-Team-Quota: {key}-q'"
    (copy / AIPERF.name).write_text(json.dumps(body), encoding="utf-8")
    assert main(["import", str(copy / AIPERF.name), "--config", "llama-8b",
                 "--db", sqlite_url]) == 0
    out = capsys.readouterr()
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("tracker.db*"))
    assert b"[redacted]" in stored  # the command line and the endpoint were kept, hidden
    for piece in (key, key[:8], key[-6:]):
        assert piece.encode() not in stored and piece not in out.out + out.err


@pytest.mark.parametrize(("text", "why"), [
    ("", "the file is empty"),
    ('{"date": "20261130-221504", "mean_ttft_ms": 4', "may be truncated"),
    ('{"results": [1, 2, 3]}', "no 'mean_ttft_ms' (vllm)"),
    ("[" * 100_000 + "]" * 100_000, "nests deeper than any result file"),  # was an internal error
    ('{"benchmarks": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests deeper"),
])
def test_a_bad_file_exits_2_with_one_line_and_stores_nothing(
        sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
        why: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text, encoding="utf-8")
    assert main(["import", str(path), "--config", "c", "--db", sqlite_url]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: not ") and why in err and "\n" not in err
    assert _runs(sqlite_url) == 0


def _native_run(engine: Engine) -> int:
    config = build_loaded_config(ServingConfig(name="llama-8b", target=Target(kind="sim",
                                 model="m"), engine=EngineArgs(max_num_seqs=8)), "-")
    suite = build_loaded_suite(Suite(name="chat", workloads=[
        Workload(name="c4", prompts=FixedPrompt(source="fixed", text="x"), max_tokens=5,
                 concurrency=4, num_requests=8)]), "-")
    started = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    records = tuple(RequestRecord(i, i * 0.1, 0.05, 0.3, (0.01,) * 4, 5, TokenSource.USAGE, 10,
                                  TokenSource.USAGE) for i in range(8))
    with Session(engine) as session, session.begin():
        run_id = begin_run(session, config_version_id=save_config_version(session, config),
                           suite_id=save_suite(session, suite), started_at=started, host="h",
                           tracker_version="t", simulated=False, environment={})
        save_workload(session, run_id, 0, WorkloadResult(
            "c4", 4, 8, 0, {}, started, started, records,
            compute_workload_summary(records, 2.0)))
        finish_run(session, run_id, RunStatus.COMPLETED, started, None)
    return run_id


def test_the_trend_query_mixes_native_and_imported_runs_with_the_source(
        sqlite_url: str) -> None:
    engine = open_store(sqlite_url)
    try:
        native = _native_run(engine)
        assert main(["import", str(VLLM), "--config", "llama-8b", "--suite", "chat",
                     "--db", sqlite_url]) == 0
        with Session(engine) as session:
            trend = queries.fetch_trend(session, "ttft_median_s", configs=["llama-8b"],
                                        suites=["chat"], workloads=["c4"])
            sources = [compute_run_source(fetch_run(session, int(i)).environment)
                       for i in trend["run_id"]]
            watched = fetch_metric_series(session, SeriesKey("llama-8b", "chat", "c4",
                                                             "ttft_median_s"))
    finally:
        engine.dispose()
    assert list(trend["run_id"]) == [native, native + 1]
    assert sources == ["native", "vllm"]
    assert list(trend["source"]) == sources  # the trend rows carry it themselves
    assert [p.run_id for p in watched] == [native]  # the nightly watch follows its own runs
    shaped = shape_trend(trend, "ttft_median_s")  # two series: never one line of both
    assert sorted(shaped["series"]) == ["llama-8b · chat · c4", "llama-8b · chat · c4 · from vllm"]
    vllm_median_s = json.loads(VLLM.read_text(encoding="utf-8"))["median_ttft_ms"] / 1000
    assert list(trend["value"]) == pytest.approx([0.05, vllm_median_s], abs=1e-12)


def test_an_exported_run_imports_back_to_the_same_summary(
        sqlite_url: str, tmp_path: Path) -> None:
    assert main(["import", str(VLLM), "--config", "llama-8b", "--db", sqlite_url]) == 0
    exported = tmp_path / "exported.json"
    assert main(["export", "1", "--format", "vllm", "--out", str(exported),
                 "--db", sqlite_url]) == 0
    body, original = (json.loads(p.read_text(encoding="utf-8")) for p in (exported, VLLM))
    for key in ("median_ttft_ms", "p99_tpot_ms", "p90_itl_ms", "mean_e2el_ms",
                "request_throughput", "output_throughput", "completed", "failed"):
        assert body[key] == pytest.approx(original[key], abs=1e-9), key
    assert body["ttfts"] == original["ttfts"] and body["itls"] == original["itls"]
    assert main(["import", str(exported), "--config", "llama-8b", "--db", sqlite_url]) == 0
    assert _runs(sqlite_url) == 2


def test_export_of_an_unknown_workload_names_the_choices(
        sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(VLLM), "--config", "llama-8b", "--db", sqlite_url]) == 0
    assert main(["export", "1", "--workload", "nope", "--db", sqlite_url]) == 2
    assert "--workload must be one of c4 (got 'nope')" in capsys.readouterr().err


def test_the_gate_refuses_to_judge_an_imported_run_against_a_native_one(
        sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    engine = open_store(sqlite_url)
    try:
        native = _native_run(engine)
    finally:
        engine.dispose()
    assert main(["import", str(VLLM), "--config", "llama-8b", "--suite", "chat",
                 "--db", sqlite_url]) == 0
    capsys.readouterr()
    assert main(["gate", "--db", sqlite_url, "--base-run", str(native),
                 "--head-run", str(native + 1)]) == 2
    err = capsys.readouterr().err
    assert f"run {native}: native, run {native + 1}: vllm" in err and "like for like" in err


LLMD = FIXTURES / "llmd" / "report.json"


def test_an_llmd_report_becomes_one_run_naming_its_inner_tool(
        sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(LLMD), "--config", "llama-8b", "--db", sqlite_url]) == 0
    out = capsys.readouterr().out
    assert "imported from llmd vllm-benchmark 0.11.0" in out and "30 ok, 2 failed" in out
    assert "note: run.time.end has no time zone: taken as UTC" in out
    engine = open_store(sqlite_url)
    try:
        with Session(engine) as session:
            run = fetch_run(session, 1)
    finally:
        engine.dispose()
    ttft = json.loads(LLMD.read_text(encoding="utf-8"))[
        "results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]
    summary = run.workloads[0].summary
    assert summary.ttft is not None and summary.ttft.p99_s == pytest.approx(ttft["p99"] / 1000,
                                                                            abs=1e-9)
    assert (compute_run_source(run.environment), run.environment["import"]["tool_version"]) == (
        "llmd", "vllm-benchmark 0.11.0")


@pytest.mark.parametrize("text", [
    "", LLMD.read_text(encoding="utf-8")[:500],
    '{"version": "0.2", "run": {}, "results": {"request_performance": {}}}',
])
def test_a_bad_llmd_report_exits_2_with_one_line_and_stores_nothing(
        sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(text, encoding="utf-8")
    assert main(["import", str(path), "--format", "llmd", "--config", "c",
                 "--db", sqlite_url]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: not an llm-d Benchmark Report") and "\n" not in err
    assert _runs(sqlite_url) == 0


def _varied_run(engine: Engine, seed: int = 3) -> int:
    """A native run of 40 seeded requests (2 failed), each with its own TTFT and chunk gaps."""
    import numpy as np

    rng = np.random.default_rng(seed)
    config = build_loaded_config(ServingConfig(name="llama-8b", target=Target(kind="sim",
                                 model="m"), engine=EngineArgs(max_num_seqs=8)), "-")
    suite = build_loaded_suite(Suite(name="chat", workloads=[
        Workload(name="c8", prompts=FixedPrompt(source="fixed", text="x"), max_tokens=40,
                 concurrency=8, num_requests=40)]), "-")
    records = []
    for i in range(40):
        ttft_s = float(rng.lognormal(np.log(0.06), 0.3))
        gaps = tuple(float(g) for g in rng.lognormal(np.log(0.01), 0.25, int(rng.integers(2, 40))))
        failed = i in (7, 21)
        records.append(RequestRecord(
            i, i * 0.05, None if failed else ttft_s, None if failed else ttft_s + sum(gaps),
            () if failed else gaps, None if failed else len(gaps) + 1, TokenSource.USAGE,
            int(rng.integers(50, 200)), TokenSource.USAGE,
            error_class="http_500" if failed else None, error="boom" if failed else None))
    started = datetime(2026, 11, 29, 3, 0, tzinfo=UTC)
    ended = datetime(2026, 11, 29, 3, 0, 4, 250000, tzinfo=UTC)
    with Session(engine) as session, session.begin():
        run_id = begin_run(session, config_version_id=save_config_version(session, config),
                           suite_id=save_suite(session, suite), started_at=started, host="h",
                           tracker_version="0.9.0", simulated=False, environment={})
        save_workload(session, run_id, 0, WorkloadResult(
            "c8", 8, 40, 0, {}, started, ended, tuple(records),
            compute_workload_summary(records, 4.25)))
        finish_run(session, run_id, RunStatus.COMPLETED, ended, None)
    return run_id


def test_a_run_written_as_an_llmd_report_imports_back_to_the_same_statistics(
        sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tracker.ingest.llmd import render_llmd_report

    engine = open_store(sqlite_url)
    try:
        native = _varied_run(engine)
        with Session(engine) as session:
            run = fetch_run(session, native)
        report = tmp_path / "report.json"
        report.write_text(json.dumps(render_llmd_report(run, run.workloads[0])), encoding="utf-8")
        assert main(["import", str(report), "--config", "llama-8b", "--db", sqlite_url]) == 0
        with Session(engine) as session:
            back = fetch_run(session, native + 1)
    finally:
        engine.dispose()
    assert "imported from llmd tracker 0.9.0" in capsys.readouterr().out
    before, after = run.workloads[0].summary, back.workloads[0].summary
    assert before.tpot is not None and before.itl is not None  # a real comparison
    for key in ("ttft", "tpot", "itl", "e2el"):
        for attr in ("mean_s", "median_s", "std_s", "p90_s", "p99_s"):
            assert getattr(getattr(after, key), attr) == pytest.approx(
                getattr(getattr(before, key), attr), abs=1e-9), (key, attr)
    for attr in ("request_throughput_per_s", "output_throughput_tokens_per_s",
                 "total_token_throughput_tokens_per_s", "duration_s"):
        assert getattr(after, attr) == pytest.approx(getattr(before, attr), abs=1e-9), attr
    assert (after.completed, after.failed, after.total_output_tokens) == \
        (before.completed, before.failed, before.total_output_tokens)
    assert (back.workloads[0].name, back.workloads[0].concurrency) == ("c8", 8)
    assert (back.started_at, back.ended_at) == (run.workloads[0].started_at,
                                                run.workloads[0].ended_at)


def test_export_format_llmd_writes_a_report_that_imports_back(
        sqlite_url: str, tmp_path: Path) -> None:
    engine = open_store(sqlite_url)
    try:
        native = _varied_run(engine)
    finally:
        engine.dispose()
    report = tmp_path / "report.json"
    assert main(["export", str(native), "--format", "llmd", "--out", str(report),
                 "--db", sqlite_url]) == 0
    body = json.loads(report.read_text(encoding="utf-8"))
    assert body["version"] == "0.2"
    assert body["scenario"]["load"]["standardized"]["tool"] == "tracker"
    latency = body["results"]["request_performance"]["aggregate"]["latency"]
    assert {s["units"] for s in latency.values()} == {"ms", "ms/token"}
    assert main(["import", str(report), "--config", "llama-8b", "--db", sqlite_url]) == 0
    assert _runs(sqlite_url) == 2
