"""The registry's new measures for runs stored before them (issue 19): a data migration.

Revision ID: 0012
Revises: 0011_schedule_bisect
Create Date: 2026-12-01

Written by hand; revisions never import the tracker. No schema change: the GPU memory, the
KV-cache usage peak, the preemptions and the startup time are rows of ``workload_metrics`` like
every registry metric, and the tracker now writes them with each workload. This fills them in
for the workloads stored before, from what those runs kept, so their trends and the nightly
watch have a history:

- ``gpu_memory_peak_bytes`` / ``gpu_memory_mean_bytes``: the highest ``memory_used_peak_bytes``
  and ``memory_used_mean_bytes`` of the workload's ``gpu_summaries`` (NVML), for runs not
  simulated (an older simulator run's NVML reading is the host's idle GPU, not the target's);
- ``kv_cache_usage_peak``, ``num_preemptions``: the workload's ``server_metrics`` rows;
- ``startup_s``: the run's ``environment.launch.startup_s`` (a server the tracker launched), with
  each of its workloads.

A metric already stored is left as it is, so upgrading again copies only what is missing. The
downgrade keeps the rows (as 0008's does: an older tracker reads no metric it does not know).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011_schedule_bisect"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

METRICS = ("gpu_memory_peak_bytes", "gpu_memory_mean_bytes", "kv_cache_usage_peak",
           "num_preemptions", "startup_s")
_MISSING = ("NOT EXISTS (SELECT 1 FROM workload_metrics m WHERE m.workload_result_id = "
            "{id} AND m.metric = '{metric}')")

runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("environment", sa.JSON))
workloads = sa.table("workload_results", sa.column("id", sa.Integer),
                     sa.column("run_id", sa.Integer))
metrics = sa.table("workload_metrics", sa.column("workload_result_id", sa.Integer),
                   sa.column("metric", sa.String), sa.column("value", sa.Double))


def _backfill_memory(name: str, column: str) -> None:
    missing = _MISSING.format(id="g.workload_result_id", metric=name)
    op.execute(
        "INSERT INTO workload_metrics (workload_result_id, metric, value) "
        f"SELECT g.workload_result_id, '{name}', MAX(g.{column}) FROM gpu_summaries g "
        "JOIN workload_results w ON w.id = g.workload_result_id "
        "JOIN runs r ON r.id = w.run_id "
        f"WHERE g.{column} IS NOT NULL AND r.simulated = false AND {missing} "
        "GROUP BY g.workload_result_id")


def _backfill_server(name: str) -> None:
    missing = _MISSING.format(id="s.workload_result_id", metric=name)
    op.execute(
        "INSERT INTO workload_metrics (workload_result_id, metric, value) "
        f"SELECT s.workload_result_id, s.metric, s.value FROM server_metrics s "
        f"WHERE s.metric = '{name}' AND {missing}")


def _startup_s(environment: object) -> float | None:
    launch = environment.get("launch") if isinstance(environment, dict) else None
    value = launch.get("startup_s") if isinstance(launch, dict) else None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None  # type: ignore[arg-type]


def _backfill_startup() -> None:
    bind = op.get_bind()
    started = {run_id: value for run_id, environment in bind.execute(
        sa.select(runs.c.id, runs.c.environment))
        if (value := _startup_s(environment)) is not None}
    if not started:
        return
    have = {row[0] for row in bind.execute(
        sa.select(metrics.c.workload_result_id).where(metrics.c.metric == "startup_s"))}
    rows = [{"workload_result_id": workload_id, "metric": "startup_s", "value": started[run_id]}
            for workload_id, run_id in bind.execute(sa.select(workloads.c.id, workloads.c.run_id))
            if run_id in started and workload_id not in have]
    if rows:
        bind.execute(sa.insert(metrics), rows)


def upgrade() -> None:
    _backfill_memory("gpu_memory_peak_bytes", "memory_used_peak_bytes")
    _backfill_memory("gpu_memory_mean_bytes", "memory_used_mean_bytes")
    _backfill_server("kv_cache_usage_peak")
    _backfill_server("num_preemptions")
    _backfill_startup()


def downgrade() -> None:
    """Nothing to undo in the schema; the rows stay (``METRICS`` names them)."""
