"""Regression records carry the interval of their change, and improvements a status of their own.

Revision ID: 0014_regression_size
Revises: 0013
Create Date: 2026-12-02

Written by hand from the model in tracker/store/models_regressions.py. Revisions never import the
tracker.

- ``regressions.rel_change_low`` / ``rel_change_high``: the interval of ``rel_change`` (each end
  a one-sided 95 % bound of the t-test over runs); NULL for records stored before this revision.
- ``regressions.status`` also ``improvement``: a change in the metric's good way is recorded, not
  left open, so ``open`` means a regression someone should look at. Records still ``open`` whose
  change went the good way (``regressed`` false) become ``improvement``; the downgrade makes
  every ``improvement`` ``open`` again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_regression_size"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATUSES = "status IN ('open', 'acknowledged', 'fixed', 'expected')"
NEW_STATUSES = "status IN ('open', 'acknowledged', 'fixed', 'expected', 'improvement')"


def _statuses(check: str) -> None:
    with op.batch_alter_table("regressions") as batch:
        batch.drop_constraint(op.f("ck_regressions_status"), type_="check")
        batch.create_check_constraint(op.f("ck_regressions_status"), check)


def upgrade() -> None:
    with op.batch_alter_table("regressions") as batch:
        batch.add_column(sa.Column("rel_change_low", sa.Double(), nullable=True))
        batch.add_column(sa.Column("rel_change_high", sa.Double(), nullable=True))
    _statuses(NEW_STATUSES)
    op.execute("UPDATE regressions SET status = 'improvement' "
               "WHERE status = 'open' AND regressed = false")


def downgrade() -> None:
    op.execute("UPDATE regressions SET status = 'open' WHERE status = 'improvement'")
    _statuses(OLD_STATUSES)
    with op.batch_alter_table("regressions") as batch:
        batch.drop_column("rel_change_high")
        batch.drop_column("rel_change_low")
