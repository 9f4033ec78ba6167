"""Tables of the nightly machinery: schedules, the run queue, and alert deliveries.

``schedules`` mirrors the schedule files and ``tracker schedule add``, so that every scheduler and
worker reads the same definitions from the database. ``run_requests`` is the queue: a scheduled
slot (or ``tracker schedule run-now``) enqueues one request per config x suite x repeat. A worker
claims it, heartbeats while it runs and links the run it stores. ``alert_deliveries`` records
every webhook attempt, sent or not (the webhook URL itself is a secret and is never stored).
APScheduler's own job table (``apscheduler_jobs``) is not part of this schema.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from tracker.store.models import Base, UTCDateTime

REQUEST_STATUSES = ("queued", "running", "done", "failed")
REQUEST_KINDS = ("run", "bisect")
DELIVERY_STATUSES = ("sent", "failed")


class ScheduleModel(Base):
    __tablename__ = "schedules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    cron: Mapped[str] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64))
    configs: Mapped[list[str]] = mapped_column(JSON)  # absolute paths, in order
    suites: Mapped[list[str]] = mapped_column(JSON)
    repeats: Mapped[int] = mapped_column(Integer)
    labels: Mapped[dict[str, str]] = mapped_column(JSON)  # a worker must carry every one
    source: Mapped[str] = mapped_column(Text)  # the schedules file it came from, or "cli"
    # the ``bisect:`` option ({"enabled", "max_probes", "max_minutes"}); None: not set (off)
    bisect: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_fired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)


class RunRequestModel(Base):
    """One job to be done: a config x suite run (``kind`` ``run``, where ``slot_at`` is NULL for
    ``run-now`` requests), or a bisection between two stored config versions (``bisect``: its
    versions and budget in ``job``, queued once per ``job_key``)."""

    __tablename__ = "run_requests"
    __table_args__ = (
        CheckConstraint(f"status IN {REQUEST_STATUSES!r}", name="status"),
        CheckConstraint(f"kind IN {REQUEST_KINDS!r}", name="kind"),
        UniqueConstraint("schedule_name", "slot_at", "position"),
        Index("ix_run_requests_status_id", "status", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    schedule_name: Mapped[str | None] = mapped_column(String(200))
    slot_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    position: Mapped[int] = mapped_column(Integer)  # index in the slot's configs x suites x repeats
    config_name: Mapped[str] = mapped_column(String(200))
    config_path: Mapped[str] = mapped_column(Text)
    config_body: Mapped[dict[str, Any]] = mapped_column(JSON)  # the canonical config at enqueue
    suite_name: Mapped[str] = mapped_column(String(200))
    suite_path: Mapped[str] = mapped_column(Text)
    suite_body: Mapped[dict[str, Any]] = mapped_column(JSON)
    labels: Mapped[dict[str, str]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    worker_id: Mapped[str | None] = mapped_column(String(255))
    gpus: Mapped[str | None] = mapped_column(String(200))
    enqueued_at: Mapped[datetime] = mapped_column(UTCDateTime)
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    error: Mapped[str | None] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16), server_default="run")
    job: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    job_key: Mapped[str | None] = mapped_column(String(255), unique=True)
    bisection_id: Mapped[int | None] = mapped_column(
        ForeignKey("bisections.id", ondelete="SET NULL"))


class AlertDeliveryModel(Base):
    __tablename__ = "alert_deliveries"
    __table_args__ = (CheckConstraint(f"status IN {DELIVERY_STATUSES!r}", name="status"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    destination: Mapped[str] = mapped_column(String(255))  # scheme://host only, never the path
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    http_status: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
