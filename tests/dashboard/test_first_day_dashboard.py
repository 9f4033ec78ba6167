"""The dashboard on a new user's first day (issue 28), over `tracker demo`'s database: values
rounded as the CLI writes them, p-values and outcomes readable, empty cells a dash, the run's
workload table in view, Compare opening on the last config change, and the config diff in the
hover of the whole point where a version begins."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from sqlalchemy.orm import Session

from tests.dashboard.apptest import figures, open_page
from tests.dashboard.conftest import Populated
from tests.demo_run import DemoOutput
from tracker.dashboard.compareview import P_COLUMN
from tracker.dashboard.pages import page
from tracker.dashboard.ui import EMPTY_CELL
from tracker.results import NATIVE_SOURCE
from tracker.store.db import open_store
from tracker.store.runs import fetch_runs

READABLE_P = re.compile(r"< 0\.0001|0\.\d{1,5}|1|\d\.\de-0\d")  # 2 significant digits at most
OUTCOME_WORDS = {"regression", "improvement", "no change", "inconclusive", "as configured"}


def _history(url: str) -> list[tuple[int, str]]:
    """(run id, config version) of the demo's own history runs, oldest first."""
    engine = open_store(url)
    try:
        with Session(engine) as session:
            listed = fetch_runs(session, limit=1000)
    finally:
        engine.dispose()
    return sorted((run.run_id, run.config_version) for run in listed
                  if run.source == NATIVE_SOURCE)


def _last_change(url: str) -> tuple[int, int]:
    """The latest run of the demo's last-but-one config version and the latest run of all."""
    runs = _history(url)
    newest = runs[-1][1]
    before = [run_id for run_id, version in runs if version != newest]
    return before[-1], runs[-1][0]


def _every_metric(app: Any) -> Any:
    (table,) = [frame for frame in app.dataframe if "verdict" in frame.value]
    return table


def _column_config(frame: Any) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(frame.proto.columns)
    return config


@pytest.fixture
def compare_last_change(monkeypatch: pytest.MonkeyPatch, demo: DemoOutput) -> Any:
    base, head = _last_change(demo.db_url)
    return open_page(monkeypatch, demo.db_url, page("compare"),
                     {"base": str(base), "head": str(head)})


def test_compare_shows_p_values_to_two_digits_and_tiny_ones_as_below_a_floor(
        compare_last_change: Any) -> None:
    frame = _every_metric(compare_last_change)
    p_values = [str(p) for p in frame.value[P_COLUMN].dropna()]
    assert p_values and all(READABLE_P.fullmatch(p) for p in p_values), p_values
    assert "< 0.0001" in p_values  # the demo's throughput drop
    assert P_COLUMN in _column_config(frame)  # the column's own settings reach it


def test_compare_shows_changes_with_one_decimal(compare_last_change: Any) -> None:
    frame = _every_metric(compare_last_change)
    changes = frame.value["change %"].dropna()
    assert not changes.empty and all(round(c, 1) == c for c in changes)
    assert _column_config(frame)["change %"]["type_config"]["format"] == "%+.1f%%"


def test_compare_shows_outcomes_in_words_and_a_dash_for_empty_cells(
        compare_last_change: Any) -> None:
    frame = _every_metric(compare_last_change)
    verdicts = set(frame.value["verdict"].dropna())
    assert "no change" in verdicts and verdicts <= OUTCOME_WORDS
    assert frame.value["verdict"].isna().any()  # the rows the analysis does not judge
    assert all(table.proto.placeholder == EMPTY_CELL for table in compare_last_change.dataframe)


def test_compare_of_two_versions_writes_values_as_the_gate_report_does(
        monkeypatch: pytest.MonkeyPatch, demo: DemoOutput) -> None:
    """The demo's gate judged the same runs (the last good version against the cut): each
    judged row's base and head read as in its report (``72.00 GiB``, ``482.40 ms``)."""
    app = open_page(monkeypatch, demo.db_url, page("compare"))
    app.radio(key="compare_mode").set_value("Two config versions").run()
    assert not app.exception
    table = _every_metric(app).value
    judged = table[table["verdict"].notna()]
    report = demo.report.read_text(encoding="utf-8")
    assert len(judged) >= 8
    for base, head in zip(judged["base"], judged["head"], strict=True):
        assert f"| {base} | {head} |" in report, (base, head)
    memory = judged[judged["metric"] == "GPU memory peak"]
    assert memory["base"].tolist() == ["72.00 GiB"]


def test_compare_opens_on_the_newest_version_against_the_one_before(
        monkeypatch: pytest.MonkeyPatch, demo: DemoOutput) -> None:
    base, head = _last_change(demo.db_url)
    app = open_page(monkeypatch, demo.db_url, page("compare"))
    inputs = {field.label: int(field.value) for field in app.number_input}
    assert inputs == {"Base run": base, "Head run": head}


def test_compare_of_a_first_version_opens_on_the_run_before(
        monkeypatch: pytest.MonkeyPatch, populated: Populated) -> None:
    """fast-sim's first version has no version before it: its two runs; its second version's
    run against the first version's latest."""
    first, second, third = populated.run_ids["fast-sim"]
    for head, base in ((second, first), (third, second)):
        app = open_page(monkeypatch, populated.url, page("compare"), {"head": str(head)})
        inputs = {field.label: int(field.value) for field in app.number_input}
        assert inputs == {"Base run": base, "Head run": head}


def test_run_detail_shows_the_clis_columns_rounded_and_the_rest_on_request(
        monkeypatch: pytest.MonkeyPatch, demo: DemoOutput) -> None:
    head = _history(demo.db_url)[-1][0]
    app = open_page(monkeypatch, demo.db_url, page("run"), {"run": str(head)})
    frame = app.dataframe[0]
    config = _column_config(frame)
    shown = [config.get(column, {}).get("label") or column for column in frame.proto.column_order]
    assert shown == ["workload", "conc", "ok", "fail", "req/s", "out tok/s", "GPU mem peak GiB",
                     "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "ITL p99 ms", "E2E p99 ms"]
    formats = {label: config[column]["type_config"]["format"]
               for column, label in zip(frame.proto.column_order, shown, strict=True)
               if "format" in config.get(column, {}).get("type_config", {})}
    assert formats == {"req/s": "%.2f", "out tok/s": "%.1f", "GPU mem peak GiB": "%.2f",
                       **{label: "%.1f" for label in shown[-5:]}}
    assert frame.value["GPU memory peak (GiB)"].round(2).tolist() == [72.0]  # 71.9992
    assert len(frame.value.columns) > len(shown)  # the others are there, out of view
    assert any("Show/hide columns" in caption.value and "TPOT p99 ms" in caption.value
               for caption in app.caption)


def test_trends_shows_a_markers_hover_over_the_whole_point_it_marks(
        monkeypatch: pytest.MonkeyPatch, demo: DemoOutput) -> None:
    """The config diff of a new version's diamond, and a change point's size, show wherever
    the pointer is on the run's point, not only at the edge of the larger marker over it."""
    app = open_page(monkeypatch, demo.db_url, page("trends"))
    chart = figures(app)[0]
    markers = {t["name"]: t["hovertext"] for t in chart["data"]
               if t.get("name") in ("config version changed", "change point")}
    points = [text for t in chart["data"] if t.get("mode") == "lines+markers"
              for text in t["hovertext"]]
    diffs = [text for text in points if "config version changed" in text]
    assert len(diffs) == len(markers["config version changed"]) == 3  # four versions
    assert any("engine.max_num_seqs" in text for text in diffs)
    for hover in (*markers["config version changed"], *markers["change point"]):
        assert any(hover in text for text in points), hover


def test_trends_lists_its_runs_values_rounded_as_the_cli_does(
        monkeypatch: pytest.MonkeyPatch, demo: DemoOutput) -> None:
    app = open_page(monkeypatch, demo.db_url, page("trends"))  # TTFT p99, in ms
    (runs,) = [frame for frame in app.dataframe if "shown" in frame.value]
    assert _column_config(runs)["shown"] == {"label": "value (ms)",
                                             "type_config": {"type": "number", "format": "%.1f"}}
