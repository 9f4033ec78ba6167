"""Bisections: which fields of a config diff made a gate regress, and the runs that showed it.

It is imported at the bottom of ``tracker.store.models`` so the metadata (and ``alembic check``)
sees it. The schema, like every table's, is owned by ``migrations/`` (revisions 0010 and 0011).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, CheckConstraint, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from tracker.store.models import Base, UTCDateTime

BISECTION_OUTCOMES = ("no_regression", "not_measured", "found", "narrowed", "failed",
                      "interrupted")
BISECTION_ROLES = ("base", "head", "control", "probe")


class BisectionModel(Base):
    """One bisection of a gate: base and head config versions, the row it bisected, the result.

    ``culprits`` is a list of ``{"fields": [path, ...], "share": float | null, "share_interval":
    [low, high] | null}``. ``probes`` is a list of ``{"number", "fields", "outcome", "reason"}``.
    """

    __tablename__ = "bisections"
    __table_args__ = (
        CheckConstraint(f"outcome IN {BISECTION_OUTCOMES!r}", name="outcome"),
        Index("ix_bisections_config_name", "config_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    config_name: Mapped[str] = mapped_column(String(200))  # the base's
    suite_name: Mapped[str] = mapped_column(String(200))
    base_version: Mapped[str] = mapped_column(String(64))
    head_version: Mapped[str] = mapped_column(String(64))
    workload: Mapped[str | None] = mapped_column(String(200))  # None: nothing was bisected
    metric: Mapped[str | None] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(16))
    stop_reason: Mapped[str] = mapped_column(Text)
    culprits: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    probes: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class BisectionRunModel(Base):
    """A run of a bisection: the gate's base and head runs, each probe's base controls and runs."""

    __tablename__ = "bisection_runs"
    __table_args__ = (
        CheckConstraint(f"role IN {BISECTION_ROLES!r}", name="role"),
        Index("ix_bisection_runs_bisection_id", "bisection_id"),
        Index("ix_bisection_runs_run_id", "run_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bisection_id: Mapped[int] = mapped_column(ForeignKey("bisections.id", ondelete="CASCADE"))
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    probe: Mapped[int | None] = mapped_column(Integer)  # its number; None: the gate's rounds
    role: Mapped[str] = mapped_column(String(16))
