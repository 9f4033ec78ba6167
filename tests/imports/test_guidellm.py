"""GuideLLM's report (GuideLLM needs torch, so not run here): a literal file in the shape of
GuideLLM 0.8.1's pydantic schema (guidellm/benchmark/schemas/report.py, benchmark.py,
metrics.py; statistics in guidellm/schemas/base/statistics.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracker.imports import load_imported, sniff_format
from tracker.imports.source import read_source


def _dist(mean: float, median: float, std: float, p90: float, p99: float, count: int,
          total: float = 0.0) -> dict[str, Any]:
    ok = {"mean": mean, "median": median, "mode": median, "variance": std ** 2,
          "std_dev": std, "min": 0.0, "max": p99, "count": count, "total_sum": total,
          "percentiles": {"p001": 0.0, "p01": 0.0, "p05": 0.0, "p10": 0.0, "p25": 0.0,
                          "p50": median, "p75": 0.0, "p90": p90, "p95": 0.0, "p99": p99,
                          "p999": p99}}
    return {"successful": ok, "incomplete": None, "errored": None, "total": ok}


def _benchmark(streams: int, start: float, ttft_ms: float) -> dict[str, Any]:
    return {
        "type_": "generative_benchmark",
        "config": {"id_": "b", "run_id": "r", "run_index": 0,
                   "strategy": {"type_": "concurrent", "streams": streams}},
        "scheduler_metrics": {"start_time": start - 1, "measure_start_time": start,
                              "measure_end_time": start + 10.0, "end_time": start + 11},
        "metrics": {
            "request_totals": {"successful": 40, "incomplete": 1, "errored": 2, "total": 43},
            "time_to_first_token_ms": _dist(ttft_ms, ttft_ms - 1, 3.0, ttft_ms + 4,
                                            ttft_ms + 9, 40),
            "time_per_output_token_ms": _dist(12.0, 11.5, 1.0, 13.0, 15.0, 40),
            "inter_token_latency_ms": _dist(10.0, 9.5, 1.0, 11.0, 14.0, 40),
            "request_latency": _dist(0.5, 0.45, 0.05, 0.6, 0.7, 40),
            "prompt_token_count": _dist(100.0, 100.0, 0.0, 100.0, 100.0, 40, 4000.0),
            "output_token_count": _dist(32.0, 32.0, 0.0, 32.0, 32.0, 40, 1280.0),
            "output_tokens_per_second": _dist(130.0, 128.0, 9.0, 140.0, 150.0, 40),
        },
    }


@pytest.fixture
def report(tmp_path: Path) -> Path:
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps({
        "metadata": {"version": 2, "guidellm_version": "0.8.1", "python_version": "3.12",
                     "platform": "linux"},
        "config": {}, "benchmarks": [_benchmark(2, 1796000000.0, 40.0),
                                     _benchmark(8, 1796000100.0, 90.0)]}), encoding="utf-8")
    return path


def test_guidellm_gives_one_run_per_benchmark_with_its_tpot_kept_apart(report: Path) -> None:
    assert sniff_format(read_source(report)) == "guidellm"
    first, second = load_imported(report)
    assert [r.workload.name for r in (first, second)] == ["c2", "c8"]
    assert (first.benchmark, second.benchmark, first.tool_version) == (0, 1, "0.8.1")
    summary = first.workload.summary
    assert summary.ttft is not None and summary.ttft.median_s == pytest.approx(0.039, abs=1e-12)
    assert summary.tpot is not None and summary.tpot.median_s == pytest.approx(0.0095, abs=1e-12)
    assert summary.itl is None  # no per-chunk gaps in GuideLLM
    assert summary.e2el is not None and summary.e2el.p99_s == 0.7
    assert first.source_values["guidellm_time_per_output_token_median_s"] == \
        pytest.approx(0.0115, abs=1e-12)
    assert first.source_values["guidellm_output_tokens_per_second_mean"] == 130.0
    assert summary.output_throughput_tokens_per_s == pytest.approx(1280.0 / 10.0, abs=1e-9)
    assert (summary.completed, summary.failed) == (40, 3)
