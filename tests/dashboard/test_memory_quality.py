"""GPU memory and accuracy on the dashboard: Trends draws both as series (memory in GiB, the
quality set's accuracy as the series ``quality:<set>``), Compare lists them, Run detail shows
the memory peak; under AppTest, on two stored simulator runs with a quality set."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.dashboard.apptest import figures, open_page, trace_values
from tracker.dashboard.pages import page
from tracker.dashboard.trend_changes import compute_detected_markers
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.pipeline.execute import execute_suite
from tracker.results import RunResult
from tracker.store.db import open_store

REPO = Path(__file__).resolve().parents[2]
CONFIG = """\
name: memory-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {seed: 1, prefill_s_per_token: 0.00001, decode_base_s: 0.001, decode_per_seq_s: 0.0}
engine: {max_num_seqs: 8, gpu_memory_utilization: 0.5}
"""
SUITE = """\
name: remembered
seed: 5
workloads:
  - name: chat
    prompts: {source: synthetic, input_tokens: 16}
    max_tokens: 8
    ignore_eos: true
    concurrency: 2
    num_requests: 8
quality:
  path: basic.jsonl
  max_tokens: 16
"""


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[RunResult]]:
    directory = tmp_path_factory.mktemp("memory-db")
    url = f"sqlite:///{directory / 'memory.db'}"
    (directory / "c.yaml").write_text(CONFIG, encoding="utf-8")
    (directory / "s.yaml").write_text(SUITE, encoding="utf-8")
    (directory / "basic.jsonl").write_bytes((REPO / "baselines/quality/basic.jsonl").read_bytes())
    engine = open_store(url)
    try:
        runs = [execute_suite(engine, load_config(directory / "c.yaml"),
                              load_suite(directory / "s.yaml")) for _ in range(2)]
    finally:
        engine.dispose()
    assert all(run.quality is not None and run.quality.accuracy is not None for run in runs)
    return url, runs


def _trend(monkeypatch: pytest.MonkeyPatch, url: str, metric: str) -> dict[str, object]:
    app = open_page(monkeypatch, url, page("trends"))
    app.selectbox(key="trend_family").set_value("other").run()
    app.radio(key="trend_other").set_value(metric).run()
    assert not app.exception
    (chart,) = figures(app)
    return chart


def test_trends_draws_the_gpu_memory_peak_in_gib(
        monkeypatch: pytest.MonkeyPatch, stored: tuple[str, list[RunResult]]) -> None:
    url, _ = stored
    chart = _trend(monkeypatch, url, "gpu_memory_peak_bytes")
    assert chart["layout"]["yaxis"]["title"]["text"] == "GPU memory peak (GiB)"
    (series,) = [t for t in chart["data"] if t.get("name") == "memory-sim · remembered · chat"]
    assert trace_values(series) == [pytest.approx(0.5 * 80)] * 2  # 0.5 of the simulated 80 GiB


def test_trends_draws_the_quality_sets_accuracy_as_its_own_series(
        monkeypatch: pytest.MonkeyPatch, stored: tuple[str, list[RunResult]]) -> None:
    url, runs = stored
    chart = _trend(monkeypatch, url, "accuracy")
    assert chart["layout"]["yaxis"]["title"]["text"] == "accuracy (fraction)"
    name = f"memory-sim · remembered · quality:{runs[0].quality.set_name}"  # type: ignore[union-attr]
    (series,) = [t for t in chart["data"] if t.get("name") == name]
    assert trace_values(series) == pytest.approx([run.quality.accuracy for run in runs])  # type: ignore[union-attr]


def test_compare_lists_memory_and_accuracy(
        monkeypatch: pytest.MonkeyPatch, stored: tuple[str, list[RunResult]]) -> None:
    url, runs = stored
    base, head = (run.run_id for run in runs)
    app = open_page(monkeypatch, url, page("compare"), {"base": str(base), "head": str(head)})
    labels = {str(label) for frame in app.dataframe if "metric" in frame.value
              for label in frame.value["metric"]}
    assert {"GPU memory peak", "GPU memory mean", "KV-cache usage peak", "accuracy"} <= labels


def test_run_detail_shows_the_memory_peak(
        monkeypatch: pytest.MonkeyPatch, stored: tuple[str, list[RunResult]]) -> None:
    url, runs = stored
    app = open_page(monkeypatch, url, page("run"), {"run": str(runs[-1].run_id)})
    table = app.dataframe[0].value
    assert table["GPU memory peak (GiB)"].tolist() == [pytest.approx(40.0)]


def test_compare_judges_the_memory_peak_exactly_as_the_gate_does(
        monkeypatch: pytest.MonkeyPatch, stored: tuple[str, list[RunResult]]) -> None:
    url, runs = stored
    base, head = (run.run_id for run in runs)
    app = open_page(monkeypatch, url, page("compare"), {"base": str(base), "head": str(head)})
    (table,) = [frame.value for frame in app.dataframe if "verdict" in frame.value]
    (memory,) = table[table["metric"] == "GPU memory peak"].to_dict("records")
    assert memory["verdict"] == "no change" and "bit-constant" in memory["reason"]


def test_trends_marks_a_tiny_persisting_memory_step_as_a_change_point() -> None:
    shown = [72.0] * 12 + [72.001] * 8  # +1 MiB of 72 GiB: below the usual 1 % smallest change
    frame = pd.DataFrame({
        "series": ["s"] * 20, "run_id": range(1, 21), "shown": shown,
        "started_at": pd.date_range("2026-09-01", periods=20, tz="UTC"),
        "metric": ["gpu_memory_peak_bytes"] * 20})
    points = compute_detected_markers(frame, "gpu_memory_peak_bytes")
    assert points["run_id"].tolist() == [13]
    assert compute_detected_markers(frame, "output_throughput_tokens_per_s").empty
