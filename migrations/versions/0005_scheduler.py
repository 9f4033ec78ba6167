"""Schema for schedules, the run queue, workers and alerts (issue 7).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29

Written by hand from the models in tracker/store/models_scheduling.py (checked with ``alembic
check`` on SQLite and PostgreSQL). Revisions never import the tracker. APScheduler keeps its own
``apscheduler_jobs`` table, created by APScheduler and not part of this schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REQUEST_STATUSES = "status IN ('queued', 'running', 'done', 'failed')"
DELIVERY_STATUSES = "status IN ('sent', 'failed')"


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _create_schedules() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("cron", sa.String(length=200), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("configs", sa.JSON(), nullable=False),
        sa.Column("suites", sa.JSON(), nullable=False),
        sa.Column("repeats", sa.Integer(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        _timestamp("updated_at"),
        _timestamp("last_fired_at", nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
        sa.UniqueConstraint("name", name=op.f("uq_schedules_name")),
    )


def _create_run_requests() -> None:
    op.create_table(
        "run_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("schedule_name", sa.String(length=200), nullable=True),
        _timestamp("slot_at", nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("config_name", sa.String(length=200), nullable=False),
        sa.Column("config_path", sa.Text(), nullable=False),
        sa.Column("config_body", sa.JSON(), nullable=False),
        sa.Column("suite_name", sa.String(length=200), nullable=False),
        sa.Column("suite_path", sa.Text(), nullable=False),
        sa.Column("suite_body", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=255), nullable=True),
        sa.Column("gpus", sa.String(length=200), nullable=True),
        _timestamp("enqueued_at"),
        _timestamp("claimed_at", nullable=True),
        _timestamp("heartbeat_at", nullable=True),
        _timestamp("finished_at", nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(REQUEST_STATUSES, name=op.f("ck_run_requests_status")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="SET NULL",
                                name=op.f("fk_run_requests_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_requests")),
        sa.UniqueConstraint("schedule_name", "slot_at", "position",
                            name=op.f("uq_run_requests_schedule_name_slot_at_position")),
    )
    op.create_index("ix_run_requests_status_id", "run_requests", ["status", "id"], unique=False)


def _create_alert_deliveries() -> None:
    op.create_table(
        "alert_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("destination", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        _timestamp("created_at"),
        sa.CheckConstraint(DELIVERY_STATUSES, name=op.f("ck_alert_deliveries_status")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE",
                                name=op.f("fk_alert_deliveries_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_deliveries")),
    )


def upgrade() -> None:
    _create_schedules()
    _create_run_requests()
    _create_alert_deliveries()


def downgrade() -> None:
    op.drop_table("alert_deliveries")
    op.drop_index("ix_run_requests_status_id", table_name="run_requests")
    op.drop_table("run_requests")
    op.drop_table("schedules")
