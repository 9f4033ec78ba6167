"""The Frontier page under AppTest, over real `tracker run`s of a concurrency ladder: each
version's frontier and the latest nights on one chart, the knee marked, and the knee of the
version that halved the batch to the left of the other's."""

from __future__ import annotations

import pytest

from tests.dashboard.apptest import figures, open_page, texts
from tests.dashboard.conftest import Populated
from tests.dashboard.frontier_db import build_frontier_db
from tracker.dashboard.frontierview import compute_frontier_lines, query_frontier_rows
from tracker.dashboard.pages import page


@pytest.fixture(scope="module")
def frontier_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_frontier_db(tmp_path_factory.mktemp("frontier-db"))


def test_frontier_draws_each_version_and_the_latest_nights_with_their_knees(
        monkeypatch: pytest.MonkeyPatch, frontier_url: str) -> None:
    app = open_page(monkeypatch, frontier_url, page("frontier"))
    (figure,) = figures(app)
    names = [trace["name"] for trace in figure["data"]]
    assert sum(name.startswith("version ") for name in names) == 2, names
    assert sum(name.startswith("night #") for name in names) == 3, names
    assert "knee" in names
    assert figure["layout"]["xaxis"]["title"]["text"] == "achieved throughput (req/s)"
    assert "TTFT p90 (ms)" in figure["layout"]["yaxis"]["title"]["text"]
    assert "Stars mark the knees" in texts(app)
    table = app.dataframe[0].value
    assert list(table["frontier"][:2]) == [n for n in names if n.startswith("version ")]


def test_the_knee_of_the_halved_batch_sits_at_half_the_throughput(frontier_url: str) -> None:
    rows = query_frontier_rows(frontier_url, "ladder-sim", "ladder", "ttft_p90_s")
    versions = [line for line in compute_frontier_lines(rows, "chat") if line.kind == "version"]
    assert [len(line.run_ids) for line in versions] == [2, 1]
    before, after = (line.frontier.knee for line in versions)
    assert before is not None and after is not None, versions
    assert after.throughput_req_per_s < 0.75 * before.throughput_req_per_s, (before, after)


def test_frontier_without_a_ladder_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch,
                                                        populated: Populated) -> None:
    app = open_page(monkeypatch, populated.url, page("frontier"))
    assert "No run of this config and suite stored a ladder" in texts(app)
    assert figures(app) == []
