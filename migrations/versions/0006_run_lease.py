"""Who owns a running run, and who triaged a regression (issue 12).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

Written by hand from the models in tracker/store/models.py and models_analysis.py (checked with
``alembic check`` on SQLite and PostgreSQL). Revisions never import the tracker.

- ``runs.owner_pid`` and ``runs.lease_until``: the process that runs a ``running`` run (its host
  is ``runs.host``) and until when its last heartbeat vouches for it. A later command that finds
  a running run whose owner is gone (a dead PID on this host, or a lease long expired) marks it
  partial, keeping what was measured.
- ``regressions.updated_by``: who made the last triage change (the dashboard's signed-in user,
  the reverse proxy's user, or the local user), NULL for changes made before this revision.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("owner_pid", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("regressions") as batch:
        batch.add_column(sa.Column("updated_by", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("regressions") as batch:
        batch.drop_column("updated_by")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("lease_until")
        batch.drop_column("owner_pid")
