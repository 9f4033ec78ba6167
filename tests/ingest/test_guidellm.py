"""GuideLLM's own benchmarks JSON (GuideLLM 0.8.1 run against the simulator, fixtures/guidellm/
ORIGIN.md): its summary survives the documented mapping, and the tracker's statistics are the
tracker's over GuideLLM's per-request values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tracker.ingest import load_imported, sniff_format
from tracker.ingest.source import read_source
from tracker.results import LatencyStats

REPORT = Path(__file__).parent / "fixtures" / "guidellm" / "benchmarks.json"
KEPT = {"time_to_first_token_ms": ("time_to_first_token", 1000.0, "_s"),
        "inter_token_latency_ms": ("inter_token_latency", 1000.0, "_s"),
        "time_per_output_token_ms": ("time_per_output_token", 1000.0, "_s"),
        "request_latency": ("request_latency", 1.0, "_s"),
        "requests_per_second": ("requests_per_second", 1.0, ""),
        "output_tokens_per_second": ("output_tokens_per_second", 1.0, "")}


def _body() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(REPORT.read_text(encoding="utf-8"))
    return body


def _assert_numpy_stats(stats: LatencyStats | None, values: list[float]) -> None:
    assert stats is not None and stats.count == len(values)
    expected = (np.mean(values), np.median(values), np.std(values), np.percentile(values, 90),
                np.percentile(values, 99))
    got = (stats.mean_s, stats.median_s, stats.std_s, stats.p90_s, stats.p99_s)
    assert got == pytest.approx(tuple(float(v) for v in expected), abs=1e-12)


def test_guidellm_report_gives_one_run_per_benchmark() -> None:
    assert sniff_format(read_source(REPORT)) == "guidellm"
    runs = load_imported(REPORT)
    assert [r.workload.name for r in runs] == ["c2", "c4"]
    assert [r.workload.concurrency for r in runs] == [2, 4]
    assert [r.benchmark for r in runs] == [0, 1]
    assert {r.tool_version for r in runs} == {_body()["metadata"]["guidellm_version"]} == {"0.8.1"}


def test_guidellms_own_summary_is_kept_to_1e9_under_its_names() -> None:
    for run, bench in zip(load_imported(REPORT), _body()["benchmarks"], strict=True):
        metrics = bench["metrics"]
        for name, (base, scale, unit) in KEPT.items():
            ok = metrics[name]["successful"]
            for stat, value in (("mean", ok["mean"]), ("median", ok["median"]),
                                ("std", ok["std_dev"]), ("p90", ok["percentiles"]["p90"]),
                                ("p99", ok["percentiles"]["p99"])):
                kept = run.source_values[f"guidellm_{base}_{stat}{unit}"]
                assert kept == pytest.approx(value / scale, abs=1e-9), (name, stat)
        assert run.workload.params["source_values"] == run.source_values


def test_throughputs_are_guidellms_mean_rates_over_its_measured_window() -> None:
    for run, bench in zip(load_imported(REPORT), _body()["benchmarks"], strict=True):
        metrics, window = bench["metrics"], bench["scheduler_metrics"]
        summary = run.workload.summary
        assert summary.request_throughput_per_s == pytest.approx(
            metrics["requests_per_second"]["successful"]["mean"], abs=1e-9)
        assert summary.output_throughput_tokens_per_s == pytest.approx(
            metrics["output_tokens_per_second"]["successful"]["mean"], abs=1e-9)
        assert summary.total_token_throughput_tokens_per_s == pytest.approx(
            metrics["tokens_per_second"]["successful"]["mean"], abs=1e-9)
        assert summary.duration_s == pytest.approx(
            window["measure_end_time"] - window["measure_start_time"], abs=1e-9)
        ends = [r["request_end_time"] for r in bench["requests"]["successful"]]
        inside = sum(window["measure_start_time"] <= e <= window["measure_end_time"]
                     for e in ends)  # GuideLLM counts the completions inside its window
        assert summary.request_throughput_per_s == pytest.approx(
            inside / summary.duration_s, abs=1e-9)
        assert (summary.completed, summary.failed) == (
            metrics["request_totals"]["successful"],
            metrics["request_totals"]["errored"] + metrics["request_totals"]["incomplete"])
        assert summary.total_output_tokens == sum(
            r["output_tokens"] for r in bench["requests"]["successful"]) == pytest.approx(
            metrics["output_token_count"]["successful"]["total_sum"], abs=1e-9)


def test_latencies_are_the_trackers_statistics_of_guidellms_requests() -> None:
    for run, bench in zip(load_imported(REPORT), _body()["benchmarks"], strict=True):
        requests = bench["requests"]["successful"]
        summary = run.workload.summary
        _assert_numpy_stats(summary.ttft, [r["time_to_first_token_ms"] / 1000 for r in requests])
        _assert_numpy_stats(summary.e2el, [r["request_latency"] for r in requests])
        _assert_numpy_stats(summary.tpot, [
            (r["request_latency"] - r["time_to_first_token_ms"] / 1000) / (r["output_tokens"] - 1)
            for r in requests if r["output_tokens"] > 1])
        assert summary.itl is None  # GuideLLM keeps no chunk gaps
        # the means of a per-request latency are GuideLLM's own (only its percentiles differ)
        assert summary.ttft is not None and summary.ttft.mean_s == pytest.approx(
            bench["metrics"]["time_to_first_token_ms"]["successful"]["mean"] / 1000, abs=1e-9)
        assert len(run.workload.records) == len(requests)
        assert min(r.start_s for r in run.workload.records) == pytest.approx(0.0, abs=1e-9)


def test_guidellms_token_weighted_itl_is_not_stored_as_the_trackers_tpot() -> None:
    run = load_imported(REPORT)[0]
    assert run.workload.summary.tpot is not None
    weighted = run.source_values["guidellm_inter_token_latency_mean_s"]
    assert abs(run.workload.summary.tpot.mean_s - weighted) > 1e-6  # outputs vary in length


def test_sampled_requests_store_no_tracker_latencies_and_say_so(tmp_path: Path) -> None:
    body = _body()
    body["benchmarks"][0]["requests"]["successful"] = body["benchmarks"][0]["requests"][
        "successful"][:5]
    path = tmp_path / "sampled.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    first, second = load_imported(path)
    assert first.workload.summary.ttft is None and first.workload.records == ()
    assert any("holds 5 of 24 requests" in note for note in first.notes)
    assert "guidellm_time_to_first_token_median_s" in first.source_values
    assert second.workload.summary.ttft is not None
