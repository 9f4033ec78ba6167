"""The tables, as SQLAlchemy 2 typed declarative models. Rows never leave ``tracker.store``.

The schema is owned by ``migrations/``: a change here needs a new revision there, and
``alembic check`` fails while the two disagree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from tracker.results import NATIVE_SOURCE

RESULT_SCHEMA_VERSION = 1  # the layout of a stored run; bumped when its meaning changes

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

RUN_STATUSES = ("running", "completed", "partial", "failed")


class UTCDateTime(TypeDecorator[datetime]):
    """A tz-aware timestamp stored in UTC. SQLite, which keeps no zone, reads back as UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"timestamps must be tz-aware (got naive {value.isoformat()})")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class ConfigVersionModel(Base):
    __tablename__ = "config_versions"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(64))  # sha256 hex of the canonical form
    canonical: Mapped[dict[str, Any]] = mapped_column(JSON)
    source_path: Mapped[str] = mapped_column(Text)
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SuiteModel(Base):
    __tablename__ = "suites"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(64))
    canonical: Mapped[dict[str, Any]] = mapped_column(JSON)
    prompts_digest: Mapped[str] = mapped_column(String(64))
    source_path: Mapped[str] = mapped_column(Text)
    first_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)


class RunModel(Base):
    __tablename__ = "runs"
    __table_args__ = (
        CheckConstraint(f"status IN {RUN_STATUSES!r}", name="status"),
        Index("ix_runs_config_suite_started", "config_version_id", "suite_id", "started_at"),
        Index("ix_runs_started_at", "started_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    config_version_id: Mapped[int] = mapped_column(ForeignKey("config_versions.id"))
    suite_id: Mapped[int] = mapped_column(ForeignKey("suites.id"))
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    host: Mapped[str] = mapped_column(String(255))
    tracker_version: Mapped[str] = mapped_column(String(64))
    simulated: Mapped[bool] = mapped_column(Boolean)
    environment: Mapped[dict[str, Any]] = mapped_column(JSON)
    # native, the tool it was imported from, or gate / bisect (tracker.results.compute_run_source)
    source: Mapped[str] = mapped_column(String(40), server_default=NATIVE_SOURCE)
    schema_version: Mapped[int] = mapped_column(Integer)
    owner_pid: Mapped[int | None] = mapped_column(Integer)  # while running: who runs it on host
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)  # its heartbeat vouches



class WorkloadResultModel(Base):
    """One workload of a run: its settings and summary columns (metrics live in their own table).

    ``*_count`` is the number of samples behind a latency's statistics (``LatencyStats.count``),
    or NULL when that latency was not measured.
    """

    __tablename__ = "workload_results"
    __table_args__ = (UniqueConstraint("run_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(200))
    concurrency: Mapped[int] = mapped_column(Integer)
    num_requests: Mapped[int] = mapped_column(Integer)
    warmup_requests: Mapped[int] = mapped_column(Integer)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime] = mapped_column(UTCDateTime)
    complete: Mapped[bool] = mapped_column(Boolean)
    completed: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    duration_s: Mapped[float] = mapped_column(Double)
    total_input_tokens: Mapped[int] = mapped_column(Integer)
    total_output_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens_source: Mapped[str | None] = mapped_column(String(16))
    input_tokens_source: Mapped[str | None] = mapped_column(String(16))
    errors: Mapped[dict[str, int]] = mapped_column(JSON)  # error class -> count
    ttft_count: Mapped[int | None] = mapped_column(Integer)
    tpot_count: Mapped[int | None] = mapped_column(Integer)
    itl_count: Mapped[int | None] = mapped_column(Integer)
    e2el_count: Mapped[int | None] = mapped_column(Integer)
    # the client, not the server, set the pace (tracker.load.client_health): never compare as server
    client_bound: Mapped[bool] = mapped_column(Boolean, server_default=false())
    client_bound_reason: Mapped[str | None] = mapped_column(Text)
    # requests whose usage.prompt_tokens differs from the input length the suite asked for
    input_token_count_mismatches: Mapped[int | None] = mapped_column(Integer)


class WorkloadMetricModel(Base):
    """``compute_workload_metrics`` of a workload (its summary's and the server's registry
    metrics), one row per measured metric, in SI units. A metric not measured has no row."""

    __tablename__ = "workload_metrics"

    workload_result_id: Mapped[int] = mapped_column(
        ForeignKey("workload_results.id", ondelete="CASCADE"), primary_key=True
    )
    metric: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[float] = mapped_column(Double)


class RequestRecordModel(Base):
    __tablename__ = "request_records"
    __table_args__ = (Index("ix_request_records_workload_result_id", "workload_result_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_result_id: Mapped[int] = mapped_column(
        ForeignKey("workload_results.id", ondelete="CASCADE")
    )
    idx: Mapped[int] = mapped_column(Integer)
    start_s: Mapped[float] = mapped_column(Double)
    ttft_s: Mapped[float | None] = mapped_column(Double)
    e2el_s: Mapped[float | None] = mapped_column(Double)
    itl_s: Mapped[list[float]] = mapped_column(JSON)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens_source: Mapped[str | None] = mapped_column(String(16))
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    input_tokens_source: Mapped[str | None] = mapped_column(String(16))
    error_class: Mapped[str | None] = mapped_column(String(200))
    error: Mapped[str | None] = mapped_column(Text)
    scheduled_start_s: Mapped[float | None] = mapped_column(Double)  # open loop: planned start
    output_chunks: Mapped[int | None] = mapped_column(Integer)  # content chunks received
    requested_input_tokens: Mapped[int | None] = mapped_column(Integer)  # what the suite asked
    session: Mapped[int | None] = mapped_column(Integer)  # multi-turn: the conversation, 0-based
    turn: Mapped[int | None] = mapped_column(Integer)  # multi-turn: the turn in it, 1-based
    # usage.prompt_tokens_details.cached_tokens; NULL: the server did not say (or stored before)
    cached_input_tokens: Mapped[int | None] = mapped_column(Integer)


# The other tables, one module per concept; imported here so the metadata (and `alembic check`)
# sees every table.
from tracker.store import models_bisections as _bisections  # noqa: E402, F401
from tracker.store import models_client_health as _client_health  # noqa: E402, F401
from tracker.store import models_quality as _quality  # noqa: E402, F401
from tracker.store import models_regressions as _regressions  # noqa: E402, F401
from tracker.store import models_scheduling as _scheduling  # noqa: E402, F401
from tracker.store import models_telemetry as _telemetry  # noqa: E402, F401
