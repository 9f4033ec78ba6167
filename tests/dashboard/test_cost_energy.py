"""Cost and energy per token beside the throughputs: Run detail, Compare and Trends under
AppTest, on two runs of a priced simulator config with the fake NVML's energy counter."""

from __future__ import annotations

import pytest

from tests.dashboard.apptest import figures, open_page, trace_values
from tests.telemetry.fake_nvml import FakeNvml
from tracker.dashboard.pages import page
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.metrics import compute_workload_metrics
from tracker.pipeline.execute import execute_suite
from tracker.results import RunResult
from tracker.store.db import open_store
from tracker.telemetry import TelemetrySettings

CONFIG = """\
name: priced-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {seed: 1, prefill_s_per_token: 0.00001, decode_base_s: 0.001, decode_per_seq_s: 0.0}
engine: {max_num_seqs: 8}
cost: {usd_per_gpu_hour: 3.5, gpus: 1}
"""
SUITE = """\
name: priced
seed: 5
workloads:
  - name: chat
    prompts: {source: synthetic, input_tokens: 16}
    max_tokens: 8
    ignore_eos: true
    concurrency: 2
    num_requests: 8
"""
COST = "cost per 1M output tokens ($/1M tokens)"
ENERGY = "energy per output token (J/token)"


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[RunResult]]:
    directory = tmp_path_factory.mktemp("priced-db")
    url = f"sqlite:///{directory / 'priced.db'}"
    (directory / "c.yaml").write_text(CONFIG, encoding="utf-8")
    (directory / "s.yaml").write_text(SUITE, encoding="utf-8")
    engine = open_store(url)
    try:
        runs = [execute_suite(engine, load_config(directory / "c.yaml"),
                              load_suite(directory / "s.yaml"),
                              telemetry=TelemetrySettings(nvml=FakeNvml(count=1)))
                for _ in range(2)]
    finally:
        engine.dispose()
    return url, runs


def test_run_detail_shows_cost_and_energy_beside_the_throughput(
        monkeypatch: pytest.MonkeyPatch, priced: tuple[str, list[RunResult]]) -> None:
    url, runs = priced
    app = open_page(monkeypatch, url, page("run"), {"run": str(runs[-1].run_id)})
    table = app.dataframe[0].value
    columns = list(table.columns)
    assert columns.index(COST) == columns.index("output token throughput (tokens/s)") + 1
    expected = compute_workload_metrics(runs[-1].workloads[0])
    assert table[COST].tolist() == [pytest.approx(expected["usd_per_1m_output_tokens"])]
    assert table[ENERGY].tolist() == [pytest.approx(expected["joules_per_output_token"])]


def test_compare_lists_cost_and_energy_among_the_metrics(
        monkeypatch: pytest.MonkeyPatch, priced: tuple[str, list[RunResult]]) -> None:
    url, runs = priced
    base, head = (run.run_id for run in runs)
    app = open_page(monkeypatch, url, page("compare"), {"base": str(base), "head": str(head)})
    labels = {str(label) for frame in app.dataframe if "metric" in frame.value
              for label in frame.value["metric"]}
    assert {"cost per 1M output tokens", "cost per 1M tokens", "energy per output token",
            "energy per token"} <= labels


def test_trends_plots_the_cost_per_token(
        monkeypatch: pytest.MonkeyPatch, priced: tuple[str, list[RunResult]]) -> None:
    url, runs = priced
    app = open_page(monkeypatch, url, page("trends"))
    app.selectbox(key="trend_family").set_value("other").run()
    app.radio(key="trend_other").set_value("usd_per_1m_output_tokens").run()
    assert not app.exception
    (chart,) = figures(app)
    assert chart["layout"]["yaxis"]["title"]["text"] == COST
    (series,) = [t for t in chart["data"] if t.get("name") == "priced-sim · priced · chat"]
    assert trace_values(series) == pytest.approx(
        [compute_workload_metrics(run.workloads[0])["usd_per_1m_output_tokens"] for run in runs])
