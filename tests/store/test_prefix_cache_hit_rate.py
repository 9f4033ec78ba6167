"""The prefix-cache hit rate and the requests' cached tokens in the store, on SQLite and PostgreSQL:
saved, read back, in the trend and the nightly watch's series, and migration 0008 on a store
written before it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alembic import command
from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from tracker.inputs.configs import EngineArgs, ServingConfig, Target, build_loaded_config
from tracker.inputs.suites import FixedPrompt, Suite, Workload, build_loaded_suite
from tracker.load.summary import compute_workload_summary
from tracker.results import (
    RequestRecord,
    RunStatus,
    ServerTelemetry,
    TokenSource,
    WorkloadResult,
)
from tracker.store import open_store, queries
from tracker.store.db import alembic_config, create_store_engine, head_revision, read_revision
from tracker.store.models import WorkloadMetricModel, WorkloadResultModel
from tracker.store.regressions import SeriesKey, fetch_metric_series
from tracker.store.runs import (
    begin_run,
    fetch_run,
    finish_run,
    save_config_version,
    save_suite,
    save_workload,
)

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
HIT_RATE = "prefix_cache_hit_rate"


def _records(cached: tuple[int | None, ...], prompt_tokens: int = 400) -> tuple[RequestRecord, ...]:
    return tuple(RequestRecord(i, i * 0.1, 0.05, 0.3, (0.01,) * 3, 4, TokenSource.USAGE,
                               prompt_tokens, TokenSource.USAGE, session=i // 2,
                               turn=i % 2 + 1, cached_input_tokens=c)
                 for i, c in enumerate(cached))


def _workload(name: str, records: tuple[RequestRecord, ...],
              server: ServerTelemetry | None = None) -> WorkloadResult:
    return WorkloadResult(name, 2, len(records), 0, {}, T0, T0 + timedelta(seconds=2), records,
                          compute_workload_summary(records, 2.0), server=server)


def _store_run(engine: Engine, workloads: tuple[WorkloadResult, ...], night: int = 0) -> int:
    config = build_loaded_config(ServingConfig(name="cfg", target=Target(kind="sim", model="m"),
                                               engine=EngineArgs(max_num_seqs=8)), "-")
    suite = build_loaded_suite(Suite(name="chat", workloads=[
        Workload(name="chat", prompts=FixedPrompt(source="fixed", text="x"), max_tokens=4,
                 concurrency=2, num_requests=4)]), "-")
    started = T0 + timedelta(days=night)
    with Session(engine) as session, session.begin():
        run_id = begin_run(session, config_version_id=save_config_version(session, config),
                           suite_id=save_suite(session, suite), started_at=started, host="h",
                           tracker_version="t", simulated=True, environment={})
        for position, workload in enumerate(workloads):
            save_workload(session, run_id, position, workload)
        finish_run(session, run_id, RunStatus.COMPLETED, started + timedelta(minutes=1), None)
    return run_id


def _stored_hit_rates(engine: Engine, run_id: int) -> dict[str, float]:
    """Workload name -> its stored ``prefix_cache_hit_rate`` row, for one run."""
    with Session(engine) as session:
        rows = session.execute(
            select(WorkloadResultModel.name, WorkloadMetricModel.value)
            .join(WorkloadMetricModel, WorkloadMetricModel.workload_result_id
                  == WorkloadResultModel.id)
            .where(WorkloadResultModel.run_id == run_id, WorkloadMetricModel.metric == HIT_RATE))
        return {name: value for name, value in rows}


def test_cached_tokens_round_trip_and_none_stays_none(store: Engine) -> None:
    records = _records((0, 256, None, 384))
    run_id = _store_run(store, (_workload("chat", records),))
    with Session(store) as session:
        (chat,) = fetch_run(session, run_id).workloads
    assert chat.records == records
    assert [r.cached_input_tokens for r in chat.records] == [0, 256, None, 384]
    with Session(store) as session:
        requests = queries.fetch_run_detail(session, run_id).requests
    assert requests["cached_input_tokens"].tolist()[:2] == [0, 256]
    assert requests["cached_input_tokens"].isna().tolist() == [False, False, True, False]


def test_the_requests_hit_rate_is_stored_when_the_server_gave_none(store: Engine) -> None:
    split = _workload("chat/turns-2+", _records((256, 384)))  # a split has no server counters
    unsaid = _workload("chat/turn-1", _records((None, None)))  # the server did not say
    run_id = _store_run(store, (split, unsaid))
    assert _stored_hit_rates(store, run_id) == {"chat/turns-2+": 640 / 800}
    with Session(store) as session:
        frame = queries.fetch_trend(session, HIT_RATE, configs=["cfg"], suites=["chat"])
        workloads = queries.fetch_run_detail(session, run_id).workloads
    assert frame["workload"].tolist() == ["chat/turns-2+"]
    assert frame["value"].tolist() == [0.8]
    assert workloads.set_index("workload").loc["chat/turns-2+", HIT_RATE] == 0.8
    assert workloads.set_index("workload")[HIT_RATE].isna().tolist() == [False, True]


def test_the_servers_counters_win_over_the_requests(store: Engine) -> None:
    server = ServerTelemetry(True, scrapes=3, values={HIT_RATE: 0.25, "prefix_cache_hits": 200})
    run_id = _store_run(store, (_workload("chat", _records((256, 384)), server),))
    assert _stored_hit_rates(store, run_id) == {"chat": 0.25}


def test_a_server_without_metrics_is_not_a_rate_of_zero(store: Engine) -> None:
    server = ServerTelemetry(False, reason="GET /metrics: 404", scrapes=0)
    run_id = _store_run(store, (_workload("chat", _records((None, None)), server),))
    assert _stored_hit_rates(store, run_id) == {}


def test_compare_and_the_watch_series_read_the_hit_rate(store: Engine) -> None:
    before = _store_run(store, (_workload("chat", _records((300, 300))),), night=0)
    after = _store_run(store, (_workload("chat", _records((100, 100))),), night=1)
    with Session(store) as session:
        frame = queries.fetch_comparison(session, before, after).metrics
        series = fetch_metric_series(session, SeriesKey("cfg", "chat", "chat", HIT_RATE))
    row = frame[frame["metric"] == HIT_RATE].iloc[0]
    assert (row["base"], row["head"], row["direction"]) == (0.75, 0.25, "higher_is_better")
    assert [point.value for point in series] == [0.75, 0.25]


def test_migration_0008_adds_the_column_and_copies_stored_server_hit_rates(db_url: str) -> None:
    engine = open_store(db_url)
    try:
        server = ServerTelemetry(True, scrapes=2, values={HIT_RATE: 0.6})
        run_id = _store_run(engine, (_workload("chat", _records((256, 384)), server),
                                     _workload("chat/turn-1", _records((128, 128)))))
    finally:
        engine.dispose()
    config = alembic_config(db_url)
    command.downgrade(config, "0007")
    assert read_revision(db_url) == (False, "0007")
    engine = create_store_engine(db_url, pooled=False)  # open_store refuses an older revision
    try:  # as a tracker before 0008 stored it: no hit rate among the workload's metrics
        with Session(engine) as session, session.begin():
            session.execute(delete(WorkloadMetricModel).where(WorkloadMetricModel.metric == HIT_RATE))
    finally:
        engine.dispose()
    for _ in range(2):  # upgrade, downgrade, upgrade again: nothing copied twice
        command.upgrade(config, "head")
        assert read_revision(db_url) == (False, head_revision())
        engine = open_store(db_url)
        try:
            assert _stored_hit_rates(engine, run_id) == {"chat": 0.6}
            with Session(engine) as session:
                chat, _ = fetch_run(session, run_id).workloads
            assert [r.cached_input_tokens for r in chat.records] == [None, None]  # not kept
        finally:
            engine.dispose()
        command.downgrade(config, "0007")

