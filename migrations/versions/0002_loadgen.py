"""Schema for the load generator's open-loop timing, client health and capacity (issue 3).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29

Written by hand from the models in tracker/store/ (checked with ``alembic check`` on SQLite and
PostgreSQL). Revisions never import the tracker.

- ``workload_results.client_bound`` / ``client_bound_reason``: the client set the pace;
  existing rows were measured before the check existed and read as not client-bound;
- ``request_records.scheduled_start_s`` (open loop: the planned start) and ``output_chunks``
  (content chunks received, to track the mismatch with the server's token count);
- ``workload_loadgen``: the client-health measurements and the scheduled-latency sample counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("workload_results", sa.Column("client_bound", sa.Boolean(), nullable=False,
                                                server_default=sa.false()))
    op.add_column("workload_results", sa.Column("client_bound_reason", sa.Text(), nullable=True))
    op.add_column("request_records", sa.Column("scheduled_start_s", sa.Double(), nullable=True))
    op.add_column("request_records", sa.Column("output_chunks", sa.Integer(), nullable=True))
    op.create_table(
        "workload_loadgen",
        sa.Column("workload_result_id", sa.Integer(), nullable=False),
        sa.Column("cpu_fraction", sa.Double(), nullable=True),
        sa.Column("loop_lag_p99_s", sa.Double(), nullable=True),
        sa.Column("loop_lag_max_s", sa.Double(), nullable=True),
        sa.Column("send_lag_p50_s", sa.Double(), nullable=True),
        sa.Column("send_lag_p99_s", sa.Double(), nullable=True),
        sa.Column("send_lag_max_s", sa.Double(), nullable=True),
        sa.Column("scheduled_ttft_count", sa.Integer(), nullable=True),
        sa.Column("scheduled_e2el_count", sa.Integer(), nullable=True),
        sa.Column("token_count_mismatches", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["workload_result_id"], ["workload_results.id"],
                                ondelete="CASCADE",
                                name=op.f("fk_workload_loadgen_workload_result_id_workload_results")),
        sa.PrimaryKeyConstraint("workload_result_id", name=op.f("pk_workload_loadgen")),
    )


def downgrade() -> None:
    op.drop_table("workload_loadgen")
    with op.batch_alter_table("request_records") as batch:
        batch.drop_column("output_chunks")
        batch.drop_column("scheduled_start_s")
    with op.batch_alter_table("workload_results") as batch:
        batch.drop_column("client_bound_reason")
        batch.drop_column("client_bound")
