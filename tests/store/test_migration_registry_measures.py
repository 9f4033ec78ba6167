"""Migration 0012 fills in the registry's new measures for workloads stored before them (GPU
memory from NVML's summaries, the KV-cache peak and the preemptions from the server's rows, the
launched server's startup time from the run's environment): the same rows the tracker now writes
itself, on SQLite and PostgreSQL, with this tree's migrations."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, delete, select
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from tracker.inputs.configs import ServingConfig, build_loaded_config
from tracker.inputs.suites import Suite, build_loaded_suite
from tracker.load.summary import compute_workload_summary
from tracker.metrics import GIB
from tracker.results import (
    GpuDeviceSummary,
    GpuTelemetry,
    RequestRecord,
    RunStatus,
    ServerTelemetry,
    TokenSource,
    WorkloadResult,
)
from tracker.store.models import WorkloadMetricModel
from tracker.store.runs import begin_run, finish_run, save_config_version, save_suite, save_workload

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
NEW = ("gpu_memory_peak_bytes", "gpu_memory_mean_bytes", "kv_cache_usage_peak",
       "num_preemptions", "startup_s")
T0 = datetime(2026, 9, 1, tzinfo=UTC)


def _config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))  # this tree's, not the install's
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def _workload(name: str) -> WorkloadResult:
    records = tuple(RequestRecord(i, i * 0.1, 0.05, 0.4, (0.01,) * 3, 4, TokenSource.USAGE,
                                  16, TokenSource.USAGE) for i in range(4))
    devices = tuple(GpuDeviceSummary(i, "H100", 80 * GIB, 10, (70 + i) * GIB, (69.5 + i) * GIB,
                                     None, None, None, None, None, None) for i in range(2))
    server = ServerTelemetry(measured=True, scrapes=4, values={
        "kv_cache_usage_peak": 0.42, "num_preemptions": 3.0, "prefix_cache_hit_rate": 0.1})
    return WorkloadResult(name, 2, 4, 0, {}, T0, T0, records,
                          compute_workload_summary(records, 1.0),
                          gpu=GpuTelemetry(measured=True, devices=devices), server=server)


def _stored_metrics(session: Session) -> set[tuple[int, str, float]]:
    rows = session.execute(select(WorkloadMetricModel.workload_result_id,
                                  WorkloadMetricModel.metric, WorkloadMetricModel.value)
                           .where(WorkloadMetricModel.metric.in_(NEW)))
    return {(row[0], row[1], row[2]) for row in rows}


def _save_runs(session: Session) -> None:
    suite = build_loaded_suite(Suite.model_validate({
        "name": "chat", "workloads": [{"name": "chat", "prompts": {
            "source": "synthetic", "input_tokens": 8}, "max_tokens": 4, "concurrency": 2,
            "num_requests": 4}]}), "baselines/chat.yaml")
    config = build_loaded_config(ServingConfig.model_validate({
        "name": "served", "target": {"kind": "vllm", "model": "m",
                                     "base_url": "http://127.0.0.1:8000"}}), "configs/s.yaml")
    for simulated, environment in ((False, {"launch": {"startup_s": 41.25}}), (True, {})):
        run_id = begin_run(session, config_version_id=save_config_version(session, config),
                           suite_id=save_suite(session, suite), started_at=T0, host="h",
                           tracker_version="0.1.0", simulated=simulated, environment=environment)
        save_workload(session, run_id, 0, _workload("chat"))
        save_workload(session, run_id, 1, _workload("long"))
        finish_run(session, run_id, RunStatus.COMPLETED, T0, None)


def test_the_backfill_writes_what_the_tracker_now_stores_itself(db_url: str) -> None:
    command.upgrade(_config(db_url), "head")  # this tracker's rows, saved by its own code
    engine = create_engine(db_url, poolclass=NullPool)
    try:
        with Session(engine) as session, session.begin():
            _save_runs(session)
            written = _stored_metrics(session)  # what this tracker writes with each workload
            session.execute(delete(WorkloadMetricModel)
                            .where(WorkloadMetricModel.metric.in_(NEW)))  # as stored before
        command.downgrade(_config(db_url), "0011_schedule_bisect")
        command.upgrade(_config(db_url), "0012")
        with Session(engine) as session:
            filled = _stored_metrics(session)
        # the simulated run's NVML memory is the idle host GPU: not backfilled
        simulated = {row for row in written if row[0] > 2 and row[1].startswith("gpu_memory")}
        assert filled == written - simulated
        assert (1, "gpu_memory_peak_bytes", 71.0 * GIB) in filled
        assert (1, "startup_s", 41.25) in filled and (3, "kv_cache_usage_peak", 0.42) in filled
        command.downgrade(_config(db_url), "0011_schedule_bisect")  # keeps the rows, as 0008's does
        with Session(engine, autoflush=False) as session, session.begin():
            session.execute(delete(WorkloadMetricModel)
                            .where(WorkloadMetricModel.workload_result_id == 1,
                                   WorkloadMetricModel.metric == "startup_s"))
        command.upgrade(_config(db_url), "0012")  # again: copies only what is missing
        with Session(engine) as session:
            assert _stored_metrics(session) == filled
    finally:
        engine.dispose()
