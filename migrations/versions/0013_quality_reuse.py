"""Quality asked once per config version and suite per night: which run's answers a run reuses.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01

Written by hand from the model in tracker/store/models_quality.py. Revisions never import the
tracker.

- ``quality_summaries.reused_from_run_id``: the run whose answers this run's quality copies
  (the first run of the same config version and suite that night that asked the same items);
  NULL when the run asked the set itself. No foreign key, like ``drift_baseline_run_id``: the
  copied answers stay when that run is deleted.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("quality_summaries") as batch:
        batch.add_column(sa.Column("reused_from_run_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("quality_summaries") as batch:
        batch.drop_column("reused_from_run_id")
