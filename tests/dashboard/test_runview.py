"""Run detail of an imported run under AppTest: its source (tool, version, file sha256) and the
values kept under the tool's own names, from GuideLLM's and inference-perf's real files imported
with `tracker import`; a native run shows none of it."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.dashboard.apptest import open_page
from tests.dashboard.conftest import Populated
from tracker.cli.main import main
from tracker.dashboard.pages import page
from tracker.dashboard.runview import SOURCE_COLUMNS

FIXTURES = Path(__file__).parents[1] / "ingest" / "fixtures"
GUIDELLM = FIXTURES / "guidellm" / "benchmarks.json"
INFERENCE_PERF = FIXTURES / "inference_perf"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store with GuideLLM's two benchmarks (runs 1, 2) and inference-perf's stage 0 (run 3)."""
    directory = tmp_path_factory.mktemp("imported-db")
    url = f"sqlite:///{directory / 'imported.db'}"
    shutil.copytree(INFERENCE_PERF, directory / "inference_perf")
    assert main(["import", str(GUIDELLM), "--config", "llama-8b", "--db", url]) == 0
    assert main(["import", str(directory / "inference_perf" / "stage_0_lifecycle_metrics.json"),
                 "--config", "llama-8b", "--db", url]) == 0
    return url


def test_run_detail_names_an_imported_runs_tool_version_and_file(
        monkeypatch: pytest.MonkeyPatch, imported: str) -> None:
    app = open_page(monkeypatch, imported, page("run"), {"run": "2"})
    table = app.dataframe[0].value
    assert list(table["workload"]) == ["c4"]
    assert list(table[SOURCE_COLUMNS[0]]) == ["guidellm 0.8.1"]
    assert list(table[SOURCE_COLUMNS[1]]) == [hashlib.sha256(GUIDELLM.read_bytes()).hexdigest()]


def test_run_detail_shows_the_values_kept_under_the_tools_names(
        monkeypatch: pytest.MonkeyPatch, imported: str) -> None:
    app = open_page(monkeypatch, imported, page("run"), {"run": "1"})
    table = app.dataframe[0].value
    tpot = json.loads(GUIDELLM.read_text(encoding="utf-8"))["benchmarks"][0]["metrics"][
        "time_per_output_token_ms"]["successful"]
    assert table["guidellm_time_per_output_token_median_s"].tolist() == [
        pytest.approx(tpot["median"] / 1000, abs=1e-12)]
    assert table["guidellm_time_per_output_token_p99_s"].tolist() == [
        pytest.approx(tpot["percentiles"]["p99"] / 1000, abs=1e-12)]
    assert not any(c.startswith("inference_perf_") for c in table.columns)  # this run's only


def test_run_detail_of_an_inference_perf_stage_shows_its_source_without_a_version(
        monkeypatch: pytest.MonkeyPatch, imported: str) -> None:
    app = open_page(monkeypatch, imported, page("run"), {"run": "3"})
    table = app.dataframe[0].value
    assert list(table[SOURCE_COLUMNS[0]]) == ["inference-perf"]
    stage = json.loads((INFERENCE_PERF / "stage_0_lifecycle_metrics.json").read_text(
        encoding="utf-8"))["successes"]["latency"]["normalized_time_per_output_token"]
    assert table["inference_perf_normalized_time_per_output_token_median_s"].tolist() == [
        pytest.approx(stage["median"], abs=1e-12)]


def test_run_detail_of_a_native_run_has_no_source_columns(
        monkeypatch: pytest.MonkeyPatch, populated: Populated) -> None:
    app = open_page(monkeypatch, populated.url, page("run"),
                    {"run": str(populated.run_ids["fast-sim"][-1])})
    columns = list(app.dataframe[0].value.columns)
    assert not set(SOURCE_COLUMNS) & set(columns)
    assert not any(c.startswith(("guidellm_", "inference_perf_")) for c in columns)
