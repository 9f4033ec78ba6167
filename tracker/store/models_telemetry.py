"""Telemetry tables: what the GPUs and the server reported while a workload ran.

- ``workload_telemetry`` says, per workload, whether GPU and server telemetry were measured and
  why not.
- ``gpu_summaries`` holds, per workload and GPU, peaks and means of its samples, and its energy.
- ``gpu_samples`` is the timeline, one row per GPU per sample (read back with the run as each
  workload's ``gpu.samples`` from ``tracker.store.runs.fetch_run``).
- ``server_metrics`` holds, per workload, the scraped summary (``kv_cache_usage_peak``,
  ``num_preemptions``, ``prefix_cache_hit_rate``, …), one row per metric.
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Boolean, Double, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from tracker.store.models import Base

_WORKLOAD_FK = "workload_results.id"


class WorkloadTelemetryModel(Base):
    __tablename__ = "workload_telemetry"

    workload_result_id: Mapped[int] = mapped_column(
        ForeignKey(_WORKLOAD_FK, ondelete="CASCADE"), primary_key=True)
    gpu_measured: Mapped[bool] = mapped_column(Boolean)
    gpu_reason: Mapped[str | None] = mapped_column(Text)
    gpu_sample_hz: Mapped[float | None] = mapped_column(Double)
    server_measured: Mapped[bool] = mapped_column(Boolean)
    server_reason: Mapped[str | None] = mapped_column(Text)
    server_scrapes: Mapped[int] = mapped_column(Integer)
    gpu_duration_s: Mapped[float | None] = mapped_column(Double)  # the span the energy covers
    energy_note: Mapped[str | None] = mapped_column(Text)


class GpuSummaryModel(Base):
    __tablename__ = "gpu_summaries"

    workload_result_id: Mapped[int] = mapped_column(
        ForeignKey(_WORKLOAD_FK, ondelete="CASCADE"), primary_key=True)
    gpu_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str | None] = mapped_column(String(200))
    memory_total_bytes: Mapped[int | None] = mapped_column(BigInteger)
    samples: Mapped[int] = mapped_column(Integer)
    memory_used_peak_bytes: Mapped[int | None] = mapped_column(BigInteger)
    memory_used_mean_bytes: Mapped[float | None] = mapped_column(Double)
    gpu_util_mean_pct: Mapped[float | None] = mapped_column(Double)
    gpu_util_peak_pct: Mapped[float | None] = mapped_column(Double)
    power_mean_w: Mapped[float | None] = mapped_column(Double)
    power_peak_w: Mapped[float | None] = mapped_column(Double)
    sm_clock_mean_mhz: Mapped[float | None] = mapped_column(Double)
    temperature_peak_c: Mapped[float | None] = mapped_column(Double)
    throttle_reasons: Mapped[list[str]] = mapped_column(JSON)
    energy_j: Mapped[float | None] = mapped_column(Double)
    energy_source: Mapped[str | None] = mapped_column(String(20))


class GpuSampleModel(Base):
    __tablename__ = "gpu_samples"
    __table_args__ = (Index("ix_gpu_samples_workload_result_id", "workload_result_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_result_id: Mapped[int] = mapped_column(ForeignKey(_WORKLOAD_FK, ondelete="CASCADE"))
    gpu_index: Mapped[int] = mapped_column(Integer)
    t_s: Mapped[float] = mapped_column(Double)
    memory_used_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_util_pct: Mapped[float | None] = mapped_column(Double)
    memory_util_pct: Mapped[float | None] = mapped_column(Double)
    power_w: Mapped[float | None] = mapped_column(Double)
    sm_clock_mhz: Mapped[float | None] = mapped_column(Double)
    temperature_c: Mapped[float | None] = mapped_column(Double)
    throttle_reasons: Mapped[int | None] = mapped_column(BigInteger)


class ServerMetricModel(Base):
    __tablename__ = "server_metrics"

    workload_result_id: Mapped[int] = mapped_column(
        ForeignKey(_WORKLOAD_FK, ondelete="CASCADE"), primary_key=True)
    metric: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[float] = mapped_column(Double)
