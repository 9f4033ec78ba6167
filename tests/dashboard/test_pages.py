"""Every page under streamlit.testing.v1.AppTest: on a missing, an empty and a populated database."""

from __future__ import annotations

import getpass
import shutil
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.dashboard.apptest import figures, open_page, shown, texts
from tests.dashboard.conftest import REGRESSION_SERIES, Populated
from tracker.dashboard.pages import PAGES, PageSpec, page
from tracker.store.db import open_store
from tracker.store.regressions import RegressionStatus, fetch_regressions

PAGE_IDS = [spec.key for spec in PAGES]


@pytest.mark.parametrize("spec", PAGES, ids=PAGE_IDS)
def test_page_on_a_missing_database_hints_tracker_demo_and_creates_nothing(
        spec: PageSpec, monkeypatch: pytest.MonkeyPatch, missing_url: str) -> None:
    app = open_page(monkeypatch, missing_url, spec)
    assert "tracker demo --db" in shown(app.info[0].value)
    assert not Path(missing_url.removeprefix("sqlite:///")).exists()


@pytest.mark.parametrize("spec", PAGES, ids=PAGE_IDS)
def test_page_on_an_empty_database_hints_tracker_demo(
        spec: PageSpec, monkeypatch: pytest.MonkeyPatch, empty_url: str) -> None:
    app = open_page(monkeypatch, empty_url, spec)
    assert "No runs in" in shown(app.info[0].value) and "tracker demo" in shown(app.info[0].value)
    assert not app.get("plotly_chart")


def test_page_on_an_unreadable_database_says_why(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    path = tmp_path / "not-a-db.db"
    path.write_text("this is not sqlite", encoding="utf-8")
    app = open_page(monkeypatch, f"sqlite:///{path}", PAGES[0])
    assert app.error and "cannot read database" in shown(app.error[0].value)
    assert "damaged or not a tracker database" in shown(app.error[0].value)


def test_overview_puts_the_regression_and_the_failed_run_first(
        monkeypatch: pytest.MonkeyPatch, populated: Populated) -> None:
    app = open_page(monkeypatch, populated.url, page("overview"))
    counts = {m.label: m.value for m in app.metric}
    assert (counts["regression"], counts["failed"], counts["pass"], counts["runs stored"]) == \
        ("1", "1", "1", "5")
    shown = texts(app)
    assert "fast-sim · small · chat · TTFT p99 +25.0%" in shown
    assert shown.index("regression fast-sim") < shown.index("failed     unreachable")
    (grid,) = figures(app)
    assert {trace["name"] for trace in grid["data"]} == {"regression", "failed", "pass"}


def test_trends_marks_the_config_version_change_and_simulated_runs(
        monkeypatch: pytest.MonkeyPatch, populated: Populated) -> None:
    app = open_page(monkeypatch, populated.url, page("trends"))
    (chart,) = figures(app)
    names = [trace.get("name") for trace in chart["data"]]
    assert "fast-sim · small · chat" in names and "fast-sim · small · completions" in names
    assert "config version changed" in names
    changed = next(t for t in chart["data"] if t.get("name") == "config version changed")
    assert any("engine.max_num_seqs: 8 → 4" in text for text in changed["hovertext"])
    series = next(t for t in chart["data"] if t.get("name") == "fast-sim · small · chat")
    assert set(series["marker"]["symbol"]) == {"circle-open"}  # every run here is simulated
    assert chart["layout"]["yaxis"]["title"]["text"] == "TTFT p99 (ms)"


def test_trends_switches_percentile_and_config(monkeypatch: pytest.MonkeyPatch,
                                               populated: Populated) -> None:
    app = open_page(monkeypatch, populated.url, page("trends"))
    app.radio(key="trend_stat").set_value("median").run()
    app.multiselect(key="trend_configs").set_value(["other-sim"]).run()
    assert not app.exception
    (chart,) = figures(app)
    assert chart["layout"]["yaxis"]["title"]["text"] == "TTFT median (p50) (ms)"
    assert {t.get("name") for t in chart["data"]} >= {"other-sim · small · chat"}
    assert "config version changed" not in {t.get("name") for t in chart["data"]}


def test_run_detail_of_the_failed_run_says_why(monkeypatch: pytest.MonkeyPatch,
                                               populated: Populated) -> None:
    failed = populated.run_ids["unreachable"][0]
    app = open_page(monkeypatch, populated.url, page("run"), {"run": str(failed)})
    assert f"Run #{failed}" in shown(app.subheader[0].value)
    assert "Failed: all 12 requests of chat failed" in shown(app.error[0].value)


def test_run_detail_shows_distributions_and_the_simulated_marker(
        monkeypatch: pytest.MonkeyPatch, populated: Populated) -> None:
    run_id = populated.run_ids["fast-sim"][-1]
    app = open_page(monkeypatch, populated.url, page("run"), {"run": str(run_id)})
    assert "Simulated" in app.warning[0].value
    charts = figures(app)
    assert charts[0]["layout"]["xaxis"]["title"]["text"] == "TTFT (ms)"
    assert {t["name"] for t in charts[0]["data"]} == {"chat", "completions"}
    workloads = app.dataframe[0].value
    assert list(workloads["workload"]) == ["chat", "completions"]
    assert list(workloads["completed"]) == [12, 9]


def test_run_detail_of_an_unknown_run_says_so(monkeypatch: pytest.MonkeyPatch,
                                              populated: Populated) -> None:
    app = open_page(monkeypatch, populated.url, page("run"), {"run": "999"})
    assert "run 999 not found" in shown(app.error[0].value)


def test_compare_shows_verdicts_and_the_config_diff(monkeypatch: pytest.MonkeyPatch,
                                                    populated: Populated) -> None:
    base, head = populated.run_ids["fast-sim"][-2:]
    app = open_page(monkeypatch, populated.url, page("compare"),
                    {"base": str(base), "head": str(head)})
    tables = [frame.value for frame in app.dataframe]
    every_metric, config_diff = tables[0], tables[1]
    assert set(every_metric["verdict"].dropna()) <= {"regression", "improvement", "no change",
                                                      "inconclusive"}
    # workloads x judged: 3 latencies x 2 statistics, 2 throughputs, the GPU memory peak
    assert every_metric["verdict"].notna().sum() == 2 * (3 * 2 + 2 + 1)
    memory = every_metric[every_metric["metric"] == "GPU memory peak"]
    assert memory["verdict"].tolist() == ["no change"] * 2  # max_num_seqs holds no memory
    assert config_diff.values.tolist() == [["engine.max_num_seqs", "changed", "8", "4"]]
    assert sum(int(m.value) for m in app.metric) == 18


def test_compare_two_config_versions_picks_their_latest_runs(
        monkeypatch: pytest.MonkeyPatch, populated: Populated) -> None:
    app = open_page(monkeypatch, populated.url, page("compare"))
    app.radio(key="compare_mode").set_value("Two config versions").run()
    assert not app.exception
    base, head = populated.run_ids["fast-sim"][-2:]
    assert f"#{base} and #{head}" in texts(app)


def test_configs_lists_versions_and_their_diff(monkeypatch: pytest.MonkeyPatch,
                                               populated: Populated) -> None:
    app = open_page(monkeypatch, populated.url, page("configs"), {"config": "fast-sim"})
    versions = app.dataframe[0].value
    assert list(versions["runs"]) == [1, 2]  # newest first
    assert app.dataframe[1].value.values.tolist()[0][0] == "engine.max_num_seqs"


def test_regressions_lists_the_open_one(monkeypatch: pytest.MonkeyPatch,
                                        populated: Populated) -> None:
    app = open_page(monkeypatch, populated.url, page("regressions"))
    table = app.dataframe[0].value
    assert table[["config", "workload", "status"]].values.tolist() == \
        [["fast-sim", "chat", "open"]]
    assert "engine.max_num_seqs 8 -> 4" in texts(app)


def test_triage_marks_a_regression_expected_with_a_note(
        monkeypatch: pytest.MonkeyPatch, populated: Populated, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    shutil.copy(populated.url.removeprefix("sqlite:///"), copy)
    url = f"sqlite:///{copy}"
    app = open_page(monkeypatch, url, page("regressions"))
    app.radio(key="triage_status").set_value("expected")
    app.text_area(key="triage_note").input("fewer sequences on purpose")
    next(b for b in app.button if b.label == "Save").click().run()
    assert not app.exception
    assert app.success[0].value == "Saved: regression 1 is expected."
    assert "No regression records with these statuses." in texts(app)  # open + acknowledged
    engine = open_store(url)
    try:
        with Session(engine) as session:
            (record,) = fetch_regressions(session, series=REGRESSION_SERIES)
    finally:
        engine.dispose()
    assert (record.status, record.note) == (RegressionStatus.EXPECTED, "fewer sequences on purpose")
    assert record.updated_by == f"local:{getpass.getuser()}"  # on 127.0.0.1: the OS user
    app.multiselect(key="regression_statuses").set_value(["expected"]).run()
    assert f"last triaged by local:{getpass.getuser()} at " in texts(app)
