"""Schedules as stored: the definitions every scheduler and worker reads from the database.

Each row mirrors a schedule file's entry or ``tracker schedule add`` (``source`` says which), with
its firing history. Every function takes a Session, and the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from tracker.store.models_scheduling import ScheduleModel


@dataclass(frozen=True, slots=True)
class ScheduleBisect:
    """A schedule's ``bisect:`` option: after a confirmed regression at a config change of
    several fields, queue one bisection of the two versions with this budget."""

    enabled: bool
    max_probes: int
    max_minutes: float | None  # None: no limit on time

    def as_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "max_probes": self.max_probes,
                "max_minutes": self.max_minutes}


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    name: str
    cron: str
    timezone: str
    configs: tuple[str, ...]
    suites: tuple[str, ...]
    repeats: int
    labels: Mapping[str, str]
    source: str  # the schedules file it came from, or "cli"
    last_fired_at: datetime | None = None
    last_error: str | None = None
    bisect: ScheduleBisect | None = None  # None: not set (off)


def save_schedule(session: Session, row: ScheduleRow, now: datetime) -> None:
    """Insert or replace the schedule named ``row.name`` (its firing history is kept)."""
    values: dict[str, Any] = {
        "cron": row.cron, "timezone": row.timezone, "configs": list(row.configs),
        "suites": list(row.suites), "repeats": row.repeats, "labels": dict(row.labels),
        "source": row.source, "updated_at": now,
        "bisect": None if row.bisect is None else row.bisect.as_json(),
    }
    found = session.scalar(select(ScheduleModel).where(ScheduleModel.name == row.name))
    if found is None:
        session.add(ScheduleModel(name=row.name, last_fired_at=None, last_error=None, **values))
    else:
        for key, value in values.items():
            setattr(found, key, value)
    session.flush()


def replace_file_schedules(session: Session, source: str, rows: Sequence[ScheduleRow],
                           now: datetime) -> list[str]:
    """Make the schedules from file ``source`` exactly ``rows`` and return the names removed."""
    keep = {row.name for row in rows}
    stale = session.scalars(select(ScheduleModel.name).where(ScheduleModel.source == source)).all()
    removed = sorted(name for name in stale if name not in keep)
    if removed:
        session.execute(delete(ScheduleModel).where(ScheduleModel.name.in_(removed)))
    for row in rows:
        save_schedule(session, row, now)
    return removed


def delete_schedule(session: Session, name: str) -> bool:
    result = session.execute(delete(ScheduleModel).where(ScheduleModel.name == name))
    return bool(getattr(result, "rowcount", 0))


def fetch_schedules(session: Session) -> list[ScheduleRow]:
    rows = session.scalars(select(ScheduleModel).order_by(ScheduleModel.name)).all()
    return [_schedule(row) for row in rows]


def fetch_schedule(session: Session, name: str) -> ScheduleRow | None:
    row = session.scalar(select(ScheduleModel).where(ScheduleModel.name == name))
    return None if row is None else _schedule(row)


def _schedule(row: ScheduleModel) -> ScheduleRow:
    return ScheduleRow(row.name, row.cron, row.timezone, tuple(row.configs), tuple(row.suites),
                       row.repeats, dict(row.labels), row.source, row.last_fired_at, row.last_error,
                       _bisect(row.bisect))


def _bisect(stored: Mapping[str, Any] | None) -> ScheduleBisect | None:
    if stored is None:
        return None
    minutes = stored.get("max_minutes")
    return ScheduleBisect(bool(stored.get("enabled")), int(stored["max_probes"]),
                          None if minutes is None else float(minutes))


def mark_schedule_fired(session: Session, name: str, fired_at: datetime, error: str | None) -> None:
    session.execute(update(ScheduleModel).where(ScheduleModel.name == name)
                    .values(last_fired_at=fired_at, last_error=error))
