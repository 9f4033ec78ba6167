"""Bisections of a gate's regression over the config diff's fields (issue 17).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

Written by hand from the models in tracker/store/models_bisections.py. Revisions never import
the tracker.

- ``bisections``: one per bisection: the base's config name, the suite, the two config
  versions, the workload and metric bisected (NULL when the gate did not regress), the outcome,
  the culprits and the probes (JSON: fields applied, outcome, why).
- ``bisection_runs``: every run a bisection made, with its role: the gate's ``base`` and
  ``head`` runs (``probe`` NULL), and per probe its base ``control`` runs and ``probe`` runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OUTCOMES = "outcome IN ('no_regression', 'not_measured', 'found', 'narrowed')"
ROLES = "role IN ('base', 'head', 'control', 'probe')"


def upgrade() -> None:
    op.create_table(
        "bisections",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("config_name", sa.String(length=200), nullable=False),
        sa.Column("suite_name", sa.String(length=200), nullable=False),
        sa.Column("base_version", sa.String(length=64), nullable=False),
        sa.Column("head_version", sa.String(length=64), nullable=False),
        sa.Column("workload", sa.String(length=200), nullable=True),
        sa.Column("metric", sa.String(length=64), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("stop_reason", sa.Text(), nullable=False),
        sa.Column("culprits", sa.JSON(), nullable=False),
        sa.Column("probes", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(OUTCOMES, name=op.f("ck_bisections_outcome")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bisections")),
    )
    op.create_index("ix_bisections_config_name", "bisections", ["config_name"], unique=False)
    op.create_table(
        "bisection_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("bisection_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("probe", sa.Integer(), nullable=True),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.CheckConstraint(ROLES, name=op.f("ck_bisection_runs_role")),
        sa.ForeignKeyConstraint(["bisection_id"], ["bisections.id"], ondelete="CASCADE",
                                name=op.f("fk_bisection_runs_bisection_id_bisections")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE",
                                name=op.f("fk_bisection_runs_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bisection_runs")),
    )
    op.create_index("ix_bisection_runs_bisection_id", "bisection_runs", ["bisection_id"],
                    unique=False)
    op.create_index("ix_bisection_runs_run_id", "bisection_runs", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_bisection_runs_run_id", table_name="bisection_runs")
    op.drop_index("ix_bisection_runs_bisection_id", table_name="bisection_runs")
    op.drop_table("bisection_runs")
    op.drop_index("ix_bisections_config_name", table_name="bisections")
    op.drop_table("bisections")
