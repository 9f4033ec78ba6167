"""The load generator's stored fields round-trip on SQLite and PostgreSQL (revision 0002)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from tests.store.test_runs import _config, _ok_workload, _suite
from tracker.results import ClientHealth, LatencyStats, RequestRecord, TokenSource, WorkloadResult
from tracker.store import begin_run, fetch_run, save_config_version, save_suite, save_workload
from tracker.store.models import WorkloadResultModel

T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def _open_loop_workload() -> WorkloadResult:
    base = _ok_workload()
    records = (
        RequestRecord(0, 0.25, 0.1, 0.5, (0.1, 0.0), 3, TokenSource.USAGE, 8, TokenSource.USAGE,
                      scheduled_start_s=0.125, output_chunks=2),
        RequestRecord(1, 0.5, None, None, (), None, None, None, None, "http_429",
                      "Retry-After: 3; slow down", scheduled_start_s=0.375),
    )
    client = ClientHealth(0.97, 0.03, 0.05, 0.001, 0.2, 0.3, client_bound=True,
                          reason="requests left up to 200.0 ms (p99) after their planned start")
    summary = replace(base.summary, scheduled_ttft=LatencyStats(1, 0.225, 0.225, 0.0, 0.225,
                                                                0.225),
                      scheduled_e2el=LatencyStats(1, 0.625, 0.625, 0.0, 0.625, 0.625),
                      goodput_req_per_s=1.5, slo_attainment=0.5, token_count_mismatches=1,
                      capacity_at_slo_req_per_s=12.5, client=client)
    params = {**base.params, "load": {"mode": "open", "request_rate": 4.0, "burstiness": 1.0,
                                      "max_concurrency": None}}
    return replace(base, name="open", records=records, summary=summary, params=params)


def _store(store: Engine, *workloads: WorkloadResult) -> int:
    with Session(store) as session, session.begin():
        config_id = save_config_version(session, _config())
        suite_id = save_suite(session, _suite())
        run_id = begin_run(session, config_version_id=config_id, suite_id=suite_id,
                           started_at=T0, host="h", tracker_version="0.1.0", simulated=True,
                           environment={})
        for position, workload in enumerate(workloads):
            save_workload(session, run_id, position, workload)
    return run_id


def test_open_loop_fields_client_health_and_capacity_round_trip(store: Engine) -> None:
    workload = _open_loop_workload()
    run_id = _store(store, workload, _ok_workload())
    with Session(store) as session:
        run = fetch_run(session, run_id)
        flags = dict(session.execute(select(WorkloadResultModel.name,
                                            WorkloadResultModel.client_bound)).all())
    stored, closed = run.workloads
    assert stored == workload  # every field, including the new ones
    assert stored.client_bound and not closed.client_bound
    assert closed.summary.client is None and closed.summary.scheduled_ttft is None
    assert flags == {"open": True, "short": False}  # queryable without reading the summary
