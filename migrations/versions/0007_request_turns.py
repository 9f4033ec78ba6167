"""Multi-turn sessions and requested input lengths on request records (issue 14).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

Written by hand from the models in tracker/store/models.py (checked with ``alembic check`` on
SQLite and PostgreSQL). Revisions never import the tracker.

- ``request_records.requested_input_tokens``: the input length the suite asked for, beside the
  server's ``usage.prompt_tokens`` (``input_tokens``); NULL where nothing was asked (and for
  requests stored before this revision);
- ``request_records.session`` and ``turn``: a multi-turn request's conversation (0-based) and
  turn (1-based); NULL for single-turn requests;
- ``workload_results.input_token_count_mismatches``: successful requests whose server count
  differs from the requested length; NULL when no request had both.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("request_records") as batch:
        batch.add_column(sa.Column("requested_input_tokens", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("session", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("turn", sa.Integer(), nullable=True))
    with op.batch_alter_table("workload_results") as batch:
        batch.add_column(sa.Column("input_token_count_mismatches", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workload_results") as batch:
        batch.drop_column("input_token_count_mismatches")
    with op.batch_alter_table("request_records") as batch:
        batch.drop_column("turn")
        batch.drop_column("session")
        batch.drop_column("requested_input_tokens")
