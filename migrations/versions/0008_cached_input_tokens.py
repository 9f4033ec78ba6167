"""Prefix-cache hits per request (issue 14).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

Written by hand from the models in tracker/store/models.py (checked with ``alembic check`` on
SQLite and PostgreSQL). Revisions never import the tracker.

- ``request_records.cached_input_tokens``: the prompt tokens the server says it served from its
  prefix cache (``usage.prompt_tokens_details.cached_tokens``); NULL where the server did not
  say (and for requests stored before this revision), never 0 for "unknown".

The workload's ``prefix_cache_hit_rate`` needs no column: it is a row of ``workload_metrics``
like every registry metric. Runs stored before this revision kept it only in ``server_metrics``
(where the server's counters gave one); the upgrade copies it into ``workload_metrics`` so the
trend and the nightly watch see those runs too. The downgrade keeps those rows (they are
measurements an older tracker can read), so upgrading again copies only what is missing.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


HIT_RATE = "prefix_cache_hit_rate"


def upgrade() -> None:
    with op.batch_alter_table("request_records") as batch:
        batch.add_column(sa.Column("cached_input_tokens", sa.Integer(), nullable=True))
    _copy_server_hit_rates()


def _copy_server_hit_rates() -> None:
    columns = (sa.column("workload_result_id", sa.Integer()), sa.column("metric", sa.String()),
               sa.column("value", sa.Double()))
    metrics = sa.table("workload_metrics", *columns)
    server = sa.table("server_metrics", *(sa.column(c.name, c.type) for c in columns))
    telemetry = sa.table("workload_telemetry", sa.column("workload_result_id", sa.Integer()),
                         sa.column("server_measured", sa.Boolean()))
    stored = sa.exists().where(metrics.c.workload_result_id == server.c.workload_result_id,
                               metrics.c.metric == HIT_RATE)
    rates = (sa.select(server.c.workload_result_id, server.c.metric, server.c.value)
             .join(telemetry, telemetry.c.workload_result_id == server.c.workload_result_id)
             .where(server.c.metric == HIT_RATE, telemetry.c.server_measured.is_(sa.true()),
                    ~stored))
    op.execute(metrics.insert().from_select(["workload_result_id", "metric", "value"], rates))


def downgrade() -> None:
    with op.batch_alter_table("request_records") as batch:
        batch.drop_column("cached_input_tokens")
