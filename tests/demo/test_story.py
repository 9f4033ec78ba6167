"""`tracker demo` tells the story: a config's versions, a change that regresses, caught and
attributed by the nightly watch, its alert, and a gate report.

The demo runs once per test session (``tests/demo_run.py``, the ``demo`` fixture), as a user
runs it: ``python -m tracker demo`` from an empty directory, no ``--db``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.demo_run import DemoOutput, fetch_demo_records
from tracker.demo.story import WALK_RUNS, DemoStory, build_history, load_demo, shipped_demo
from tracker.errors import MeasurementError
from tracker.inputs.configs import load_config
from tracker.store.db import open_store
from tracker.store.runs import fetch_config_versions, fetch_runs

CHANGED = "engine.max_num_seqs: 256 → 4"  # the last shipped version's one change


# --- the shipped story -----------------------------------------------------------------------


def test_the_demo_versions_are_one_config_and_the_last_cuts_max_num_seqs_below_concurrency(
) -> None:
    paths, _ = shipped_demo()
    story = load_demo()
    assert len(paths) == len(story.walk) + 1 >= 3
    assert {v.config.config.name for v in (*story.walk, story.change)} == {"demo-chat"}
    versions = [v.config.version for v in (*story.walk, story.change)]
    assert len(set(versions)) == len(versions)  # every file is a new version
    concurrency = max(w.concurrency for w in story.suite.suite.workloads)
    good, bad = story.walk[-1].config.config.engine, story.change.config.config.engine
    assert good.max_num_seqs is not None and good.max_num_seqs >= concurrency
    assert bad.max_num_seqs is not None and bad.max_num_seqs < concurrency
    assert good.model_copy(update={"max_num_seqs": bad.max_num_seqs}) == bad  # the one change
    assert story.change.label == paths[-1].stem == "4-max-num-seqs-4"


def test_the_demo_runs_the_simulator_faster_than_the_shipped_files_say() -> None:
    paths, _ = shipped_demo()
    story = load_demo(time_scale=0.5)
    shipped = load_config(paths[0]).config.simulator
    scaled = story.walk[0].config.config.simulator
    assert shipped is not None and scaled is not None
    assert scaled.decode_base_s == pytest.approx(shipped.decode_base_s * 0.5)


def test_a_change_the_watch_never_catches_stops_the_demo_with_could_not_measure(
        tmp_path: Path) -> None:
    story = load_demo()
    same = DemoStory(walk=(story.walk[-1],), change=story.walk[-1], suite=story.suite)
    engine = open_store(f"sqlite:///{tmp_path / 'never.db'}")
    try:
        with pytest.raises(MeasurementError, match="did not catch 3-prefix-caching after 2 "
                                                   "runs") as raised:
            build_history(engine, same, walk_runs=2, max_change_runs=2)
        with Session(engine) as session:
            assert [r.status.value for r in fetch_runs(session, 10)] == ["completed"] * 4
    finally:
        engine.dispose()
    assert raised.value.exit_code == 3


# --- what `tracker demo` stored and printed --------------------------------------------------


def test_the_demo_walks_one_config_through_its_versions_in_completed_simulated_runs(
        demo: DemoOutput) -> None:
    engine = open_store(demo.db_url)
    try:
        with Session(engine) as session:
            runs = fetch_runs(session, 1000)[::-1]
            versions = fetch_config_versions(session, "demo-chat")
    finally:
        engine.dispose()
    assert len(versions) == len(shipped_demo()[0]) >= 2
    assert {(r.config_name, r.suite_name) for r in runs} == {("demo-chat", "demo-load")}
    assert all(r.status.value == "completed" and r.simulated and r.failed == 0 for r in runs)
    per_version = [sum(1 for r in runs if r.config_version == v.version) for v in versions]
    assert per_version[:-1] == [WALK_RUNS] * (len(versions) - 1)
    assert 5 <= per_version[-1] <= 10  # the change runs until the watch has caught it
    order = [r.config_version for r in runs]
    assert order == sorted(order, key=[v.version for v in versions].index)  # one after another


def test_the_demo_regression_is_attributed_to_the_changed_config_field(demo: DemoOutput) -> None:
    records = fetch_demo_records(demo.db_url)
    caught = [r for r in records if r.regressed is True]
    assert caught, records
    assert all(r.attribution == CHANGED and r.status.value == "open" for r in caught)
    assert {r.series.metric for r in caught} >= {"ttft_median_s", "ttft_p99_s"}
    assert all(r.rel_change is not None and r.rel_change > 0.5 for r in caught
               if r.series.metric.startswith("ttft"))
    engine = open_store(demo.db_url)
    try:
        with Session(engine) as session:
            runs = fetch_runs(session, 1000)
            last = fetch_config_versions(session, "demo-chat")[-1].version
    finally:
        engine.dispose()
    first_bad = min(r.run_id for r in runs if r.config_version == last)
    assert {r.run_id for r in caught} == {first_bad}


def test_the_demo_gate_report_shows_the_regression_and_the_config_diff(demo: DemoOutput) -> None:
    report = demo.report.read_text(encoding="utf-8")
    assert report.startswith("## tracker gate: ❌ regression")
    assert "| `engine.max_num_seqs` | `256` | `4` |" in report
    assert re.search(r"\| chat\\-c16 \| TTFT median \|.*\| ❌ regression \|", report), report
    assert "(stored runs) · simulated" in report


def test_the_demo_prints_the_alert_and_where_to_look(demo: DemoOutput) -> None:
    out = demo.stdout
    headline = next(r for r in fetch_demo_records(demo.db_url)
                    if r.regressed and r.series.metric == "ttft_p99_s")
    assert (":rotating_light: Regression in *ttft_p99_s* on demo-chat@" in out
            and f"run {headline.run_id}; config diff: {CHANGED}" in out)
    assert f"  regression  #{headline.id}: change point in ttft_p99_s (chat-c16)" in out
    assert f"attributed to: {CHANGED}" in out
    assert "\n  tracker dashboard\n" in out  # the default database, as the demo used
    assert f"/compare?base={headline.run_id - 1}&head={headline.run_id} " in out
    assert "  the gate report: tracker-demo-gate.md\n" in out
    assert f"  tracker show {headline.run_id}\n" in out
    assert "Traceback" not in demo.stderr


def _gate_estimate(report: str, workload: str, label: str) -> float:
    """The gate's estimate of a row's change: its change column, or (when it gave none) its
    head statistic against its base one."""
    escaped = workload.replace("-", "\\-")
    row = next(line for line in report.splitlines()
               if line.startswith(f"| {escaped} | {label} |"))
    cells = [cell.strip() for cell in row.strip("|").split(" | ")]
    change = re.match(r"([+-]\d+(?:\.\d+)?)%", cells[4])
    if change:
        return float(change.group(1)) / 100.0
    base, head = (float(cell.split()[0]) for cell in cells[2:4])
    return head / base - 1.0


def test_the_demo_records_say_how_big_the_change_is(demo: DemoOutput) -> None:
    """The TTFT p99 record is the gate's change within 25 %, the throughput's about -55 %
    (the last good version against the bad one, not a level mixing older versions in), and
    no record reads a change of 0.0 %; the walk's improvements are not open."""
    records = fetch_demo_records(demo.db_url)
    report = demo.report.read_text(encoding="utf-8")
    caught = {r.series.metric: r for r in records if r.regressed is True}
    ttft = caught["ttft_p99_s"]
    gate = _gate_estimate(report, ttft.series.workload, "TTFT p99")
    assert ttft.rel_change is not None and abs(ttft.rel_change / gate - 1.0) <= 0.25, \
        (ttft.rel_change, gate)
    assert ttft.interval is not None and ttft.interval[0] < ttft.rel_change < ttft.interval[1]
    drop = caught["output_throughput_tokens_per_s"]
    assert drop.rel_change is not None and abs(drop.rel_change - -0.55) <= 0.10, drop
    for record in records:
        assert record.before != record.after, record
        assert record.rel_change is None or f"{record.rel_change:+.1%}" not in ("+0.0%", "-0.0%")
        assert (record.status.value == "improvement") == (record.regressed is False), record
