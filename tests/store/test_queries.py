"""The dashboard's read-only queries, on SQLite and PostgreSQL, with runs stored by the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.inputs.configs import EngineArgs, ServingConfig, Target, build_loaded_config
from tracker.inputs.suites import FixedPrompt, Suite, Workload, build_loaded_suite
from tracker.load.summary import compute_workload_summary
from tracker.results import (
    ORIGIN_KEY,
    RequestRecord,
    RunOrigin,
    RunStatus,
    TokenSource,
    WorkloadResult,
)
from tracker.store import queries
from tracker.store.regressions import RegressionStatus, SeriesKey, save_regression
from tracker.store.runs import (
    begin_run,
    finish_run,
    save_config_version,
    save_suite,
    save_workload,
)

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)


def _workload(name: str, ttft_s: float, started_at: datetime) -> WorkloadResult:
    records = tuple(RequestRecord(i, i * 0.1, ttft_s, ttft_s + 0.5, (0.01,) * 4, 5,
                                  TokenSource.USAGE, 10, TokenSource.USAGE) for i in range(8))
    return WorkloadResult(name, 2, 8, 0, {}, started_at, started_at, records,
                          compute_workload_summary(records, 2.0))


def _store_run(engine: Engine, *, config: str, max_num_seqs: int, suite: str, night: int,
               ttft_s: float, status: RunStatus = RunStatus.COMPLETED,
               origin: RunOrigin | None = None) -> int:
    loaded_config = build_loaded_config(ServingConfig(
        name=config, target=Target(kind="sim", model="m"),
        engine=EngineArgs(max_num_seqs=max_num_seqs)), "-")
    loaded_suite = build_loaded_suite(Suite(name=suite, workloads=[
        Workload(name=w, prompts=FixedPrompt(source="fixed", text="x"), max_tokens=5,
                 concurrency=2, num_requests=8) for w in ("a", "b")]), "-")
    started = T0 + timedelta(days=night)
    with Session(engine) as session, session.begin():
        run_id = begin_run(session, config_version_id=save_config_version(session, loaded_config),
                           suite_id=save_suite(session, loaded_suite), started_at=started,
                           host="h", tracker_version="t", simulated=False,
                           environment={"h": 1} if origin is None else
                           {"h": 1, ORIGIN_KEY: {"kind": origin.value}})
        if status is not RunStatus.FAILED:
            save_workload(session, run_id, 0, _workload("a", ttft_s, started))
            save_workload(session, run_id, 1, _workload("b", 2 * ttft_s, started))
        finish_run(session, run_id, status, started + timedelta(minutes=1),
                   None if status is RunStatus.COMPLETED else "broke")
    return run_id


@pytest.fixture
def history(store: Engine) -> dict[str, int]:
    """cfg-a on chat for 4 nights (version change on night 2, failed on night 3); cfg-b once."""
    ids = {
        "a0": _store_run(store, config="cfg-a", max_num_seqs=8, suite="chat", night=0, ttft_s=0.1),
        "a1": _store_run(store, config="cfg-a", max_num_seqs=8, suite="chat", night=1, ttft_s=0.1),
        "a2": _store_run(store, config="cfg-a", max_num_seqs=4, suite="chat", night=2, ttft_s=0.2),
        "a3": _store_run(store, config="cfg-a", max_num_seqs=4, suite="chat", night=3, ttft_s=0.2,
                         status=RunStatus.FAILED),
        "b0": _store_run(store, config="cfg-b", max_num_seqs=8, suite="chat", night=1, ttft_s=0.3),
    }
    return ids


def test_overview_keeps_the_latest_run_of_each_config_across_versions(
        store: Engine, history: dict[str, int]) -> None:
    with Session(store) as session:
        overview = queries.fetch_overview(session)
    rows = {row["config"]: row for row in overview.to_dict("records")}
    assert set(rows) == {"cfg-a", "cfg-b"}
    assert (rows["cfg-a"]["run_id"], rows["cfg-a"]["status"], rows["cfg-a"]["runs"]) == \
        (history["a3"], "failed", 4)
    assert rows["cfg-a"]["status_reason"] == "broke"
    assert (rows["cfg-b"]["run_id"], rows["cfg-b"]["runs"]) == (history["b0"], 1)
    assert rows["cfg-b"]["started_at"] == T0 + timedelta(days=1)


def test_overview_leaves_out_a_gates_runs_of_a_head_with_the_configs_name(
        store: Engine, history: dict[str, int]) -> None:
    _store_run(store, config="cfg-a", max_num_seqs=2, suite="chat", night=5, ttft_s=0.9,
               origin=RunOrigin.GATE)
    _store_run(store, config="cfg-c", max_num_seqs=2, suite="chat", night=5, ttft_s=0.9,
               origin=RunOrigin.BISECT)
    with Session(store) as session:
        rows = {row["config"]: row for row in queries.fetch_overview(session).to_dict("records")}
    assert set(rows) == {"cfg-a", "cfg-b"}  # a probe's config alone is no row
    assert (rows["cfg-a"]["run_id"], rows["cfg-a"]["runs"]) == (history["a3"], 4)


def test_overview_of_an_empty_store_is_an_empty_frame(store: Engine) -> None:
    with Session(store) as session:
        assert queries.fetch_overview(session).empty
        assert queries.fetch_store_summary(session).runs == 0


def test_trend_is_one_metric_oldest_first_with_the_config_version(
        store: Engine, history: dict[str, int]) -> None:
    with Session(store) as session:
        trend = queries.fetch_trend(session, "ttft_median_s", configs=["cfg-a"], suites=["chat"],
                                    workloads=["a"])
        since = queries.fetch_trend(session, "ttft_median_s", configs=["cfg-a", "cfg-b"],
                                    suites=["chat"], since=T0 + timedelta(days=1))
    assert list(trend["run_id"]) == [history["a0"], history["a1"], history["a2"]]  # a3 failed
    assert list(trend["value"]) == pytest.approx([0.1, 0.1, 0.2])
    assert trend["config_version"].nunique() == 2
    assert trend["config_version"].iloc[1] != trend["config_version"].iloc[2]
    assert set(since["run_id"]) == {history["a1"], history["a2"], history["b0"]}
    assert set(trend["source"]) == {"native"}  # measured here; an import names its tool
    assert set(since["workload"]) == {"a", "b"}


def test_previous_run_is_the_same_config_name_and_suite(store: Engine,
                                                        history: dict[str, int]) -> None:
    with Session(store) as session:
        assert queries.fetch_previous_run_id(session, history["a2"]) == history["a1"]
        assert queries.fetch_previous_run_id(session, history["a0"]) is None
        assert queries.fetch_previous_run_id(session, history["b0"]) is None


def test_comparison_has_the_relative_change_of_every_shared_metric(
        store: Engine, history: dict[str, int]) -> None:
    with Session(store) as session:
        comparison = queries.fetch_comparison(session, history["a1"], history["a2"])
    metrics = comparison.metrics.set_index(["workload", "metric"])
    assert metrics.loc[("a", "ttft_median_s"), "rel_change"] == pytest.approx(1.0)
    assert metrics.loc[("b", "ttft_median_s"), "base"] == pytest.approx(0.2)
    assert metrics.loc[("a", "ttft_median_s"), "direction"] == "lower_is_better"


def test_config_history_counts_the_runs_of_each_version(store: Engine,
                                                        history: dict[str, int]) -> None:
    with Session(store) as session:
        versions = queries.fetch_config_history(session, "cfg-a")
        bodies = queries.fetch_config_bodies(session, "cfg-a")
    assert [v.runs for v in versions] == [2, 2]
    assert versions[1].last_run_at == T0 + timedelta(days=3)
    assert {body["engine"]["max_num_seqs"] for body in bodies.values()} == {8, 4}


def test_run_detail_frames_have_a_row_per_workload_and_request(
        store: Engine, history: dict[str, int]) -> None:
    with Session(store) as session:
        detail = queries.fetch_run_detail(session, history["a2"])
    assert list(detail.workloads["workload"]) == ["a", "b"]
    assert detail.workloads["ttft_p99_s"].tolist() == pytest.approx([0.2, 0.4])
    assert len(detail.requests) == 16
    assert detail.requests["tpot_s"].iloc[0] == pytest.approx(0.5 / 4)


def test_regressions_frame_filters_by_status(store: Engine, history: dict[str, int]) -> None:
    with Session(store) as session, session.begin():
        save_regression(session, SeriesKey("cfg-a", "chat", "a", "ttft_median_s"),
                        run_id=history["a2"], location_index=2, before=0.1, after=0.2,
                        rel_change=1.0, regressed=True)
    with Session(store) as session:
        unresolved = queries.fetch_regressions_frame(session, [RegressionStatus.OPEN])
        fixed = queries.fetch_regressions_frame(session, [RegressionStatus.FIXED])
    assert unresolved[["config", "run_id", "rel_change"]].values.tolist() == \
        [["cfg-a", history["a2"], 1.0]]
    assert fixed.empty
