"""GPU energy per workload (issue 16).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

Written by hand from the models in tracker/store/models_telemetry.py. Revisions never import the
tracker.

- ``gpu_summaries.energy_j``: the joules one GPU drew over the workload; NULL where neither
  NVML's energy counter nor power samples measured it (and for runs stored before this revision).
- ``gpu_summaries.energy_source``: ``counter`` (nvmlDeviceGetTotalEnergyConsumption) or
  ``sampled power`` (the power samples integrated over time).
- ``workload_telemetry.gpu_duration_s``: the span the energy covers (the sampler's start to stop).
- ``workload_telemetry.energy_note``: why the energy may not be the workload's alone (too short
  for the counter, other processes on the GPU); NULL when nothing says so.

The energy per token needs no column: ``joules_per_output_token`` and ``joules_per_token`` are
rows of ``workload_metrics`` like every registry metric (so are the cost metrics).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("gpu_summaries") as batch:
        batch.add_column(sa.Column("energy_j", sa.Double(), nullable=True))
        batch.add_column(sa.Column("energy_source", sa.String(length=20), nullable=True))
    with op.batch_alter_table("workload_telemetry") as batch:
        batch.add_column(sa.Column("gpu_duration_s", sa.Double(), nullable=True))
        batch.add_column(sa.Column("energy_note", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workload_telemetry") as batch:
        batch.drop_column("energy_note")
        batch.drop_column("gpu_duration_s")
    with op.batch_alter_table("gpu_summaries") as batch:
        batch.drop_column("energy_source")
        batch.drop_column("energy_j")
