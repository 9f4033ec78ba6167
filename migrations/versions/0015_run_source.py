"""A run's source is a column: where it came from, read without opening its environment.

Revision ID: 0015_run_source
Revises: 0014_regression_size
Create Date: 2026-12-03

Written by hand from the model in tracker/store/models.py. Revisions never import the tracker.

- ``runs.source``: ``native`` for a run of a config's history that the tracker measured; the tool
  a run was imported from (``environment.import.tool``); or who ran it apart from the history
  (``environment.origin.kind``: ``gate`` or ``bisect``). The upgrade fills it for every stored run
  by that rule, the first of the two fields a run has. The series, the watch, the noise prior and
  the listings filter on it in SQL instead of reading each run's environment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0015_run_source"
down_revision: str | Sequence[str] | None = "0014_regression_size"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SOURCE_FIELDS = (("import", "tool"), ("origin", "kind"))  # the first a run has, else native
BATCH = 1000


def _source(environment: Any) -> str:
    if isinstance(environment, str):  # a JSON column read back as text by some drivers
        try:
            environment = json.loads(environment)
        except ValueError:
            return "native"
    for key, name in SOURCE_FIELDS:
        found = environment.get(key) if isinstance(environment, dict) else None
        if isinstance(found, dict):
            return str(found.get(name))[:40]
    return "native"


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("source", sa.String(40), nullable=False,
                                   server_default="native"))
    runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("environment", sa.JSON),
                    sa.column("source", sa.String))
    connection = op.get_bind()
    changed = [{"run_id": run_id, "value": source}
               for run_id, environment in connection.execute(sa.select(runs.c.id,
                                                                       runs.c.environment))
               if (source := _source(environment)) != "native"]
    update = (sa.update(runs).where(runs.c.id == sa.bindparam("run_id"))
              .values(source=sa.bindparam("value")))
    for start in range(0, len(changed), BATCH):
        connection.execute(update, changed[start:start + BATCH])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("source")
