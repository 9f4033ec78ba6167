"""Schema for regression records from change-point detection and the gate (issue 6).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29

Written by hand from the models in tracker/store/models_regressions.py (checked with ``alembic
check`` on SQLite and PostgreSQL). Revisions never import the tracker. A regression record is one
change point in one metric's series (config name, suite name, workload, metric); its run is the
first run of the new level (kept NULL if that run is deleted).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REGRESSION_STATUSES = "status IN ('open', 'acknowledged', 'fixed', 'expected')"


def upgrade() -> None:
    op.create_table(
        "regressions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("config_name", sa.String(length=200), nullable=False),
        sa.Column("suite_name", sa.String(length=200), nullable=False),
        sa.Column("workload", sa.String(length=200), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("location_index", sa.Integer(), nullable=False),
        sa.Column("before", sa.Double(), nullable=False),
        sa.Column("after", sa.Double(), nullable=False),
        sa.Column("rel_change", sa.Double(), nullable=True),
        sa.Column("regressed", sa.Boolean(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("attribution", sa.Text(), nullable=True),
        sa.Column("detected_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(REGRESSION_STATUSES, name=op.f("ck_regressions_status")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="SET NULL",
                                name=op.f("fk_regressions_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_regressions")),
    )
    op.create_index("ix_regressions_series", "regressions",
                    ["config_name", "suite_name", "workload", "metric"], unique=False)
    op.create_index("ix_regressions_status", "regressions", ["status"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_regressions_status", table_name="regressions")
    op.drop_index("ix_regressions_series", table_name="regressions")
    op.drop_table("regressions")
