"""The dashboard's logic outside Streamlit: diffs, trend shaping, states, verdicts, launcher."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from tracker.cli.main import main
from tracker.dashboard.launch import APP_PATH, build_command
from tracker.dashboard.overview_state import compute_state, shape_overview
from tracker.dashboard.trend_changes import compute_detected_markers
from tracker.dashboard.trend_series import find_version_changes, shape_trend
from tracker.errors import ConfigError, UsageError
from tracker.inputs.config_diff import compute_config_diff
from tracker.reports.diff_report import render_diff_lines
from tracker.store.db import DB_URL_ENV

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_diff_reports_changed_added_and_removed_nested_keys() -> None:
    old = {"engine": {"max_num_seqs": 8, "block_size": 16}, "target": {"model": "m"}}
    new = {"engine": {"max_num_seqs": 4, "kv_cache_dtype": "fp8"}, "target": {"model": "m"}}
    changes = compute_config_diff(old, new)
    assert [(c.path, c.kind) for c in changes] == [
        ("engine.block_size", "removed"), ("engine.kv_cache_dtype", "added"),
        ("engine.max_num_seqs", "changed")]
    assert render_diff_lines(changes, limit=2) == [
        "engine.block_size: 16 → (default)", "engine.kv_cache_dtype: (default) → fp8",
        "… and 1 more"]
    assert compute_config_diff(old, old) == []


def _series(values: list[float], versions: list[str]) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame({
        "run_id": range(1, n + 1),
        "started_at": [NOW + timedelta(days=i) for i in range(n)],
        "status": "completed", "simulated": False, "config": "c", "suite": "s",
        "workload": "w", "config_version": versions, "value": values})


def test_noise_band_comes_from_earlier_runs_so_a_jump_lands_outside_it() -> None:
    values = [0.100, 0.102, 0.098, 0.101, 0.099, 0.100, 0.150]
    shaped = shape_trend(_series(values, ["v1"] * 7), "ttft_p99_s")
    assert shaped["shown"].iloc[-1] == pytest.approx(150.0)  # milliseconds
    assert shaped["band_low"].iloc[:4].isna().all()  # fewer than 4 earlier runs
    last = shaped.iloc[-1]
    assert last["band_low"] < 100.0 < last["band_high"] < last["shown"]


def test_version_change_is_marked_with_the_diff_of_the_bodies() -> None:
    shaped = shape_trend(_series([0.1, 0.1, 0.2], ["v1", "v1", "v2"]), "ttft_p99_s")
    bodies = {"c": {"v1": {"engine": {"max_num_seqs": 8}}, "v2": {"engine": {"max_num_seqs": 4}}}}
    changes = find_version_changes(shaped, bodies)
    assert list(changes["run_id"]) == [3]
    assert changes["diff"].iloc[0] == "engine.max_num_seqs: 8 → 4"


def test_change_points_of_a_step_series_are_marked_at_the_first_new_value() -> None:
    values = [0.100 + 0.001 * (i % 3) for i in range(20)] + \
             [0.130 + 0.001 * (i % 3) for i in range(20)]
    shaped = shape_trend(_series(values, ["v1"] * 40), "ttft_p99_s")
    points = compute_detected_markers(shaped, "ttft_p99_s")
    assert list(points["run_id"]) == [21]
    assert "+29.7% (101 → 131 ms) from run #21" in points["text"].iloc[0]


def test_states_rank_failures_and_regressions_before_passes() -> None:
    assert compute_state("failed", NOW, NOW, regressed=True) == "failed"
    assert compute_state("completed", NOW, NOW, regressed=True) == "regression"
    assert compute_state("completed", NOW - timedelta(days=3), NOW, regressed=False) == "stale"
    assert compute_state("completed", NOW - timedelta(hours=2), NOW, regressed=False) == "pass"
    frame = pd.DataFrame({"config": ["a", "b", "c"], "suite": ["s", "s", "s"],
                          "status": ["completed", "completed", "partial"],
                          "started_at": pd.to_datetime([NOW, NOW, NOW], utc=True)})
    shaped = shape_overview(frame, NOW, regressed={("b", "s")})
    assert list(shaped["state"]) == ["regression", "partial", "pass"]


def test_launch_serves_on_localhost_and_passes_the_url_in_the_environment() -> None:
    argv, env = build_command("postgresql+psycopg://u:secret@db/t", 8600)
    assert argv[1:5] == ["-m", "streamlit", "run", str(APP_PATH)]
    joined = " ".join(argv)
    assert "--server.address 127.0.0.1" in joined and "--server.port 8600" in joined
    assert "--browser.gatherUsageStats false" in joined and "--server.headless true" in joined
    assert "secret" not in joined
    assert env[DB_URL_ENV] == "postgresql+psycopg://u:secret@db/t"


def test_launch_refuses_a_bad_port_and_a_missing_app(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--port: must be between 1 and 65535"):
        build_command("sqlite:///x.db", 70000)
    with pytest.raises(ConfigError, match="the dashboard app is missing"):
        build_command("sqlite:///x.db", 8501, app=tmp_path / "app.py")


def test_cli_dashboard_reports_a_bad_port_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dashboard", "--port", "0", "--db", "sqlite:///x.db"]) == 2
    assert capsys.readouterr().err == "error: --port: must be between 1 and 65535 (got 0)\n"
