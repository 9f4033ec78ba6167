"""The nightly bisection: a schedule option, a queued job kind, and bisections that did not end.

Revision ID: 0011_schedule_bisect
Revises: 0010
Create Date: 2026-12-01

Written by hand from the models in tracker/store/models_scheduling.py and models_bisections.py.
Revisions never import the tracker.

- ``schedules.bisect``: the schedule's ``bisect:`` option (JSON: ``enabled``, ``max_probes``,
  ``max_minutes``); NULL for schedules stored before this revision (off).
- ``run_requests.kind``: ``run`` (a config x suite run, every request before this revision) or
  ``bisect`` (a bisection between two stored config versions); ``job``: what a non-run job needs
  (JSON); ``job_key``: unique, so the same job is queued once; ``bisection_id``: the bisection a
  ``bisect`` request stored.
- ``bisections.outcome`` also ``failed`` (the bisection could not run: the reason is its
  ``stop_reason``) and ``interrupted`` (stopped by Ctrl-C: what it had probed is kept).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_schedule_bisect"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KINDS = "kind IN ('run', 'bisect')"
OLD_OUTCOMES = "outcome IN ('no_regression', 'not_measured', 'found', 'narrowed')"
NEW_OUTCOMES = ("outcome IN ('no_regression', 'not_measured', 'found', 'narrowed', 'failed', "
                "'interrupted')")


def _outcomes(check: str) -> None:
    with op.batch_alter_table("bisections") as batch:
        batch.drop_constraint(op.f("ck_bisections_outcome"), type_="check")
        batch.create_check_constraint(op.f("ck_bisections_outcome"), check)


def upgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.add_column(sa.Column("bisect", sa.JSON(), nullable=True))
    with op.batch_alter_table("run_requests") as batch:
        batch.add_column(sa.Column("kind", sa.String(length=16), nullable=False,
                                   server_default="run"))
        batch.add_column(sa.Column("job", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("job_key", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("bisection_id", sa.Integer(), nullable=True))
        batch.create_check_constraint(op.f("ck_run_requests_kind"), KINDS)
        batch.create_unique_constraint(op.f("uq_run_requests_job_key"), ["job_key"])
        batch.create_foreign_key(op.f("fk_run_requests_bisection_id_bisections"), "bisections",
                                 ["bisection_id"], ["id"], ondelete="SET NULL")
    _outcomes(NEW_OUTCOMES)


def downgrade() -> None:
    op.execute("DELETE FROM bisections WHERE outcome IN ('failed', 'interrupted')")
    _outcomes(OLD_OUTCOMES)
    op.execute("DELETE FROM run_requests WHERE kind <> 'run'")
    with op.batch_alter_table("run_requests") as batch:
        batch.drop_constraint(op.f("fk_run_requests_bisection_id_bisections"), type_="foreignkey")
        batch.drop_constraint(op.f("uq_run_requests_job_key"), type_="unique")
        batch.drop_constraint(op.f("ck_run_requests_kind"), type_="check")
        batch.drop_column("bisection_id")
        batch.drop_column("job_key")
        batch.drop_column("job")
        batch.drop_column("kind")
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("bisect")
