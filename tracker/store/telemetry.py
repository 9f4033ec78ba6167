"""Save and fetch a workload's telemetry: its GPU samples and summaries and its server counters.

Every function takes a Session, and the caller owns the transaction. Rows stay in here: callers
get ``tracker.results`` values.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from tracker.results import GpuDeviceSummary, GpuSample, GpuTelemetry, ServerTelemetry, WorkloadResult
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
