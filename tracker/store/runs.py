"""Save and fetch runs. Every function takes a Session, and the caller owns the transaction::

    with Session(engine) as session, session.begin():
        run_id = begin_run(session, ...)

ORM rows stay in here: callers get ids, ``tracker.results`` values and ``tracker.store.listings``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, func, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from tracker.errors import NotFoundError
from tracker.inputs.configs import LoadedConfig
from tracker.inputs.suites import LoadedSuite
from tracker.metrics import compute_run_metrics, compute_workload_metrics
from tracker.results import (
    LatencyStats,
    RequestRecord,
    RunResult,
    RunStatus,
    TokenSource,
    VersionRef,
    WorkloadResult,
    WorkloadSummary,
    compute_run_source,
    compute_run_warnings,
)
from tracker.store.listings import ConfigVersionRow, RunListing
from tracker.store.loadgen_facts import (
    complete_summary,
    fetch_workload_loadgen,
    save_workload_loadgen,
)
from tracker.store.models import (
    RESULT_SCHEMA_VERSION,
    ConfigVersionModel,
    RequestRecordModel,
    RunModel,
    SuiteModel,
    WorkloadMetricModel,
    WorkloadResultModel,
)
from tracker.store.models_client_health import WorkloadLoadgenModel
from tracker.store.quality import fetch_quality
from tracker.store.storable import INT64_MAX, INT64_MIN
from tracker.store.telemetry import fetch_workload_telemetry, save_workload_telemetry

LATENCY_KEYS = ("ttft", "tpot", "itl", "e2el")

# --- config versions and suites ------------------------------------------------------------


def save_config_version(session: Session, loaded: LoadedConfig) -> int:
    """The id of this (config name, version), stored now if it was never seen before."""
    values = {
        "name": loaded.config.name,
        "version": loaded.version,
        "canonical": dict(loaded.canonical),
        "source_path": loaded.path,
    }
    return _get_or_create(session, ConfigVersionModel, values)


def save_suite(session: Session, loaded: LoadedSuite) -> int:
    """The id of this (suite name, version), stored now if it was never seen before."""
    values = {
        "name": loaded.suite.name,
        "version": loaded.version,
        "canonical": dict(loaded.canonical),
        "prompts_digest": loaded.prompts_digest,
        "source_path": loaded.path,
    }
    return _get_or_create(session, SuiteModel, values)


def _get_or_create(
    session: Session, model: type[ConfigVersionModel | SuiteModel], values: dict[str, Any]
) -> int:
    """Insert unless (name, version) exists, safely against a concurrent writer of the same row."""
    find = select(model.id).where(model.name == values["name"],
                                  model.version == values["version"])
    found = session.scalar(find)
    if found is not None:
        return found
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = dialect.insert(model).values(**values, first_seen_at=datetime.now(UTC))
    session.execute(statement.on_conflict_do_nothing(index_elements=["name", "version"]))
    return session.execute(find).scalar_one()


def fetch_config_versions(session: Session, name: str) -> list[ConfigVersionRow]:
    """Every version of config ``name`` the store has seen, oldest first."""
    rows = session.execute(
        select(ConfigVersionModel.version, ConfigVersionModel.first_seen_at,
               ConfigVersionModel.canonical)
        .where(ConfigVersionModel.name == name)
        .order_by(ConfigVersionModel.first_seen_at, ConfigVersionModel.id)
    )
    return [ConfigVersionRow(version, seen, canonical) for version, seen, canonical in rows]


# --- saving a run --------------------------------------------------------------------------


def begin_run(
    session: Session,
    *,
    config_version_id: int,
    suite_id: int,
    started_at: datetime,
    host: str,
    tracker_version: str,
    simulated: bool,
    environment: Mapping[str, Any],
) -> int:
    """Store a new run with status ``running`` and return its id."""
    run = RunModel(
        config_version_id=config_version_id,
        suite_id=suite_id,
        status=RunStatus.RUNNING.value,
        status_reason=None,
        started_at=started_at,
        ended_at=None,
        host=host,
        tracker_version=tracker_version,
        simulated=simulated,
        environment=dict(environment),
        source=compute_run_source(environment),
        schema_version=RESULT_SCHEMA_VERSION,
    )
    session.add(run)
    session.flush()
    return run.id


def save_workload(session: Session, run_id: int, position: int, result: WorkloadResult) -> None:
    """Store one finished workload: summary columns, its metrics (``compute_workload_metrics``:
    the summary's, the server's, cost, energy and GPU memory, and the run's own
    ``compute_run_metrics``: the launched server's startup time) and every request record."""
    row = WorkloadResultModel(run_id=run_id, position=position, **_workload_values(result))
    session.add(row)
    session.flush()
    run = session.get(RunModel, run_id)
    metrics = {**compute_workload_metrics(result),
               **compute_run_metrics({} if run is None else run.environment)}  # startup_s
    if metrics:
        session.execute(insert(WorkloadMetricModel), [
            {"workload_result_id": row.id, "metric": name, "value": value}
            for name, value in metrics.items()
        ])
    if result.records:
        session.execute(insert(RequestRecordModel),
                        [_record_values(row.id, record) for record in result.records])
    save_workload_telemetry(session, row.id, result)
    save_workload_loadgen(session, row.id, result.summary)


def _workload_values(result: WorkloadResult) -> dict[str, Any]:
    summary = result.summary
    counts = {f"{key}_count": _count(getattr(summary, key)) for key in LATENCY_KEYS}
    return {
        "name": result.name,
        "concurrency": result.concurrency,
        "num_requests": result.num_requests,
        "warmup_requests": result.warmup_requests,
        "params": dict(result.params),
        "started_at": result.started_at,
        "ended_at": result.ended_at,
        "complete": result.complete,
        "completed": summary.completed,
        "failed": summary.failed,
        "duration_s": summary.duration_s,
        "total_input_tokens": summary.total_input_tokens,
        "total_output_tokens": summary.total_output_tokens,
        "output_tokens_source": _source_value(summary.output_tokens_source),
        "input_tokens_source": _source_value(summary.input_tokens_source),
        "errors": dict(summary.errors),
        "client_bound": result.client_bound,
        "client_bound_reason": summary.client.reason if summary.client else None,
        "input_token_count_mismatches": summary.input_token_count_mismatches,
        **counts,
    }


def _count(stats: LatencyStats | None) -> int | None:
    return None if stats is None else stats.count


def _source_value(source: TokenSource | None) -> str | None:
    # .value, not the member: psycopg would send an Enum member's *name*
    return None if source is None else source.value


def _record_values(workload_result_id: int, record: RequestRecord) -> dict[str, Any]:
    return {
        "workload_result_id": workload_result_id,
        "idx": record.index,
        "start_s": record.start_s,
        "ttft_s": record.ttft_s,
        "e2el_s": record.e2el_s,
        "itl_s": list(record.itl_s),
        "output_tokens": record.output_tokens,
        "output_tokens_source": _source_value(record.output_tokens_source),
        "input_tokens": record.input_tokens,
        "input_tokens_source": _source_value(record.input_tokens_source),
        "error_class": record.error_class,
        "error": record.error,
        "scheduled_start_s": record.scheduled_start_s,
        "output_chunks": record.output_chunks,
        "requested_input_tokens": record.requested_input_tokens,
        "session": record.session,
        "turn": record.turn,
        "cached_input_tokens": record.cached_input_tokens,
    }


def finish_run(
    session: Session, run_id: int, status: RunStatus, ended_at: datetime, reason: str | None
) -> None:
    """Record how and when a run ended (``reason`` says why it is partial or failed). An ended
    run has no owner and no lease (``tracker.store.leases``)."""
    run = session.get(RunModel, run_id)
    if run is None:
        raise _run_not_found(run_id)
    run.status = status.value
    run.ended_at = ended_at
    run.status_reason = reason
    run.owner_pid = None
    run.lease_until = None
    session.flush()


def _run_not_found(run_id: int) -> NotFoundError:
    return NotFoundError(f"run {run_id} not found; list runs with `tracker runs`")


# --- fetching runs -------------------------------------------------------------------------


def fetch_run(session: Session, run_id: int) -> RunResult:
    """The stored run with every workload, summary and request record."""
    if not INT64_MIN <= run_id <= INT64_MAX:  # no row has it; the driver could not even ask
        raise _run_not_found(run_id)
    found = session.execute(
        select(RunModel, ConfigVersionModel, SuiteModel)
        .join(ConfigVersionModel, RunModel.config_version_id == ConfigVersionModel.id)
        .join(SuiteModel, RunModel.suite_id == SuiteModel.id)
        .where(RunModel.id == run_id)
    ).one_or_none()
    if found is None:
        raise _run_not_found(run_id)
    run, config, suite = found
    return RunResult(
        run_id=run.id,
        status=RunStatus(run.status),
        simulated=run.simulated,
        config=VersionRef(config.name, config.version),
        suite=VersionRef(suite.name, suite.version),
        started_at=run.started_at,
        ended_at=run.ended_at,
        host=run.host,
        tracker_version=run.tracker_version,
        environment=run.environment,
        workloads=_fetch_workloads(session, run.id),
        status_reason=run.status_reason,
        config_body=config.canonical,
        quality=fetch_quality(session, run.id),
    )


def fetch_run_warnings(session: Session, run_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
    """Each run's measurement warnings (``compute_run_warnings``), without its workloads. A run
    without any is left out."""
    rows = session.execute(select(RunModel.id, RunModel.environment)
                           .where(RunModel.id.in_(list(run_ids)))).all()
    found = {run_id: compute_run_warnings(environment) for run_id, environment in rows}
    return {run_id: warnings for run_id, warnings in found.items() if warnings}


def _fetch_workloads(session: Session, run_id: int) -> tuple[WorkloadResult, ...]:
    rows = session.scalars(
        select(WorkloadResultModel)
        .where(WorkloadResultModel.run_id == run_id)
        .order_by(WorkloadResultModel.position, WorkloadResultModel.id)
    ).all()
    ids = [row.id for row in rows]
    metrics = _fetch_metrics(session, ids)
    records = _fetch_records(session, ids)
    telemetry = fetch_workload_telemetry(session, ids)
    loadgen = fetch_workload_loadgen(session, ids)
    return tuple(replace(_workload(row, metrics[row.id], records[row.id], loadgen.get(row.id)),
                         **_telemetry_fields(telemetry.get(row.id)))
                 for row in rows)


def _telemetry_fields(found: tuple[Any, Any] | None) -> dict[str, Any]:
    return {} if found is None else {"gpu": found[0], "server": found[1]}


def _fetch_metrics(session: Session, ids: Sequence[int]) -> dict[int, dict[str, float]]:
    metrics: dict[int, dict[str, float]] = defaultdict(dict)
    rows = session.execute(
        select(WorkloadMetricModel.workload_result_id, WorkloadMetricModel.metric,
               WorkloadMetricModel.value)
        .where(WorkloadMetricModel.workload_result_id.in_(ids))
    )
    for workload_id, name, value in rows:
        metrics[workload_id][name] = value
    return metrics


def _fetch_records(session: Session, ids: Sequence[int]) -> dict[int, list[RequestRecord]]:
    columns = RequestRecordModel.__table__.c
    records: dict[int, list[RequestRecord]] = defaultdict(list)
    rows = session.execute(
        select(*columns)
        .where(columns.workload_result_id.in_(ids))
        .order_by(columns.workload_result_id, columns.idx)
    )
    for row in rows:
        records[row.workload_result_id].append(_record(row))
    return records


def _record(row: Row[*tuple[Any, ...]]) -> RequestRecord:
    return RequestRecord(
        index=row.idx,
        start_s=row.start_s,
        ttft_s=row.ttft_s,
        e2el_s=row.e2el_s,
        itl_s=tuple(row.itl_s),
        output_tokens=row.output_tokens,
        output_tokens_source=_source(row.output_tokens_source),
        input_tokens=row.input_tokens,
        input_tokens_source=_source(row.input_tokens_source),
        error_class=row.error_class,
        error=row.error,
        scheduled_start_s=row.scheduled_start_s,
        output_chunks=row.output_chunks,
        requested_input_tokens=row.requested_input_tokens,
        session=row.session,
        turn=row.turn,
        cached_input_tokens=row.cached_input_tokens,
    )


def _source(value: str | None) -> TokenSource | None:
    return None if value is None else TokenSource(value)


def _workload(
    row: WorkloadResultModel, metrics: Mapping[str, float], records: Sequence[RequestRecord],
    loadgen: WorkloadLoadgenModel | None = None,
) -> WorkloadResult:
    return WorkloadResult(
        name=row.name,
        concurrency=row.concurrency,
        num_requests=row.num_requests,
        warmup_requests=row.warmup_requests,
        params=row.params,
        started_at=row.started_at,
        ended_at=row.ended_at,
        records=tuple(records),
        summary=complete_summary(_summary(row, metrics), metrics, loadgen, row.client_bound,
                                 row.client_bound_reason),
        complete=row.complete,
    )


def _summary(row: WorkloadResultModel, metrics: Mapping[str, float]) -> WorkloadSummary:
    stats = {key: _stats(key, getattr(row, f"{key}_count"), metrics) for key in LATENCY_KEYS}
    return WorkloadSummary(
        completed=row.completed,
        failed=row.failed,
        duration_s=row.duration_s,
        total_input_tokens=row.total_input_tokens,
        total_output_tokens=row.total_output_tokens,
        request_throughput_per_s=metrics.get("request_throughput_per_s"),
        output_throughput_tokens_per_s=metrics.get("output_throughput_tokens_per_s"),
        total_token_throughput_tokens_per_s=metrics.get("total_token_throughput_tokens_per_s"),
        ttft=stats["ttft"],
        tpot=stats["tpot"],
        itl=stats["itl"],
        e2el=stats["e2el"],
        output_tokens_source=_source(row.output_tokens_source),
        input_tokens_source=_source(row.input_tokens_source),
        errors=row.errors,
        input_token_count_mismatches=row.input_token_count_mismatches,
    )


def _stats(key: str, count: int | None, metrics: Mapping[str, float]) -> LatencyStats | None:
    """Rebuild a latency's statistics from its metric rows, or None when it was not measured."""
    names = [f"{key}_{stat}_s" for stat in ("mean", "median", "std", "p90", "p99")]
    if count is None or any(name not in metrics for name in names):
        return None
    mean_s, median_s, std_s, p90_s, p99_s = (metrics[name] for name in names)
    return LatencyStats(count, mean_s, median_s, std_s, p90_s, p99_s)


def fetch_runs(session: Session, limit: int = 20) -> list[RunListing]:
    """The ``limit`` most recently started runs, newest first."""
    workloads = WorkloadResultModel
    totals = (
        select(workloads.run_id, func.count().label("workloads"),
               func.sum(workloads.completed).label("completed"),
               func.sum(workloads.failed).label("failed"))
        .group_by(workloads.run_id)
        .subquery()
    )
    rows = session.execute(
        select(RunModel.id, RunModel.status, RunModel.simulated, ConfigVersionModel.name,
               ConfigVersionModel.version, SuiteModel.name, RunModel.started_at,
               RunModel.ended_at, totals.c.workloads, totals.c.completed, totals.c.failed,
               RunModel.source)
        .join(ConfigVersionModel, RunModel.config_version_id == ConfigVersionModel.id)
        .join(SuiteModel, RunModel.suite_id == SuiteModel.id)
        .outerjoin(totals, totals.c.run_id == RunModel.id)
        .order_by(RunModel.started_at.desc(), RunModel.id.desc())
        .limit(limit)
    )
    return [_listing(row) for row in rows]


def _listing(row: Sequence[Any]) -> RunListing:
    (run_id, status, simulated, config_name, config_version, suite_name, started_at, ended_at,
     workloads, completed, failed, source) = row
    return RunListing(
        run_id=run_id,
        status=RunStatus(status),
        simulated=simulated,
        config_name=config_name,
        config_version=config_version,
        suite_name=suite_name,
        started_at=started_at,
        ended_at=ended_at,
        workloads=int(workloads or 0),
        completed=int(completed or 0),
        failed=int(failed or 0),
        source=str(source),
    )
