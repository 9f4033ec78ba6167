"""Compare shows a bisection's culprits when a stored bisection ran both runs, and nothing
about bisection otherwise."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.dashboard.apptest import open_page, texts
from tests.dashboard.conftest import FAST_SIM, SMALL_SUITE
from tracker.cli.main import main
from tracker.dashboard.pages import page
from tracker.store.bisections import StoredBisection, save_bisection
from tracker.store.db import open_store


def _runs(tmp_path: Path, url: str) -> list[int]:
    suite = tmp_path / "small.yaml"
    suite.write_text(SMALL_SUITE, encoding="utf-8")
    for version, seqs in (("v1", 8), ("v2", 4)):
        config = tmp_path / f"{version}.yaml"
        config.write_text(FAST_SIM.format(name="fast-sim", max_num_seqs=seqs), encoding="utf-8")
        assert main(["run", "--config", str(config), "--suite", str(suite), "--db", url,
                     "--quiet"]) == 0
    return [1, 2]


def test_compare_shows_the_culprits_of_a_bisection_that_ran_both_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'bisect.db'}"
    base_id, head_id = _runs(tmp_path, url)
    app = open_page(monkeypatch, url, page("compare"),
                    {"base": str(base_id), "head": str(head_id)})
    assert "Which change did it" not in [s.value for s in app.subheader]
    engine = open_store(url)
    try:
        with Session(engine) as session, session.begin():
            save_bisection(session, StoredBisection(
                "fast-sim", "small", "a" * 64, "b" * 64, "chat", "ttft_median_s", "found",
                "found after 2 probes",
                ({"fields": ["engine.max_num_seqs"], "share": 0.97,
                  "share_interval": [0.8, 1.1]},),
                ({"number": 1, "fields": ["engine.max_num_seqs"], "outcome": "regressed",
                  "reason": "worse"},), datetime.now(UTC),
                ((None, "base", base_id), (None, "head", head_id))))
    finally:
        engine.dispose()
    app = open_page(monkeypatch, url, page("compare"),
                    {"base": str(base_id), "head": str(head_id)})
    assert "Which change did it" in [s.value for s in app.subheader]
    culprits = app.dataframe[-1].value
    assert culprits["field"].tolist() == ["engine.max_num_seqs"]
    assert culprits["interval %"].tolist() == ["[80%, 110%]"]
    assert "tracker bisect" in texts(app)
