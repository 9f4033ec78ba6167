"""The initial schema: config versions, suites, runs, workload results, metrics, request records.

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Written by hand from the models in tracker/store/models.py (checked with ``alembic check`` on
SQLite and PostgreSQL). Revisions never import the tracker: they must keep meaning what they
meant when they were written. Timestamps are ``DateTime(timezone=True)`` (timestamptz on
PostgreSQL; on SQLite the tracker stores UTC and reads it back as UTC). ``Double`` is double
precision on PostgreSQL and REAL (8 bytes) on SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN_STATUSES = "status IN ('running', 'completed', 'partial', 'failed')"


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _versioned(table: str, *extra: sa.Column[str]) -> None:
    """config_versions and suites: every (name, version) seen, stored once."""
    op.create_table(
        table,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("canonical", sa.JSON(), nullable=False),
        *extra,
        sa.Column("source_path", sa.Text(), nullable=False),
        _timestamp("first_seen_at"),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}")),
        sa.UniqueConstraint("name", "version", name=op.f(f"uq_{table}_name_version")),
    )


def _create_runs() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("config_version_id", sa.Integer(), nullable=False),
        sa.Column("suite_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("status_reason", sa.Text(), nullable=True),
        _timestamp("started_at"),
        _timestamp("ended_at", nullable=True),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("tracker_version", sa.String(length=64), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("environment", sa.JSON(), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.CheckConstraint(RUN_STATUSES, name=op.f("ck_runs_status")),
        sa.ForeignKeyConstraint(["config_version_id"], ["config_versions.id"],
                                name=op.f("fk_runs_config_version_id_config_versions")),
        sa.ForeignKeyConstraint(["suite_id"], ["suites.id"], name=op.f("fk_runs_suite_id_suites")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index("ix_runs_config_suite_started", "runs",
                    ["config_version_id", "suite_id", "started_at"], unique=False)
    op.create_index("ix_runs_started_at", "runs", ["started_at"], unique=False)


def _create_workload_results() -> None:
    op.create_table(
        "workload_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("num_requests", sa.Integer(), nullable=False),
        sa.Column("warmup_requests", sa.Integer(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        _timestamp("started_at"),
        _timestamp("ended_at"),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("completed", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Double(), nullable=False),
        sa.Column("total_input_tokens", sa.Integer(), nullable=False),
        sa.Column("total_output_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens_source", sa.String(length=16), nullable=True),
        sa.Column("input_tokens_source", sa.String(length=16), nullable=True),
        sa.Column("errors", sa.JSON(), nullable=False),
        # samples behind each latency's statistics (LatencyStats.count); NULL = not measured
        sa.Column("ttft_count", sa.Integer(), nullable=True),
        sa.Column("tpot_count", sa.Integer(), nullable=True),
        sa.Column("itl_count", sa.Integer(), nullable=True),
        sa.Column("e2el_count", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE",
                                name=op.f("fk_workload_results_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workload_results")),
        sa.UniqueConstraint("run_id", "name", name=op.f("uq_workload_results_run_id_name")),
    )


def _create_workload_metrics() -> None:
    op.create_table(
        "workload_metrics",
        sa.Column("workload_result_id", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["workload_result_id"], ["workload_results.id"], ondelete="CASCADE",
            name=op.f("fk_workload_metrics_workload_result_id_workload_results"),
        ),
        sa.PrimaryKeyConstraint("workload_result_id", "metric", name=op.f("pk_workload_metrics")),
    )


def _create_request_records() -> None:
    op.create_table(
        "request_records",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workload_result_id", sa.Integer(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("start_s", sa.Double(), nullable=False),
        sa.Column("ttft_s", sa.Double(), nullable=True),
        sa.Column("e2el_s", sa.Double(), nullable=True),
        sa.Column("itl_s", sa.JSON(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens_source", sa.String(length=16), nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("input_tokens_source", sa.String(length=16), nullable=True),
        sa.Column("error_class", sa.String(length=200), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["workload_result_id"], ["workload_results.id"], ondelete="CASCADE",
            name=op.f("fk_request_records_workload_result_id_workload_results"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_request_records")),
    )
    op.create_index("ix_request_records_workload_result_id", "request_records",
                    ["workload_result_id"], unique=False)


def upgrade() -> None:
    _versioned("config_versions")
    _versioned("suites", sa.Column("prompts_digest", sa.String(length=64), nullable=False))
    _create_runs()
    _create_workload_results()
    _create_workload_metrics()
    _create_request_records()


def downgrade() -> None:
    op.drop_index("ix_request_records_workload_result_id", table_name="request_records")
    op.drop_table("request_records")
    op.drop_table("workload_metrics")
    op.drop_table("workload_results")
    op.drop_index("ix_runs_started_at", table_name="runs")
    op.drop_index("ix_runs_config_suite_started", table_name="runs")
    op.drop_table("runs")
    op.drop_table("suites")
    op.drop_table("config_versions")
