"""Schema for GPU and server telemetry, environment fingerprint and quality results (issue 5).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29

Written by hand from the models in tracker/store/models_telemetry.py (checked with ``alembic
check`` on SQLite and PostgreSQL). Revisions never import the tracker. The environment
fingerprint lives in the existing ``runs.environment`` JSON. Memory sizes are BIGINT: one GPU
holds more than 2**31 bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _workload_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["workload_result_id"], ["workload_results.id"], ondelete="CASCADE",
        name=op.f(f"fk_{table}_workload_result_id_workload_results"),
    )


def _run_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE",
                                   name=op.f(f"fk_{table}_run_id_runs"))


def _create_workload_telemetry() -> None:
    op.create_table(
        "workload_telemetry",
        sa.Column("workload_result_id", sa.Integer(), nullable=False),
        sa.Column("gpu_measured", sa.Boolean(), nullable=False),
        sa.Column("gpu_reason", sa.Text(), nullable=True),
        sa.Column("gpu_sample_hz", sa.Double(), nullable=True),
        sa.Column("server_measured", sa.Boolean(), nullable=False),
        sa.Column("server_reason", sa.Text(), nullable=True),
        sa.Column("server_scrapes", sa.Integer(), nullable=False),
        _workload_fk("workload_telemetry"),
        sa.PrimaryKeyConstraint("workload_result_id", name=op.f("pk_workload_telemetry")),
    )


def _create_gpu_summaries() -> None:
    op.create_table(
        "gpu_summaries",
        sa.Column("workload_result_id", sa.Integer(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("memory_total_bytes", sa.BigInteger(), nullable=True),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("memory_used_peak_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_used_mean_bytes", sa.Double(), nullable=True),
        sa.Column("gpu_util_mean_pct", sa.Double(), nullable=True),
        sa.Column("gpu_util_peak_pct", sa.Double(), nullable=True),
        sa.Column("power_mean_w", sa.Double(), nullable=True),
        sa.Column("power_peak_w", sa.Double(), nullable=True),
        sa.Column("sm_clock_mean_mhz", sa.Double(), nullable=True),
        sa.Column("temperature_peak_c", sa.Double(), nullable=True),
        sa.Column("throttle_reasons", sa.JSON(), nullable=False),
        _workload_fk("gpu_summaries"),
        sa.PrimaryKeyConstraint("workload_result_id", "gpu_index", name=op.f("pk_gpu_summaries")),
    )


def _create_gpu_samples() -> None:
    op.create_table(
        "gpu_samples",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workload_result_id", sa.Integer(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=False),
        sa.Column("t_s", sa.Double(), nullable=False),
        sa.Column("memory_used_bytes", sa.BigInteger(), nullable=True),
        sa.Column("gpu_util_pct", sa.Double(), nullable=True),
        sa.Column("memory_util_pct", sa.Double(), nullable=True),
        sa.Column("power_w", sa.Double(), nullable=True),
        sa.Column("sm_clock_mhz", sa.Double(), nullable=True),
        sa.Column("temperature_c", sa.Double(), nullable=True),
        sa.Column("throttle_reasons", sa.BigInteger(), nullable=True),
        _workload_fk("gpu_samples"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_samples")),
    )
    op.create_index("ix_gpu_samples_workload_result_id", "gpu_samples", ["workload_result_id"],
                    unique=False)


def _create_server_metrics() -> None:
    op.create_table(
        "server_metrics",
        sa.Column("workload_result_id", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        _workload_fk("server_metrics"),
        sa.PrimaryKeyConstraint("workload_result_id", "metric", name=op.f("pk_server_metrics")),
    )


def _create_quality_tables() -> None:
    op.create_table(
        "quality_summaries",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("set_name", sa.String(length=200), nullable=False),
        sa.Column("set_version", sa.String(length=64), nullable=False),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("answered", sa.Integer(), nullable=False),
        sa.Column("correct", sa.Integer(), nullable=False),
        sa.Column("accuracy", sa.Double(), nullable=True),
        sa.Column("accuracy_ci_low", sa.Double(), nullable=True),
        sa.Column("accuracy_ci_high", sa.Double(), nullable=True),
        sa.Column("drift", sa.Double(), nullable=True),
        sa.Column("drift_baseline_run_id", sa.Integer(), nullable=True),
        sa.Column("drift_compared", sa.Integer(), nullable=False),
        _run_fk("quality_summaries"),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_quality_summaries")),
    )
    op.create_table(
        "quality_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.String(length=200), nullable=False),
        sa.Column("scorer", sa.String(length=16), nullable=False),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("score", sa.Double(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("changed", sa.Boolean(), nullable=True),
        _run_fk("quality_items"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quality_items")),
        sa.UniqueConstraint("run_id", "item_id", name=op.f("uq_quality_items_run_id_item_id")),
    )


def upgrade() -> None:
    _create_workload_telemetry()
    _create_gpu_summaries()
    _create_gpu_samples()
    _create_server_metrics()
    _create_quality_tables()


def downgrade() -> None:
    op.drop_table("quality_items")
    op.drop_table("quality_summaries")
    op.drop_table("server_metrics")
    op.drop_index("ix_gpu_samples_workload_result_id", table_name="gpu_samples")
    op.drop_table("gpu_samples")
    op.drop_table("gpu_summaries")
    op.drop_table("workload_telemetry")
