"""Workload names with "/" in them (a session workload's ``chat/turn-1`` and ``chat/turns-2+``)
on every page that shows, selects or links a workload: stored by real `tracker run`s of a
multi-turn suite on the simulator, with a regression on the later turns' TTFT."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.dashboard.apptest import figures, open_page, texts
from tests.dashboard.conftest import FAST_SIM
from tracker.cli.main import main
from tracker.dashboard.pages import PAGES, PageSpec, page
from tracker.store.db import open_store
from tracker.store.regressions import SeriesKey, save_regression

CONVERSATIONS = Path(__file__).resolve().parents[2] / "baselines" / "traffic" / \
    "conversations.jsonl"
SUITE = """\
name: sessions
seed: 3
workloads:
  - name: chat
    prompts: {source: conversations, path: conversations.jsonl, format: openai-chat,
              history: recorded, min_turns: 2, max_turns: 3, output_tokens: fixed}
    max_tokens: 4
    ignore_eos: true
    concurrency: 2
    num_requests: 3
"""
LATER = "chat/turns-2+"
NAMES = ["chat", "chat/turn-1", LATER]
SERIES = SeriesKey("slash-sim", "sessions", LATER, "ttft_p99_s")


@pytest.fixture(scope="module")
def slash_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two runs of a multi-turn suite, and an open regression on ``chat/turns-2+``."""
    directory = tmp_path_factory.mktemp("slash-db")
    url = f"sqlite:///{directory / 'slash.db'}"
    shutil.copy(CONVERSATIONS, directory / "conversations.jsonl")
    (directory / "suite.yaml").write_text(SUITE, encoding="utf-8")
    config = directory / "sim.yaml"
    config.write_text(FAST_SIM.format(name="slash-sim", max_num_seqs=8), encoding="utf-8")
    for _ in range(2):
        assert main(["run", "--config", str(config), "--suite", str(directory / "suite.yaml"),
                     "--db", url, "--quiet"]) == 0
    engine = open_store(url)
    try:
        with Session(engine) as session, session.begin():
            save_regression(session, SERIES, run_id=2, location_index=1, before=0.004,
                            after=0.005, rel_change=0.25, regressed=True,
                            attribution="the later turns got slower")
    finally:
        engine.dispose()
    return url


@pytest.mark.parametrize("spec", PAGES, ids=[spec.key for spec in PAGES])
def test_every_page_opens_with_slashed_workload_names(
        spec: PageSpec, monkeypatch: pytest.MonkeyPatch, slash_url: str) -> None:
    open_page(monkeypatch, slash_url, spec)  # no exception, the page's own title


def test_overview_and_regressions_name_the_later_turns(monkeypatch: pytest.MonkeyPatch,
                                                       slash_url: str) -> None:
    overview = open_page(monkeypatch, slash_url, page("overview"))
    assert f"slash-sim · sessions · {LATER} · TTFT p99 +25.0%" in texts(overview)
    regressions = open_page(monkeypatch, slash_url, page("regressions"))
    assert regressions.dataframe[0].value["workload"].tolist() == [LATER]


def test_trends_selects_a_slashed_workload(monkeypatch: pytest.MonkeyPatch,
                                           slash_url: str) -> None:
    app = open_page(monkeypatch, slash_url, page("trends"))
    assert app.multiselect(key="trend_workloads").options == NAMES
    (chart,) = figures(app)
    drawn = {t.get("name") for t in chart["data"]}
    assert {f"slash-sim · sessions · {name}" for name in NAMES} <= drawn
    app.multiselect(key="trend_workloads").set_value([LATER]).run()
    assert not app.exception
    (chart,) = figures(app)
    series = [t for t in chart["data"] if str(t.get("name", "")).startswith("slash-sim")]
    assert [t["name"] for t in series] == [f"slash-sim · sessions · {LATER}"]
    assert len(series[0]["y"]) == 2  # both runs
    app.selectbox(key="trend_family").set_value("other").run()  # throughput: the choice stays
    assert not app.exception
    (chart,) = figures(app)
    assert [t["name"] for t in chart["data"] if str(t.get("name", "")).startswith("slash")] \
        == [f"slash-sim · sessions · {LATER}"]


def test_run_detail_shows_each_turn_workload(monkeypatch: pytest.MonkeyPatch,
                                             slash_url: str) -> None:
    app = open_page(monkeypatch, slash_url, page("run"), {"run": "2"})
    assert app.dataframe[0].value["workload"].tolist() == NAMES
    distribution = figures(app)[0]
    assert {t["name"] for t in distribution["data"]} == set(NAMES)
    requests = next(f.value for f in app.dataframe if "error_class" in f.value.columns)
    assert set(requests["workload"]) == set(NAMES)


def test_compare_judges_the_slashed_workloads(monkeypatch: pytest.MonkeyPatch,
                                              slash_url: str) -> None:
    app = open_page(monkeypatch, slash_url, page("compare"), {"base": "1", "head": "2"})
    every_metric = app.dataframe[0].value
    assert set(every_metric["workload"]) == set(NAMES)
    judged = every_metric[every_metric["verdict"].notna()]
    assert LATER in set(judged["workload"])
    bars = figures(app)[0]
    assert any(LATER in str(label) for trace in bars["data"] for label in trace.get("y", ()))
