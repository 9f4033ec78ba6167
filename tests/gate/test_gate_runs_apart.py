"""A gate's runs are stored, but kept apart from the configs' history: the nightly series, the
watch and the next gate's noise prior follow the history's runs only, and the trend draws the
gate's as a series of their own. Both backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from tests.gate.test_gating import BASE, SLOW, SUITE
from tracker.cli.main import main
from tracker.results import RunOrigin
from tracker.store.queries import fetch_trend
from tracker.store.regressions import SeriesKey, fetch_metric_series


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {}
    for name, text in (("base", BASE), ("slow", SLOW), ("suite", SUITE)):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(text, encoding="utf-8")
    return paths


def _gate(files: dict[str, Path], db_url: str, capsys: pytest.CaptureFixture[str]) -> dict:
    code = main(["gate", "--base", str(files["base"]), "--head", str(files["slow"]),
                 "--suite", str(files["suite"]), "--db", db_url, "--quiet", "--json", "-"])
    assert code == 1
    verdict: dict = json.loads(capsys.readouterr().out)
    return verdict


def test_a_gates_runs_stay_out_of_the_history_and_the_next_gates_noise(
        files: dict[str, Path], db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(3):  # the history: three nights of the base (a noise prior needs 3)
        assert main(["run", "--config", str(files["base"]), "--suite", str(files["suite"]),
                     "--db", db_url, "--quiet"]) == 0
    capsys.readouterr()
    first = _gate(files, db_url, capsys)
    assert first["rounds"]["noise_runs"] == 3
    gate_runs = set(first["base"]["run_ids"]) | set(first["head"]["run_ids"])

    engine = create_engine(db_url)
    try:
        with Session(engine) as session:
            series = fetch_metric_series(
                session, SeriesKey("gate-sim", "gate-small", "busy", "ttft_median_s"))
            trend = fetch_trend(session, "ttft_median_s", configs=["gate-sim"],
                                suites=["gate-small"])
    finally:
        engine.dispose()
    assert len(series) == 3 and not {point.run_id for point in series} & gate_runs
    sources = dict(zip(trend["run_id"], trend["source"], strict=True))
    assert {sources[run_id] for run_id in gate_runs} == {RunOrigin.GATE.value}
    assert sorted(source for run_id, source in sources.items() if run_id not in gate_runs) == \
        ["native"] * 3

    # `tracker runs` marks them
    assert main(["runs", "--db", db_url, "--limit", "50"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "gate-sim@" in line]
    marked = {int(line.split()[0]) for line in lines if "[gate]" in line}
    assert marked == gate_runs and len(lines) == len(gate_runs) + 3

    # the next gate's noise comes from the three nights, not from the first gate's base rounds
    second = _gate(files, db_url, capsys)
    assert second["rounds"]["noise_runs"] == 3
