"""Quality tables: how well the target answered a run's quality set.

- ``quality_summaries`` holds, per run, the set, accuracy with its Wilson interval, the drift,
  and the run whose answers it reused (quality is asked once per config version and suite a
  night).
- ``quality_items`` holds, per run, every item's answer and score.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Double, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from tracker.store.models import Base


class QualitySummaryModel(Base):
    __tablename__ = "quality_summaries"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"),
                                        primary_key=True)
    set_name: Mapped[str] = mapped_column(String(200))
    set_version: Mapped[str] = mapped_column(String(64))
    items: Mapped[int] = mapped_column(Integer)
    answered: Mapped[int] = mapped_column(Integer)
    correct: Mapped[int] = mapped_column(Integer)
    accuracy: Mapped[float | None] = mapped_column(Double)
    accuracy_ci_low: Mapped[float | None] = mapped_column(Double)
    accuracy_ci_high: Mapped[float | None] = mapped_column(Double)
    drift: Mapped[float | None] = mapped_column(Double)
    drift_baseline_run_id: Mapped[int | None] = mapped_column(Integer)  # no FK: may be deleted
    drift_compared: Mapped[int] = mapped_column(Integer)
    # the run whose answers this one copies (quality once per night); None: asked by this run
    reused_from_run_id: Mapped[int | None] = mapped_column(Integer)  # no FK: may be deleted


class QualityItemModel(Base):
    __tablename__ = "quality_items"
    __table_args__ = (UniqueConstraint("run_id", "item_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    item_id: Mapped[str] = mapped_column(String(200))
    scorer: Mapped[str] = mapped_column(String(16))
    output: Mapped[str | None] = mapped_column(Text)
    score: Mapped[float | None] = mapped_column(Double)
    error: Mapped[str | None] = mapped_column(Text)
    changed: Mapped[bool | None] = mapped_column(Boolean)
