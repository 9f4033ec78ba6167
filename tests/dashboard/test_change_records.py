"""The watch's records on the pages, under AppTest: Trends draws the change points the records
hold (the demo's throughput drop among them), and an improvement is not an open regression on
Overview and Regressions."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.dashboard.apptest import figures, open_page, texts
from tests.dashboard.conftest import Populated
from tests.demo_run import DemoOutput, fetch_demo_records
from tracker.dashboard.pages import page
from tracker.results import NATIVE_SOURCE, compute_run_source
from tracker.store.db import open_store
from tracker.store.regressions import (
    SeriesKey,
    save_regression,
)
from tracker.store.runs import fetch_run, fetch_runs

THROUGHPUT = "output_throughput_tokens_per_s"


def _change_points(chart: dict[str, object]) -> dict[str, object]:
    traces = chart["data"]
    assert isinstance(traces, list)
    return next(t for t in traces if t.get("name") == "change point")


def test_trends_draws_the_recorded_change_with_its_config_diff(
        monkeypatch: pytest.MonkeyPatch, populated: Populated) -> None:
    """Three runs are too few for the detector: the marker is the record's."""
    app = open_page(monkeypatch, populated.url, page("trends"))
    (chart,) = figures(app)
    points = _change_points(chart)
    [hover] = points["hovertext"]
    assert "regression #1 (open) in fast-sim · small · chat" in hover
    assert "+25.0% (4 → 5 ms) from run #3" in hover
    assert "config diff: config fast-sim: engine.max_num_seqs 8 -&gt; 4" in hover


def test_trends_shows_the_change_point_of_the_demos_throughput_drop(
        monkeypatch: pytest.MonkeyPatch, demo: DemoOutput) -> None:
    [record] = [r for r in fetch_demo_records(demo.db_url)
                if r.series.metric == THROUGHPUT and r.regressed is True]
    app = open_page(monkeypatch, demo.db_url, page("trends"))
    app.selectbox(key="trend_family").set_value("other").run()
    app.radio(key="trend_other").set_value(THROUGHPUT).run()
    assert not app.exception
    (chart,) = figures(app)
    points = _change_points(chart)
    texts_of_points = [str(text) for text in points["hovertext"]]
    drop = next(text for text in texts_of_points if f"regression #{record.id} (open)" in text)
    assert f"from run #{record.run_id}" in drop
    assert "config diff: engine.max_num_seqs: 256 → 4" in drop
    assert record.rel_change is not None and -0.65 < record.rel_change < -0.45  # about -55 %


def test_an_improvement_is_not_listed_as_an_open_regression(
        monkeypatch: pytest.MonkeyPatch, populated: Populated, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    shutil.copy(populated.url.removeprefix("sqlite:///"), copy)
    url = f"sqlite:///{copy}"
    engine = open_store(url)
    try:
        with Session(engine) as session, session.begin():
            save_regression(session, SeriesKey("fast-sim", "small", "chat", THROUGHPUT),
                            run_id=3, location_index=2, before=100.0, after=150.0,
                            rel_change=0.5, interval=(0.4, 0.6), regressed=False,
                            attribution="config fast-sim: engine.max_num_seqs 8 -> 4")
    finally:
        engine.dispose()
    overview = open_page(monkeypatch, url, page("overview"))
    shown = texts(overview)
    assert "1 improvements recorded (not open: nothing to fix)" in shown
    assert [h.value for h in overview.subheader if "Open regressions" in h.value] == \
        ["Open regressions (1)"]  # the TTFT p99 regression alone
    assert "Also open" not in shown
    regressions = open_page(monkeypatch, url, page("regressions"))
    assert regressions.dataframe[0].value["status"].tolist() == ["open"]  # open + acknowledged
    assert regressions.dataframe[0].value["metric"].tolist() == ["TTFT p99"]
    regressions.multiselect(key="regression_statuses").set_value(["improvement"]).run()
    assert regressions.dataframe[0].value["status"].tolist() == ["improvement"]
    assert regressions.subheader[0].value == "Improvement 2 · improvement"
    assert "+50.0% [+40.0%, +60.0%]" in texts(regressions)


def _demo_runs(url: str) -> list[tuple[int, str]]:
    """(run id, config version) of the demo's history runs, oldest first."""
    engine = open_store(url)
    try:
        with Session(engine) as session:
            runs = [fetch_run(session, summary.run_id)
                    for summary in fetch_runs(session, limit=1000)]
    finally:
        engine.dispose()
    return sorted((run.run_id, run.config.version) for run in runs
                  if compute_run_source(run.environment) == NATIVE_SOURCE)


def test_compare_of_two_runs_of_one_version_shows_no_regression_and_no_improvement(
        monkeypatch: pytest.MonkeyPatch, demo: DemoOutput) -> None:
    """Two runs of the same config version differ by their requests and the run-to-run
    drift; judged as the gate judges (the run is the unit, the noise from that version's other
    runs), nothing reads as a change."""
    runs = _demo_runs(demo.db_url)
    last_good = runs[-1][1]
    same = [run_id for run_id, version in runs if version != last_good]
    versions = {version for run_id, version in runs if run_id in same}
    for version in sorted(versions):
        pair = [run_id for run_id, v in runs if v == version][-2:]
        app = open_page(monkeypatch, demo.db_url, page("compare"),
                        {"base": str(pair[0]), "head": str(pair[1])})
        assert not app.exception
        counts = {m.label: int(m.value) for m in app.metric}
        assert counts["regression"] == 0 and counts["improvement"] == 0, (version, counts)
        every_metric = app.dataframe[0].value
        assert not set(every_metric["verdict"].dropna()) & {"regression", "improvement"}


def test_compare_of_two_config_versions_judges_all_their_runs(
        monkeypatch: pytest.MonkeyPatch, demo: DemoOutput) -> None:
    """The last good version against the cut: every stored run of each, and the throughput
    drop (about -55 %) is a regression, its change the table's change."""
    app = open_page(monkeypatch, demo.db_url, page("compare"))
    app.radio(key="compare_mode").set_value("Two config versions").run()
    assert not app.exception
    shown = texts(app)
    assert "Every stored run of each version on this suite is judged" in shown
    every_metric = app.dataframe[0].value
    throughput = every_metric[every_metric["metric"] == "output token throughput"]
    assert list(throughput["verdict"]) == ["regression"]
    assert -65.0 < float(throughput["change %"].iloc[0]) < -45.0
    base_runs, head_runs = (int(n) for n in
                            str(throughput["samples"].iloc[0]).split(" run")[0].split(" vs "))
    assert base_runs >= 3 and head_runs >= 3  # every stored run, not the latest of each
