"""llm-d's Benchmark Report v0.2: the fixture's values survive the documented mapping, the
inner tool decides TPOT/ITL/throughput, and a bad report is one line."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tracker.ingest import ImportFormatError, load_imported, sniff_format
from tracker.ingest.source import read_source
from tracker.results import LatencyStats

REPORT = Path(__file__).parent / "fixtures" / "llmd" / "report.json"
STATS = (("mean", "mean_s"), ("p50", "median_s"), ("stddev", "std_s"), ("p90", "p90_s"),
         ("p99", "p99_s"))
SCALE = {"ms": 1000.0, "ms/token": 1000.0, "s": 1.0, "s/token": 1.0}


def _body() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(REPORT.read_text(encoding="utf-8"))
    return body


def _aggregate(body: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = body["results"]["request_performance"]["aggregate"]
    return found


def _write(tmp_path: Path, body: dict[str, Any]) -> Path:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def _assert_stats(stats: LatencyStats | None, expected: dict[str, Any]) -> None:
    assert stats is not None
    scale = SCALE[expected["units"]]
    for key, attr in STATS:
        assert getattr(stats, attr) == pytest.approx(expected[key] / scale, abs=1e-9), key


def test_a_vllm_report_maps_onto_the_trackers_names_in_seconds() -> None:
    body = _body()
    assert sniff_format(read_source(REPORT)) == "llmd"
    [run] = load_imported(REPORT)
    summary, latency = run.workload.summary, _aggregate(body)["latency"]
    _assert_stats(summary.ttft, latency["time_to_first_token"])
    _assert_stats(summary.tpot, latency["time_per_output_token"])
    _assert_stats(summary.itl, latency["inter_token_latency"])
    _assert_stats(summary.e2el, latency["request_latency"])  # units "s"
    ntpot = latency["normalized_time_per_output_token"]
    assert run.source_values["llmd_normalized_time_per_output_token_median_s"] == \
        pytest.approx(ntpot["p50"], abs=1e-9)  # s/token, never the tracker's TPOT
    rates = _aggregate(body)["throughput"]
    assert summary.output_throughput_tokens_per_s == pytest.approx(
        rates["output_token_rate"]["mean"], abs=1e-9)
    assert summary.request_throughput_per_s == pytest.approx(rates["requests_rate"]["mean"],
                                                             abs=1e-9)
    assert (summary.completed, summary.failed) == (30, 2)
    assert summary.errors == {"llmd_failures": 1, "llmd_incomplete": 1}
    assert (run.tool, run.tool_version, run.workload.name, run.workload.concurrency) == \
        ("llmd", "vllm-benchmark 0.11.0", "c4", 4)


def test_run_time_gives_the_window_and_a_zoneless_end_is_utc_with_a_note() -> None:
    body = _body()
    [run] = load_imported(REPORT)
    assert run.started_at == datetime.fromisoformat(body["run"]["time"]["start"])
    assert run.ended_at == datetime.fromisoformat(body["run"]["time"]["end"]).replace(tzinfo=UTC)
    assert run.workload.summary.duration_s == pytest.approx(
        float(body["run"]["time"]["duration"].removeprefix("PT").removesuffix("S")), abs=1e-9)
    assert "run.time.end has no time zone: taken as UTC" in run.notes


def test_a_guidellm_report_keeps_tpot_itl_and_rates_under_llmd_names(tmp_path: Path) -> None:
    body = _body()
    body["scenario"]["load"]["standardized"]["tool"] = "guidellm"
    [run] = load_imported(_write(tmp_path, body), "llmd")
    summary, latency = run.workload.summary, _aggregate(body)["latency"]
    assert summary.tpot is None and summary.itl is None
    assert summary.output_throughput_tokens_per_s is None
    _assert_stats(summary.ttft, latency["time_to_first_token"])  # the same meaning in any tool
    assert run.source_values["llmd_time_per_output_token_p99_s"] == pytest.approx(
        latency["time_per_output_token"]["p99"] / 1000, abs=1e-12)
    assert run.source_values["llmd_inter_token_latency_median_s"] == pytest.approx(
        latency["inter_token_latency"]["p50"] / 1000, abs=1e-12)
    assert run.source_values["llmd_requests_rate_mean_per_s"] == \
        _aggregate(body)["throughput"]["requests_rate"]["mean"]
    assert any("not the tracker's TPOT and ITL" in note for note in run.notes)


def test_a_statistic_without_p90_is_not_stored_and_says_so(tmp_path: Path) -> None:
    body = _body()
    del _aggregate(body)["latency"]["time_to_first_token"]["p90"]
    [run] = load_imported(_write(tmp_path, body))
    assert run.workload.summary.ttft is None and run.workload.summary.e2el is not None
    assert any(note.startswith("time_to_first_token: no p90") for note in run.notes)


def test_a_yaml_report_reads_as_its_json(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "report.yaml"
    path.write_text(yaml.safe_dump(_body()), encoding="utf-8")
    [from_yaml], [from_json] = load_imported(path, "llmd"), load_imported(REPORT)
    assert from_yaml.workload.summary == from_json.workload.summary


@pytest.mark.parametrize(("text", "fmt", "why"), [
    ("", "llmd", "the file is empty"),
    (REPORT.read_text(encoding="utf-8")[:300], "llmd", "may be truncated"),
    ('{"mean_ttft_ms": 4, "date": "20261130-221504"}', "llmd", "needs version '0.2'"),
    ('{"version": "0.1", "run": {}, "results": {"request_performance": {}}}', "llmd",
     "(got '0.1')"),
    ('{"version": "0.2", "run": {}, "results": {"request_performance": {}}}', None,
     "run.time.start is missing"),
    ('{"version": "0.2", "run": {"time": {"start": "yesterday"}}, "results": '
     '{"request_performance": {}}}', None, "must be an ISO-8601 time (got 'yesterday')"),
])
def test_a_bad_report_is_one_line_naming_the_file(tmp_path: Path, text: str, fmt: str | None,
                                                   why: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ImportFormatError) as raised:
        load_imported(path, fmt)
    message = str(raised.value)
    assert message.startswith(f"{path}: not ") and why in message and "\n" not in message


def test_unknown_units_are_refused_with_the_allowed_ones(tmp_path: Path) -> None:
    body = _body()
    _aggregate(body)["latency"]["request_latency"]["units"] = "minutes"
    with pytest.raises(ImportFormatError, match=r"request_latency\.units must be one of ms, s, "
                                                r"ms/token, s/token \(got 'minutes'\)"):
        load_imported(_write(tmp_path, body))
