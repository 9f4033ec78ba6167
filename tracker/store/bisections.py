"""Saving and reading bisections (``tracker.store.models_bisections``) as plain values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.store.models_bisections import BisectionModel, BisectionRunModel


@dataclass(frozen=True, slots=True)
class StoredBisection:
    config_name: str
    suite_name: str
    base_version: str
    head_version: str
    workload: str | None
    metric: str | None
    outcome: str
    stop_reason: str
    culprits: tuple[dict[str, Any], ...]  # {"fields": [...], "share", "share_interval"}
    probes: tuple[dict[str, Any], ...]  # {"number", "fields", "outcome", "reason"}
    created_at: datetime
    runs: tuple[tuple[int | None, str, int], ...]  # (probe number or None, role, run id)
    bisection_id: int | None = None


def save_bisection(session: Session, bisection: StoredBisection) -> int:
    """Store a bisection and link its runs. The caller owns the transaction."""
    row = BisectionModel(
        config_name=bisection.config_name, suite_name=bisection.suite_name,
        base_version=bisection.base_version, head_version=bisection.head_version,
        workload=bisection.workload, metric=bisection.metric, outcome=bisection.outcome,
        stop_reason=bisection.stop_reason, culprits=list(bisection.culprits),
        probes=list(bisection.probes), created_at=bisection.created_at)
    session.add(row)
    session.flush()
    session.add_all(BisectionRunModel(bisection_id=row.id, run_id=run_id, probe=probe, role=role)
                    for probe, role, run_id in bisection.runs)
    return row.id


def fetch_bisections(session: Session, *, run_ids: Sequence[int] | None = None,
                     limit: int = 20) -> list[StoredBisection]:
    """The latest bisections first, or with ``run_ids`` those that made any of these runs."""
    query = select(BisectionModel).order_by(BisectionModel.id.desc()).limit(limit)
    if run_ids is not None:
        linked = select(BisectionRunModel.bisection_id).where(
            BisectionRunModel.run_id.in_(list(run_ids)))
        query = query.where(BisectionModel.id.in_(linked))
    return [_value(session, row) for row in session.scalars(query)]


def fetch_bisection(session: Session, bisection_id: int) -> StoredBisection | None:
    """One bisection by its id, or None when there is none."""
    row = session.get(BisectionModel, bisection_id)
    return None if row is None else _value(session, row)


def _value(session: Session, row: BisectionModel) -> StoredBisection:
    links = session.scalars(select(BisectionRunModel).where(
        BisectionRunModel.bisection_id == row.id).order_by(BisectionRunModel.id))
    return StoredBisection(
        row.config_name, row.suite_name, row.base_version, row.head_version, row.workload,
        row.metric, row.outcome, row.stop_reason, tuple(row.culprits), tuple(row.probes),
        row.created_at, tuple((link.probe, link.role, link.run_id) for link in links), row.id)
