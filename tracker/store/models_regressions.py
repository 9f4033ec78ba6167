"""Regression records: the change points the analysis found in a metric's series, and their triage.

It is imported at the bottom of ``tracker.store.models`` so the metadata (and ``alembic check``)
sees it. The schema, like every table's, is owned by ``migrations/``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, Double, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from tracker.store.models import Base, UTCDateTime

REGRESSION_STATUSES = ("open", "acknowledged", "fixed", "expected", "improvement")


class RegressionModel(Base):
    """One change point in one metric's series: where, how big, and what people made of it.

    The series is (config name, suite name, workload, metric). ``run_id`` is the first run of
    the new level and ``location_index`` its position in the series when it was detected.
    ``before`` and ``after`` are the levels on either side (the last good config version's runs,
    the runs since), and ``rel_change`` is the change between them with its interval. A change
    in the metric's good way is stored as ``improvement``: ``open`` means a regression to look
    at.
    """

    __tablename__ = "regressions"
    __table_args__ = (
        CheckConstraint(f"status IN {REGRESSION_STATUSES!r}", name="status"),
        Index("ix_regressions_series", "config_name", "suite_name", "workload", "metric"),
        Index("ix_regressions_status", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    config_name: Mapped[str] = mapped_column(String(200))
    suite_name: Mapped[str] = mapped_column(String(200))
    workload: Mapped[str] = mapped_column(String(200))
    metric: Mapped[str] = mapped_column(String(64))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))
    location_index: Mapped[int] = mapped_column(Integer)
    before: Mapped[float] = mapped_column(Double)
    after: Mapped[float] = mapped_column(Double)
    rel_change: Mapped[float | None] = mapped_column(Double)
    # the interval of rel_change (the t-test over runs); NULL: not estimated, or stored before
    rel_change_low: Mapped[float | None] = mapped_column(Double)
    rel_change_high: Mapped[float | None] = mapped_column(Double)
    regressed: Mapped[bool | None] = mapped_column(Boolean)  # the worse direction; None: unknown
    status: Mapped[str] = mapped_column(String(16))
    note: Mapped[str] = mapped_column(Text)
    attribution: Mapped[str | None] = mapped_column(Text)  # what changed around it, one line
    detected_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_by: Mapped[str | None] = mapped_column(String(200))  # who triaged it last
