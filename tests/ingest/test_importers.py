"""Each importer on its tool's own file: the tool's summary survives the documented mapping."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tracker.ingest import ImportFormatError, load_imported, sniff_format
from tracker.ingest.source import read_source
from tracker.results import LatencyStats

FIXTURES = Path(__file__).parent / "fixtures"
VLLM = FIXTURES / "vllm" / "bench_serve_detailed.json"
AIPERF = FIXTURES / "aiperf" / "profile_export_aiperf.json"
AIPERF_RECORDS = FIXTURES / "aiperf" / "profile_export.jsonl"
STATS = (("mean", "mean_s"), ("median", "median_s"), ("std", "std_s"), ("p90", "p90_s"),
         ("p99", "p99_s"))


def _json(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return body


def _assert_stats(stats: LatencyStats | None, expected_ms: dict[str, float]) -> None:
    assert stats is not None
    for stat, attr in STATS:
        assert getattr(stats, attr) == pytest.approx(expected_ms[stat] / 1000, abs=1e-9), stat


def test_vllm_summary_is_vllms_own_in_seconds() -> None:
    body = _json(VLLM)
    [run] = load_imported(VLLM)
    summary = run.workload.summary
    for key in ("ttft", "tpot", "itl", "e2el"):
        _assert_stats(getattr(summary, key), {s: body[f"{s}_{key}_ms"] for s, _ in STATS})
    assert summary.request_throughput_per_s == pytest.approx(body["request_throughput"], abs=1e-9)
    assert summary.output_throughput_tokens_per_s == pytest.approx(body["output_throughput"],
                                                                   abs=1e-9)
    assert (summary.completed, summary.failed, summary.duration_s) == \
        (body["completed"], body["failed"], body["duration"])
    assert (run.tool, run.workload.name, run.workload.concurrency) == ("vllm", "c4", 4)
    assert run.source_values["vllm_max_output_tokens_per_s"] == body["max_output_tokens_per_s"]


def test_vllm_records_give_back_vllms_statistics() -> None:
    body = _json(VLLM)
    [run] = load_imported(VLLM)
    records = run.workload.records
    assert len(records) == body["num_prompts"]
    assert [r.error_class for r in records].count("vllm_error") == body["failed"] == 1
    ok = [r for r in records if r.ok]
    e2el_ms = [r.e2el_s * 1000 for r in ok if r.e2el_s is not None]
    tpot_ms = [t * 1000 for r in ok if (t := r.tpot_s) is not None]
    assert float(np.median(e2el_ms)) == pytest.approx(body["median_e2el_ms"], abs=1e-9)
    assert float(np.percentile(tpot_ms, 99)) == pytest.approx(body["p99_tpot_ms"], abs=1e-9)
    assert sum(len(r.itl_s) for r in ok) == run.workload.summary.itl.count  # type: ignore[union-attr]


def test_vllm_file_without_p90_or_arrays_stores_no_statistics_and_says_so(
        tmp_path: Path) -> None:
    body = {k: v for k, v in _json(VLLM).items()
            if not k.startswith("p90_") and k not in ("ttfts", "itls", "input_lens",
                                                      "output_lens", "errors")}
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    [run] = load_imported(path)
    assert run.workload.summary.ttft is None and run.workload.records == ()
    assert any(note.startswith("ttft: no p90") for note in run.notes)
    assert run.workload.summary.request_throughput_per_s == body["request_throughput"]


def test_aiperf_summary_maps_its_names_onto_the_trackers() -> None:
    body = _json(AIPERF)
    [run] = load_imported(AIPERF)
    summary = run.workload.summary

    def expected(name: str) -> dict[str, float]:
        metric = body[name]
        return {"mean": metric["avg"], "median": metric["p50"], "std": metric["std"],
                "p90": metric["p90"], "p99": metric["p99"]}

    _assert_stats(summary.ttft, expected("time_to_first_token"))
    _assert_stats(summary.tpot, expected("inter_token_latency"))  # AIPerf's ITL is TPOT
    _assert_stats(summary.itl, expected("inter_chunk_latency"))
    _assert_stats(summary.e2el, expected("request_latency"))
    assert summary.request_throughput_per_s == pytest.approx(
        body["request_throughput"]["avg"], abs=1e-9)
    assert summary.output_throughput_tokens_per_s == pytest.approx(
        body["output_token_throughput"]["avg"], abs=1e-9)
    assert (run.tool, run.tool_version) == ("aiperf", body["aiperf_version"])
    assert run.source_values["aiperf_time_to_second_token_median_s"] == pytest.approx(
        body["time_to_second_token"]["p50"] / 1000, abs=1e-12)


def test_aiperf_records_come_from_the_jsonl_beside_the_summary() -> None:
    body = _json(AIPERF)
    [run] = load_imported(AIPERF)
    records = run.workload.records
    lines = AIPERF_RECORDS.read_text(encoding="utf-8").splitlines()
    assert len(records) == len(lines) == body["request_count"]["avg"]
    gaps = sum(len(r.itl_s) for r in records)
    assert gaps == body["inter_chunk_latency"]["count"]
    assert min(r.start_s for r in records) == 0.0


def test_each_fixture_is_recognised_by_its_keys() -> None:
    assert sniff_format(read_source(VLLM)) == "vllm"
    assert sniff_format(read_source(AIPERF)) == "aiperf"


def test_the_aiperf_records_file_alone_points_to_its_summary() -> None:
    with pytest.raises(ImportFormatError, match=r"import the profile_export_aiperf\.json"):
        load_imported(AIPERF_RECORDS)


@pytest.mark.parametrize(("text", "fmt", "why"), [
    ("", "vllm", "the file is empty"),
    ('{"date": "20261130-221504", "mean_ttft_ms": 4', "vllm", "may be truncated"),
    ('{"benchmarks": [], "metadata": {}}', "vllm", "no 'mean_ttft_ms' key"),
    ('[1, 2]', None, "expected a JSON object"),
    ('{"hello": 1}', None, "no 'mean_ttft_ms' (vllm), 'benchmarks' (guidellm)"),
    ('{"mean_ttft_ms": 4}', "aiperf", "no 'time_to_first_token' metric"),
    ('{"benchmarks": [{"x": 1}]}', "guidellm", "benchmarks[0] has no 'metrics'"),
])
def test_a_bad_file_is_one_line_naming_the_file_and_what_was_expected(
        tmp_path: Path, text: str, fmt: str | None, why: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ImportFormatError) as raised:
        load_imported(path, fmt)
    message = str(raised.value)
    assert message.startswith(f"{path}: not ") and why in message and "\n" not in message


def test_a_cut_aiperf_records_file_names_its_line(tmp_path: Path) -> None:
    shutil.copyfile(AIPERF, tmp_path / AIPERF.name)
    lines = AIPERF_RECORDS.read_text(encoding="utf-8").splitlines()
    (tmp_path / AIPERF_RECORDS.name).write_text("\n".join([*lines[:3], lines[3][:40]]),
                                                encoding="utf-8")
    with pytest.raises(ImportFormatError, match=r"profile_export\.jsonl: not .* line 4: invalid"):
        load_imported(tmp_path / AIPERF.name)
