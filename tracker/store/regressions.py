"""Regression records (one per alerted change point) and the lookups analysis needs.

Every function takes a Session, and the caller owns the transaction. Rows stay in here: callers get
``RegressionRecord``, ``SeriesPoint`` and ``ConfigVersionRow`` values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.errors import NotFoundError
from tracker.results import NATIVE_SOURCE, RunStatus
from tracker.store.listings import ConfigVersionRow
from tracker.store.models import (
    ConfigVersionModel,
    RunModel,
    SuiteModel,
    WorkloadMetricModel,
    WorkloadResultModel,
)
from tracker.store.models_regressions import RegressionModel
from tracker.store.quality_series import fetch_quality_series_rows, is_quality_metric

UPDATED_BY_CHARS = 200  # regressions.updated_by is String(200)


class RegressionStatus(StrEnum):
    OPEN = "open"  # new, in the metric's bad way (or of unknown direction): someone should look
    ACKNOWLEDGED = "acknowledged"  # someone is looking
    FIXED = "fixed"
    EXPECTED = "expected"  # a known trade-off, e.g. a config change that buys quality
    IMPROVEMENT = "improvement"  # new, in the metric's good way: recorded, nothing to look at


def initial_status(regressed: bool | None) -> RegressionStatus:
    """A new record's status: an improvement when the analysis says the change went the
    metric's good way, else open (a regression, or a direction it could not tell)."""
    return RegressionStatus.IMPROVEMENT if regressed is False else RegressionStatus.OPEN


@dataclass(frozen=True, slots=True)
class SeriesKey:
    config_name: str
    suite_name: str
    workload: str
    metric: str

    def render(self) -> str:
        return f"{self.config_name} / {self.suite_name} / {self.workload} / {self.metric}"


@dataclass(frozen=True, slots=True)
class RegressionRecord:
    id: int
    series: SeriesKey
    run_id: int | None  # the first run of the new level
    location_index: int  # its position in the series when detected
    before: float
    after: float
    rel_change: float | None
    regressed: bool | None  # True: the worse direction for this metric
    status: RegressionStatus
    note: str
    attribution: str | None
    detected_at: datetime
    updated_at: datetime
    updated_by: str | None = None  # who made the last triage change; None: not recorded
    # of rel_change, each end a one-sided 95 % bound (the t-test over runs); None: not estimated
    # (a record stored before revision 0014, or too few runs)
    interval: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """One completed run's value of one metric, with what is needed to explain a change."""

    run_id: int
    started_at: datetime
    value: float
    config_version: str
    config_body: Mapping[str, Any]
    suite_version: str
    environment: Mapping[str, Any]


# --- regression records ----------------------------------------------------------------------


def save_regression(
    session: Session,
    series: SeriesKey,
    *,
    run_id: int | None,
    location_index: int,
    before: float,
    after: float,
    rel_change: float | None,
    regressed: bool | None,
    interval: tuple[float, float] | None = None,
    attribution: str | None = None,
    note: str = "",
    detected_at: datetime | None = None,
) -> int:
    """Store a new record (``open``, or ``improvement`` when ``regressed`` is False:
    ``initial_status``) and return its id. ``before`` and ``after`` are the two levels in the
    metric's units, ``rel_change`` is the estimate and ``interval`` its bounds."""
    if interval is not None and not interval[0] <= interval[1]:
        raise ValueError(f"interval: low must not exceed high (got {interval})")
    now = detected_at or datetime.now(UTC)
    low, high = (None, None) if interval is None else interval
    row = RegressionModel(
        config_name=series.config_name, suite_name=series.suite_name, workload=series.workload,
        metric=series.metric, run_id=run_id, location_index=location_index, before=before,
        after=after, rel_change=rel_change, rel_change_low=low, rel_change_high=high,
        regressed=regressed, status=initial_status(regressed).value, note=note,
        attribution=attribution, detected_at=now, updated_at=now,
    )
    session.add(row)
    session.flush()
    return row.id


def fetch_regressions(
    session: Session,
    *,
    status: RegressionStatus | None = None,
    series: SeriesKey | None = None,
    limit: int = 200,
) -> list[RegressionRecord]:
    """Regression records, newest first, optionally of one status and one series."""
    query = select(RegressionModel)
    if status is not None:
        query = query.where(RegressionModel.status == status.value)
    if series is not None:
        query = query.where(RegressionModel.config_name == series.config_name,
                            RegressionModel.suite_name == series.suite_name,
                            RegressionModel.workload == series.workload,
                            RegressionModel.metric == series.metric)
    query = query.order_by(RegressionModel.detected_at.desc(), RegressionModel.id.desc())
    return [_record(row) for row in session.scalars(query.limit(limit))]


def fetch_series_regressions(
    session: Session,
    metric: str,
    *,
    configs: Sequence[str],
    suites: Sequence[str],
    workloads: Sequence[str] | None = None,
    limit: int = 1000,
) -> list[RegressionRecord]:
    """Every record (any status) of ``metric`` on these configs and suites (and workloads, where
    None is all), oldest first: the change points Trends draws."""
    query = select(RegressionModel).where(RegressionModel.metric == metric,
                                          RegressionModel.config_name.in_(list(configs)),
                                          RegressionModel.suite_name.in_(list(suites)))
    if workloads is not None:
        query = query.where(RegressionModel.workload.in_(list(workloads)))
    query = query.order_by(RegressionModel.detected_at, RegressionModel.id)
    return [_record(row) for row in session.scalars(query.limit(limit))]


def fetch_regression(session: Session, regression_id: int) -> RegressionRecord:
    return _record(_row(session, regression_id))


def _row(session: Session, regression_id: int) -> RegressionModel:
    row = session.get(RegressionModel, regression_id)
    if row is None:
        raise NotFoundError(f"regression {regression_id} not found; list them with "
                            "fetch_regressions (or the dashboard)")
    return row


def update_regression_status(
    session: Session, regression_id: int, status: RegressionStatus, note: str | None = None,
    *, by: str | None = None, now: datetime | None = None,
) -> RegressionRecord:
    """Move a record to ``status`` (any status to any other), optionally replacing its note.
    ``by`` is who did it (the dashboard's viewer, or None when not known), cut to the column's
    size."""
    row = _row(session, regression_id)
    row.status = status.value
    if note is not None:
        row.note = note
    row.updated_at = now or datetime.now(UTC)
    row.updated_by = None if by is None else by[:UPDATED_BY_CHARS]
    session.flush()
    return _record(row)


def _record(row: RegressionModel) -> RegressionRecord:
    interval = None if row.rel_change_low is None or row.rel_change_high is None else \
        (row.rel_change_low, row.rel_change_high)
    return RegressionRecord(
        id=row.id,
        series=SeriesKey(row.config_name, row.suite_name, row.workload, row.metric),
        run_id=row.run_id, location_index=row.location_index, before=row.before,
        after=row.after, rel_change=row.rel_change, regressed=row.regressed,
        status=RegressionStatus(row.status), note=row.note, attribution=row.attribution,
        detected_at=row.detected_at, updated_at=row.updated_at, updated_by=row.updated_by,
        interval=interval,
    )


# --- lookups for analysis --------------------------------------------------------------------


def fetch_metric_series(session: Session, series: SeriesKey) -> list[SeriesPoint]:
    """The metric's value in every completed run of the series, oldest first. Imported runs are
    left out and client-bound ones kept (a host that starves the client every night would
    otherwise leave the watch no series at all, and a busy night is a point like any other:
    the detector sets a spike aside, and a step that persists is a change to look at). A quality
    metric's series is its set's (workload ``quality:<set>``, ``tracker.store.quality_series``)."""
    if is_quality_metric(series.metric):
        found = fetch_quality_series_rows(session, series.config_name, series.suite_name,
                                          series.workload, series.metric)
        return [SeriesPoint(*row) for row in found]
    rows = session.execute(
        select(RunModel.id, RunModel.started_at, WorkloadMetricModel.value,
               ConfigVersionModel.version, ConfigVersionModel.canonical, SuiteModel.version,
               RunModel.environment)
        .join(ConfigVersionModel, RunModel.config_version_id == ConfigVersionModel.id)
        .join(SuiteModel, RunModel.suite_id == SuiteModel.id)
        .join(WorkloadResultModel, WorkloadResultModel.run_id == RunModel.id)
        .join(WorkloadMetricModel,
              WorkloadMetricModel.workload_result_id == WorkloadResultModel.id)
        .where(ConfigVersionModel.name == series.config_name,
               SuiteModel.name == series.suite_name,
               WorkloadResultModel.name == series.workload,
               WorkloadMetricModel.metric == series.metric,
               RunModel.status == RunStatus.COMPLETED.value,
               # Runs imported from another tool (``tracker import``) are not the nightly
               # series: other definitions, another client. Nor are a gate's or a bisection's.
               RunModel.source == NATIVE_SOURCE)
        .order_by(RunModel.started_at, RunModel.id)
    )
    return [SeriesPoint(*row) for row in rows]


def fetch_config_version(session: Session, ref: str) -> tuple[str, ConfigVersionRow]:
    """A stored config version by ``NAME@VERSION`` or a version prefix (6+ hex digits), as the
    config's name and the version."""
    name, _, prefix = ref.rpartition("@")
    prefix = prefix.lower()
    query = select(ConfigVersionModel).where(ConfigVersionModel.version.startswith(prefix))
    if name:
        query = query.where(ConfigVersionModel.name == name)
    rows = session.scalars(query.limit(3)).all()
    if not rows:
        raise NotFoundError(f"{ref}: no stored config version matches; list versions with "
                            "`tracker runs` (config@version) or give a file or a git ref")
    if len({(row.name, row.version) for row in rows}) > 1:
        found = ", ".join(f"{row.name}@{row.version[:12]}" for row in rows)
        raise NotFoundError(f"{ref}: ambiguous, matches {found}; give more digits or NAME@VERSION")
    row = rows[0]
    return row.name, ConfigVersionRow(row.version, row.first_seen_at, row.canonical)
