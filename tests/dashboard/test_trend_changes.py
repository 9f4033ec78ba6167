"""What Trends draws for changes, outside Streamlit: the records' change points (with the config
diff where a change sits on a version boundary), the detector's where no record holds one, and a
noise band in the metric's own space that starts afresh at each config version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from tracker.dashboard.trend_changes import compute_change_markers, compute_record_markers
from tracker.dashboard.trend_series import shape_trend
from tracker.store.regressions import RegressionRecord, RegressionStatus, SeriesKey

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SERIES = "c · s · w"
DIFF = "engine.max_num_seqs: 256 → 4"


def _frame(values: list[float], versions: list[str]) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame({
        "run_id": range(1, n + 1),
        "started_at": [NOW + timedelta(days=i) for i in range(n)],
        "status": "completed", "simulated": True, "config": "c", "suite": "s",
        "workload": "w", "config_version": versions, "value": values})


def _record(run_id: int, metric: str, before: float, after: float, *, regressed: bool = True,
            attribution: str = DIFF, record_id: int = 1) -> RegressionRecord:
    status = RegressionStatus.OPEN if regressed else RegressionStatus.IMPROVEMENT
    return RegressionRecord(
        id=record_id, series=SeriesKey("c", "s", "w", metric), run_id=run_id,
        location_index=run_id - 1, before=before, after=after, rel_change=after / before - 1.0,
        regressed=regressed, status=status, note="", attribution=attribution, detected_at=NOW,
        updated_at=NOW, interval=(after / before - 1.06, after / before - 0.94))


# A throughput series: three versions, the last a drop the detector does not call on 4 runs
THROUGHPUT = [2600.0, 2570, 2610, 2590, 2580, 2600, 4800, 4850, 4790, 4830, 4810, 4820,
              2250, 2240, 2260, 2255]
VERSIONS = ["v1"] * 6 + ["v2"] * 6 + ["v3"] * 4


def test_a_records_change_point_is_drawn_with_its_size_and_the_config_diff() -> None:
    shaped = shape_trend(_frame(THROUGHPUT, VERSIONS), "output_throughput_tokens_per_s")
    record = _record(13, "output_throughput_tokens_per_s", 4816.0, 2251.0)
    markers = compute_change_markers(shaped, [record], "output_throughput_tokens_per_s")
    recorded = markers[markers["run_id"] == 13]
    assert len(recorded) == 1
    row = recorded.iloc[0]
    assert row["series"] == SERIES and row["kind"] == "regression"
    assert row["shown"] == pytest.approx(2250.0)  # drawn on the first run of the new level
    assert "regression #1 (open)" in row["text"]
    assert "-53.3% [-59.3%, -47.3%] (4816 → 2251 tokens/s) from run #13" in row["text"]
    assert f"config diff: {DIFF}" in row["text"]


def test_a_change_off_any_version_boundary_names_no_config_diff() -> None:
    values = [0.1] * 10 + [0.2] * 8
    shaped = shape_trend(_frame(values, ["v1"] * 18), "ttft_p99_s")
    record = _record(11, "ttft_p99_s", 0.1, 0.2, attribution="nothing changed in the config or "
                     "the environment: likely the engine, the hardware, the load or noise")
    [text] = compute_record_markers(shaped, [record], "ttft_p99_s")["text"]
    assert "(100 → 200 ms)" in text and "config diff" not in text


def test_an_improvement_is_drawn_as_one() -> None:
    shaped = shape_trend(_frame(THROUGHPUT, VERSIONS), "output_throughput_tokens_per_s")
    record = _record(7, "output_throughput_tokens_per_s", 2590.0, 4816.0, regressed=False)
    [kind] = compute_record_markers(shaped, [record], "output_throughput_tokens_per_s")["kind"]
    assert kind == "improvement"


def test_a_detected_change_the_record_holds_is_drawn_once_and_others_still_are() -> None:
    values = [0.100 + 0.001 * (i % 3) for i in range(20)] + \
             [0.130 + 0.001 * (i % 3) for i in range(20)] + \
             [0.200 + 0.001 * (i % 3) for i in range(20)]
    shaped = shape_trend(_frame(values, ["v1"] * 60), "ttft_p99_s")
    alone = compute_change_markers(shaped, [], "ttft_p99_s")
    assert list(alone["run_id"]) == [21, 41]  # the detector's own reading
    record = _record(22, "ttft_p99_s", 0.1, 0.13)  # the watch placed it a run later
    both = compute_change_markers(shaped, [record], "ttft_p99_s")
    assert sorted(both["run_id"]) == [22, 41]
    assert "found in the series shown" in both[both["run_id"] == 41]["text"].iloc[0]


def test_a_record_of_a_run_not_shown_draws_nothing() -> None:
    shaped = shape_trend(_frame([0.1] * 6, ["v1"] * 6), "ttft_p99_s")
    other = _record(99, "ttft_p99_s", 0.1, 0.2)
    assert compute_record_markers(shaped, [other], "ttft_p99_s").empty


def test_the_noise_band_never_falls_below_zero() -> None:
    values = [0.01, 0.20, 0.01, 0.20, 0.01, 0.20, 0.01, 0.20]  # a wide, skewed spread
    shaped = shape_trend(_frame(values, ["v1"] * 8), "ttft_p99_s")
    band = shaped.dropna(subset=["band_low"])
    assert not band.empty and (band["band_low"] > 0.0).all()
    # a ratio band: the centre is the geometric one, and it stretches as far up as down
    last = band.iloc[-1]
    assert last["band_high"] / last["band_center"] == pytest.approx(
        last["band_center"] / last["band_low"])


def test_a_count_band_is_cut_at_zero() -> None:
    values = [0.0, 0.0, 3.0, 0.0, 0.0, 4.0, 0.0, 0.0]  # preemptions: zero on most runs
    shaped = shape_trend(_frame(values, ["v1"] * 8), "num_preemptions")
    band = shaped.dropna(subset=["band_low"])
    assert not band.empty and (band["band_low"] >= 0.0).all()


def test_the_noise_band_starts_afresh_at_each_config_version() -> None:
    shaped = shape_trend(_frame(THROUGHPUT, VERSIONS), "output_throughput_tokens_per_s")
    by_run = shaped.set_index("run_id")
    # each version's first four runs have no band of their own, and no band of the version before
    assert by_run.loc[[7, 8, 9, 10], "band_low"].isna().all()
    assert by_run.loc[[13, 14, 15, 16], "band_low"].isna().all()
    band = by_run.loc[11]  # from runs 7-10, version 2's alone
    assert 4700.0 < band["band_low"] < band["band_center"] < band["band_high"] < 4900.0
