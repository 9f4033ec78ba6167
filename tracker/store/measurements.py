"""Save and fetch telemetry and quality. Every function takes a Session, and the caller owns the
transaction. Rows stay in here: callers get ``tracker.results`` values.

The drift of a run's answers is computed when its quality is saved, against the baseline run:
the one given, or else the latest earlier *completed* run of the same suite name and config name
that answered the same quality set. ``find_quality_to_reuse`` finds the run of the night whose
answers a run copies instead of asking again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, timedelta
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from tracker.errors import NotFoundError
from tracker.quality.accuracy import compute_drift
from tracker.results import (
    GpuDeviceSummary,
    GpuSample,
    GpuTelemetry,
    QualityItemResult,
    QualityResult,
    RunStatus,
    ServerTelemetry,
    WorkloadResult,
)
from tracker.store.models import ConfigVersionModel, RunModel, SuiteModel
from tracker.store.models_quality import QualityItemModel, QualitySummaryModel
from tracker.store.models_telemetry import (
    GpuSampleModel,
    GpuSummaryModel,
    ServerMetricModel,
    WorkloadTelemetryModel,
)

_SAMPLE_FIELDS = ("gpu_index", "t_s", "memory_used_bytes", "gpu_util_pct", "memory_util_pct",
                  "power_w", "sm_clock_mhz", "temperature_c", "throttle_reasons")
_DEVICE_FIELDS = ("gpu_index", "name", "memory_total_bytes", "samples", "memory_used_peak_bytes",
                  "memory_used_mean_bytes", "gpu_util_mean_pct", "gpu_util_peak_pct",
                  "power_mean_w", "power_peak_w", "sm_clock_mean_mhz", "temperature_peak_c",
                  "energy_j", "energy_source")


# --- telemetry -------------------------------------------------------------------------------


def save_workload_telemetry(session: Session, workload_result_id: int,
                            result: WorkloadResult) -> None:
    """Store a workload's GPU and server telemetry, or nothing when telemetry was not run."""
    gpu, server = result.gpu, result.server
    if gpu is None and server is None:
        return
    session.add(WorkloadTelemetryModel(
        workload_result_id=workload_result_id,
        gpu_measured=bool(gpu and gpu.measured), gpu_reason=gpu.reason if gpu else None,
        gpu_sample_hz=gpu.sample_hz if gpu else None,
        server_measured=bool(server and server.measured),
        server_reason=server.reason if server else None,
        server_scrapes=server.scrapes if server else 0,
        gpu_duration_s=gpu.duration_s if gpu else None,
        energy_note=gpu.energy_note if gpu else None,
    ))
    if gpu is not None and gpu.devices:
        session.execute(insert(GpuSummaryModel), [
            {"workload_result_id": workload_result_id, "throttle_reasons": list(d.throttle_reasons),
             **{name: getattr(d, name) for name in _DEVICE_FIELDS}} for d in gpu.devices])
    if gpu is not None and gpu.samples:
        session.execute(insert(GpuSampleModel), [
            {"workload_result_id": workload_result_id,
             **{name: getattr(s, name) for name in _SAMPLE_FIELDS}} for s in gpu.samples])
    if server is not None and server.values:
        session.execute(insert(ServerMetricModel), [
            {"workload_result_id": workload_result_id, "metric": k, "value": v}
            for k, v in server.values.items()])
    session.flush()


def fetch_workload_telemetry(
    session: Session, ids: Sequence[int]
) -> dict[int, tuple[GpuTelemetry | None, ServerTelemetry | None]]:
    """workload result id -> (gpu, server) telemetry, for the ids that have any."""
    heads = session.scalars(select(WorkloadTelemetryModel)
                            .where(WorkloadTelemetryModel.workload_result_id.in_(ids))).all()
    devices: dict[int, list[GpuDeviceSummary]] = defaultdict(list)
    for row in session.scalars(select(GpuSummaryModel)
                               .where(GpuSummaryModel.workload_result_id.in_(ids))
                               .order_by(GpuSummaryModel.gpu_index)):
        devices[row.workload_result_id].append(GpuDeviceSummary(
            **{name: getattr(row, name) for name in _DEVICE_FIELDS},
            throttle_reasons=tuple(row.throttle_reasons)))
    samples = _fetch_samples(session, ids)
    values: dict[int, dict[str, float]] = defaultdict(dict)
    for wid, metric, value in session.execute(
            select(ServerMetricModel.workload_result_id, ServerMetricModel.metric,
                   ServerMetricModel.value).where(ServerMetricModel.workload_result_id.in_(ids))):
        values[wid][metric] = value
    out: dict[int, tuple[GpuTelemetry | None, ServerTelemetry | None]] = {}
    for head in heads:
        wid = head.workload_result_id
        gpu = GpuTelemetry(head.gpu_measured, head.gpu_reason, head.gpu_sample_hz,
                           tuple(devices[wid]), tuple(samples[wid]),
                           duration_s=head.gpu_duration_s, energy_note=head.energy_note)
        server = ServerTelemetry(head.server_measured, head.server_reason, head.server_scrapes,
                                 values[wid])
        out[wid] = (gpu, server)
    return out


def _fetch_samples(session: Session, ids: Sequence[int]) -> dict[int, list[GpuSample]]:
    columns = GpuSampleModel.__table__.c
    samples: dict[int, list[GpuSample]] = defaultdict(list)
    for row in session.execute(select(*columns).where(columns.workload_result_id.in_(ids))
                               .order_by(columns.workload_result_id, columns.t_s,
                                         columns.gpu_index)):
        samples[row.workload_result_id].append(
            GpuSample(**{name: getattr(row, name) for name in _SAMPLE_FIELDS}))
    return samples


# --- quality -------------------------------------------------------------------------------


def find_quality_baseline(session: Session, run_id: int, set_name: str) -> int | None:
    """The latest earlier completed run of the same suite and config names with this set."""
    run = session.get(RunModel, run_id)
    if run is None:
        raise NotFoundError(f"run {run_id} not found; list runs with `tracker runs`")
    config_name = session.scalar(select(ConfigVersionModel.name)
                                 .where(ConfigVersionModel.id == run.config_version_id))
    suite_name = session.scalar(select(SuiteModel.name).where(SuiteModel.id == run.suite_id))
    found = session.scalar(
        select(RunModel.id)
        .join(ConfigVersionModel, RunModel.config_version_id == ConfigVersionModel.id)
        .join(SuiteModel, RunModel.suite_id == SuiteModel.id)
        .join(QualitySummaryModel, QualitySummaryModel.run_id == RunModel.id)
        .where(ConfigVersionModel.name == config_name, SuiteModel.name == suite_name,
               RunModel.status == RunStatus.COMPLETED.value, RunModel.id != run_id,
               RunModel.started_at <= run.started_at, QualitySummaryModel.set_name == set_name)
        .order_by(RunModel.started_at.desc(), RunModel.id.desc())
        .limit(1)
    )
    return found


def fetch_quality_answers(session: Session, run_id: int) -> dict[str, str | None]:
    rows = session.execute(select(QualityItemModel.item_id, QualityItemModel.output)
                           .where(QualityItemModel.run_id == run_id))
    return {item_id: output for item_id, output in rows}


def find_quality_to_reuse(session: Session, run_id: int, set_version: str) -> int | None:
    """The run whose answers ``run_id`` may reuse: the first run of the same config version and
    suite version begun the same UTC day that asked these items itself (``set_version``) and got
    an answer to every one (a failed request is not copied into every later run of the night)."""
    run = session.get(RunModel, run_id)
    if run is None:
        raise NotFoundError(f"run {run_id} not found; list runs with `tracker runs`")
    day = run.started_at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return session.scalar(
        select(RunModel.id)
        .join(QualitySummaryModel, QualitySummaryModel.run_id == RunModel.id)
        .where(RunModel.config_version_id == run.config_version_id,
               RunModel.suite_id == run.suite_id, RunModel.id != run_id,
               RunModel.started_at >= day, RunModel.started_at < day + timedelta(days=1),
               QualitySummaryModel.set_version == set_version,
               QualitySummaryModel.reused_from_run_id.is_(None),
               QualitySummaryModel.answered == QualitySummaryModel.items)
        .order_by(RunModel.started_at, RunModel.id)
        .limit(1))


def save_quality(session: Session, run_id: int, result: QualityResult,
                 baseline_run_id: int | None = None) -> QualityResult:
    """Store a run's quality with its drift from the baseline run and return what was stored. A
    result reused from another run (``reused_from_run_id``) keeps that run's drift."""
    baseline = baseline_run_id or find_quality_baseline(session, run_id, result.set_name)
    if baseline is not None and result.reused_from_run_id is None:
        result = compute_drift(result, fetch_quality_answers(session, baseline), baseline)
    session.add(QualitySummaryModel(
        run_id=run_id, set_name=result.set_name, set_version=result.set_version,
        items=len(result.items), answered=result.answered, correct=result.correct,
        accuracy=result.accuracy, accuracy_ci_low=result.accuracy_ci_low,
        accuracy_ci_high=result.accuracy_ci_high, drift=result.drift,
        drift_baseline_run_id=result.drift_baseline_run_id,
        drift_compared=result.drift_compared, reused_from_run_id=result.reused_from_run_id))
    if result.items:
        session.execute(insert(QualityItemModel), [_item_values(run_id, i, item)
                                                   for i, item in enumerate(result.items)])
    session.flush()
    return result


def _item_values(run_id: int, position: int, item: QualityItemResult) -> dict[str, Any]:
    return {"run_id": run_id, "position": position, "item_id": item.item_id,
            "scorer": item.scorer, "output": item.output, "score": item.score,
            "error": item.error, "changed": item.changed}


def fetch_quality(session: Session, run_id: int) -> QualityResult | None:
    head = session.get(QualitySummaryModel, run_id)
    if head is None:
        return None
    rows = session.scalars(select(QualityItemModel).where(QualityItemModel.run_id == run_id)
                           .order_by(QualityItemModel.position))
    items = tuple(QualityItemResult(r.item_id, r.scorer, r.output, r.score, r.error, r.changed)
                  for r in rows)
    return QualityResult(
        set_name=head.set_name, set_version=head.set_version, items=items,
        answered=head.answered, correct=head.correct, accuracy=head.accuracy,
        accuracy_ci_low=head.accuracy_ci_low, accuracy_ci_high=head.accuracy_ci_high,
        drift=head.drift, drift_baseline_run_id=head.drift_baseline_run_id,
        drift_compared=head.drift_compared, reused_from_run_id=head.reused_from_run_id)

