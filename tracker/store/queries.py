"""Read-only queries for the dashboard: plain values and pandas DataFrames, never ORM rows.

Every function takes a Session and only reads. Timestamps in frames are tz-aware UTC. Metric
values stay in SI units (seconds, tokens/s) as stored — conversion happens at display.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from sqlalchemy import Select, func, select, tuple_
from sqlalchemy.orm import Session

from tracker.metrics import (
    REGISTRY,
    compute_quality_metrics,
    compute_run_metrics,
    compute_workload_metrics,
    quality_series_name,
)
from tracker.results import RunOrigin, RunResult
from tracker.store.models import (
    ConfigVersionModel,
    RunModel,
    SuiteModel,
    WorkloadMetricModel,
)
from tracker.store.models import WorkloadResultModel as Workloads
from tracker.store.quality_series import fetch_quality_trend_rows, is_quality_metric
from tracker.store.regressions import RegressionStatus, fetch_regressions
from tracker.store.runs import fetch_run

OVERVIEW_COLUMNS = ("config", "suite", "run_id", "status", "status_reason", "simulated",
                    "started_at", "config_version", "runs")
TREND_COLUMNS = ("run_id", "started_at", "status", "simulated", "config", "config_version",
                 "suite", "workload", "value", "source")
REGRESSION_COLUMNS = ("id", "status", "config", "suite", "workload", "metric", "before", "after",
                      "rel_change", "regressed", "run_id", "detected_at", "updated_at", "updated_by",
                      "note", "attribution")
RUN_LIST_COLUMNS = ("run_id", "started_at", "status", "simulated", "config", "config_version",
                    "suite")


@dataclass(frozen=True, slots=True)
class StoreSummary:
    """How much the store holds. ``runs == 0`` is the empty database."""

    runs: int
    configs: int
    suites: int
    first_started_at: datetime | None
    last_started_at: datetime | None


@dataclass(frozen=True, slots=True)
class TrendOptions:
    """What a trend can be drawn for: names present in the store and the metric registry."""

    configs: tuple[str, ...]
    suites: tuple[str, ...]
    workloads: Mapping[str, tuple[str, ...]]  # suite name -> its workload names, every version
    metrics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunDetail:
    run: RunResult
    workloads: pd.DataFrame  # one row per workload, summary columns
    requests: pd.DataFrame  # one row per request record


@dataclass(frozen=True, slots=True)
class Comparison:
    base: RunResult
    head: RunResult
    metrics: pd.DataFrame  # workload, metric, unit, direction, base, head, delta, rel_change


@dataclass(frozen=True, slots=True)
class ConfigVersionEntry:
    version: str
    first_seen_at: datetime
    canonical: Mapping[str, Any]
    runs: int
    last_run_at: datetime | None


def _utc(column: pd.Series) -> pd.Series:
    return pd.to_datetime(column, utc=True)


def _frame(rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> pd.DataFrame:
    frame = pd.DataFrame([tuple(row) for row in rows], columns=list(columns))
    if "started_at" in frame.columns:
        frame["started_at"] = _utc(frame["started_at"])
    return frame


# --- the whole store -----------------------------------------------------------------------


def fetch_store_summary(session: Session) -> StoreSummary:
    runs, first, last = session.execute(
        select(func.count(RunModel.id), func.min(RunModel.started_at),
               func.max(RunModel.started_at))
    ).one()
    configs = session.scalar(select(func.count(func.distinct(ConfigVersionModel.name))))
    suites = session.scalar(select(func.count(func.distinct(SuiteModel.name))))
    return StoreSummary(int(runs), int(configs or 0), int(suites or 0),
                        _as_utc(first), _as_utc(last))


def _as_utc(value: datetime | None) -> datetime | None:
    """Aggregates keep the column type, so SQLite's text comes back through UTCDateTime."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _runs_joined(*columns: Any) -> Select[Any]:
    return (select(*columns)
            .join(ConfigVersionModel, RunModel.config_version_id == ConfigVersionModel.id)
            .join(SuiteModel, RunModel.suite_id == SuiteModel.id))


# --- overview ------------------------------------------------------------------------------


_OF_HISTORY = RunModel.source.not_in([origin.value for origin in RunOrigin])  # no gate's


def fetch_overview(session: Session) -> pd.DataFrame:
    """The latest run of every (config name, suite name), with how many runs the pair has:
    runs of the history, not a gate's or a bisection's (a PR head shares its config's name).

    Grouping by (config version, suite) runs on the covering index ix_runs_config_suite_started.
    Versions are folded into their config name here, then only the latest runs are read.
    """
    names = dict(session.execute(select(ConfigVersionModel.id, ConfigVersionModel.name)).all())
    suites = dict(session.execute(select(SuiteModel.id, SuiteModel.name)).all())
    latest: dict[tuple[str, str], tuple[datetime, int, int]] = {}
    counts: dict[tuple[str, str], int] = {}
    groups = session.execute(
        select(RunModel.config_version_id, RunModel.suite_id, func.max(RunModel.started_at),
               func.count())
        .where(_OF_HISTORY)
        .group_by(RunModel.config_version_id, RunModel.suite_id))
    for config_id, suite_id, started_at, count in groups:
        pair = (names[config_id], suites[suite_id])
        counts[pair] = counts.get(pair, 0) + int(count)
        if pair not in latest or started_at > latest[pair][0]:
            latest[pair] = (started_at, config_id, suite_id)
    if not latest:
        return _frame([], OVERVIEW_COLUMNS)
    keys = [(config_id, suite_id, started_at) for started_at, config_id, suite_id
            in latest.values()]
    rows = session.execute(
        _runs_joined(ConfigVersionModel.name, SuiteModel.name, RunModel.id, RunModel.status,
                     RunModel.status_reason, RunModel.simulated, RunModel.started_at,
                     ConfigVersionModel.version)
        .where(tuple_(RunModel.config_version_id, RunModel.suite_id, RunModel.started_at)
               .in_(keys), _OF_HISTORY)
        .order_by(RunModel.id)
    ).all()
    newest = {(row[0], row[1]): row for row in rows}  # on a tie of start times, the higher id
    ordered = [(*newest[pair], counts[pair]) for pair in sorted(newest)]
    return _frame(ordered, OVERVIEW_COLUMNS)


def fetch_recent_runs(session: Session, limit: int = 50) -> pd.DataFrame:
    """The ``limit`` most recently started runs, newest first."""
    rows = session.execute(
        _runs_joined(RunModel.id, RunModel.started_at, RunModel.status, RunModel.simulated,
                     ConfigVersionModel.name, ConfigVersionModel.version, SuiteModel.name)
        .order_by(RunModel.started_at.desc(), RunModel.id.desc())
        .limit(limit)
    ).all()
    return _frame(rows, RUN_LIST_COLUMNS)


# --- trends --------------------------------------------------------------------------------


def fetch_trend_options(session: Session) -> TrendOptions:
    """Config and suite names, each suite's workload names (from its stored versions), metrics."""
    configs = session.scalars(
        select(ConfigVersionModel.name).distinct().order_by(ConfigVersionModel.name)).all()
    workloads: dict[str, list[str]] = {}
    for name, canonical in session.execute(
            select(SuiteModel.name, SuiteModel.canonical).order_by(SuiteModel.id)):
        names = workloads.setdefault(name, [])
        for workload in canonical.get("workloads", []):
            if workload.get("name") not in names:
                names.append(str(workload.get("name")))
    return TrendOptions(
        configs=tuple(configs),
        suites=tuple(sorted(workloads)),
        workloads={suite: tuple(names) for suite, names in sorted(workloads.items())},
        metrics=tuple(REGISTRY),
    )


def fetch_trend(
    session: Session,
    metric: str,
    *,
    configs: Sequence[str],
    suites: Sequence[str],
    workloads: Sequence[str] | None = None,
    since: datetime | None = None,
) -> pd.DataFrame:
    """``metric`` of every matching workload over time, oldest first (one row per workload run).

    Runs that did not measure the metric (failed, or the metric was not defined) have no row.
    ``source`` is ``native`` for a run of the history measured here, else the tool it was
    imported from, or ``gate`` / ``bisect`` for a gate's or a bisection's run.
    A quality metric's rows are its sets' (workload ``quality:<set>``).
    """
    if is_quality_metric(metric):
        rows = fetch_quality_trend_rows(session, metric, configs=configs, suites=suites,
                                        workloads=workloads, since=since)
        return _frame(rows, TREND_COLUMNS)
    query = (
        _runs_joined(RunModel.id, RunModel.started_at, RunModel.status, RunModel.simulated,
                     ConfigVersionModel.name, ConfigVersionModel.version, SuiteModel.name,
                     Workloads.name, WorkloadMetricModel.value, RunModel.source)
        .join(Workloads, Workloads.run_id == RunModel.id)
        .join(WorkloadMetricModel, (WorkloadMetricModel.workload_result_id == Workloads.id)
              & (WorkloadMetricModel.metric == metric))
        .where(ConfigVersionModel.name.in_(list(configs)), SuiteModel.name.in_(list(suites)))
        .order_by(RunModel.started_at, RunModel.id, Workloads.position)
    )
    if workloads is not None:
        query = query.where(Workloads.name.in_(list(workloads)))
    if since is not None:
        query = query.where(RunModel.started_at >= since)
    return _frame(session.execute(query).all(), TREND_COLUMNS)


# --- one run, two runs ---------------------------------------------------------------------


def fetch_run_detail(session: Session, run_id: int) -> RunDetail:
    """A stored run with its workload summaries and request records as frames."""
    run = fetch_run(session, run_id)
    return RunDetail(run, workloads_frame(run), requests_frame(run))


def workloads_frame(run: RunResult) -> pd.DataFrame:
    rows = []
    for workload in run.workloads:
        summary = workload.summary
        rows.append({
            "workload": workload.name,
            "concurrency": workload.concurrency,
            "requests": workload.num_requests,
            "completed": summary.completed,
            "failed": summary.failed,
            "complete": workload.complete,
            "duration_s": summary.duration_s,
            **compute_workload_metrics(workload),
            "output_tokens_source": None if summary.output_tokens_source is None
            else summary.output_tokens_source.value,
            "errors": ", ".join(f"{name}: {count}" for name, count in summary.errors.items()),
        })
    return pd.DataFrame(rows)


def requests_frame(run: RunResult) -> pd.DataFrame:
    columns = ("workload", "index", "start_s", "ttft_s", "tpot_s", "e2el_s", "output_tokens",
               "input_tokens", "cached_input_tokens", "error_class", "error")
    rows = [
        (workload.name, record.index, record.start_s, record.ttft_s, record.tpot_s,
         record.e2el_s, record.output_tokens, record.input_tokens, record.cached_input_tokens,
         record.error_class, record.error)
        for workload in run.workloads
        for record in workload.records
    ]
    frame = pd.DataFrame(rows, columns=list(columns))
    for name in ("ttft_s", "tpot_s", "e2el_s", "start_s"):
        frame[name] = frame[name].astype("float64")
    return frame


def fetch_previous_run_id(session: Session, run_id: int) -> int | None:
    """The run of the same config name and suite name started just before ``run_id``."""
    current = session.execute(
        _runs_joined(ConfigVersionModel.name, SuiteModel.name, RunModel.started_at)
        .where(RunModel.id == run_id)
    ).one_or_none()
    if current is None:
        return None
    config, suite, started_at = current
    found: int | None = session.scalar(
        _runs_joined(RunModel.id)
        .where(ConfigVersionModel.name == config, SuiteModel.name == suite,
               (RunModel.started_at < started_at)
               | ((RunModel.started_at == started_at) & (RunModel.id < run_id)))
        .order_by(RunModel.started_at.desc(), RunModel.id.desc())
        .limit(1)
    )
    return found


def fetch_comparison(session: Session, base_id: int, head_id: int) -> Comparison:
    """Two stored runs and every metric of the workloads they share, side by side."""
    base = fetch_run(session, base_id)
    head = fetch_run(session, head_id)
    return Comparison(base, head, compare_metrics_frame(base, head))


def compare_metrics_frame(base: RunResult, head: RunResult) -> pd.DataFrame:
    """Every metric of the workloads both runs have (the run's startup time with each, as
    stored), then the quality set's accuracy and drift as the series ``quality:<set>``."""
    head_workloads = {w.name: w for w in head.workloads}
    pairs: list[tuple[str, Mapping[str, float], Mapping[str, float]]] = []
    for workload in base.workloads:
        other = head_workloads.get(workload.name)
        if other is not None:
            pairs.append((workload.name,
                          {**compute_workload_metrics(workload),
                           **compute_run_metrics(base.environment)},
                          {**compute_workload_metrics(other),
                           **compute_run_metrics(head.environment)}))
    if base.quality is not None and head.quality is not None \
            and base.quality.set_name == head.quality.set_name:
        pairs.append((quality_series_name(base.quality.set_name),
                      compute_quality_metrics(base.quality), compute_quality_metrics(head.quality)))
    rows = [row for name, before, after in pairs for row in _compared(name, before, after)]
    columns = ["workload", "metric", "unit", "direction", "base", "head", "delta", "rel_change"]
    return pd.DataFrame(rows, columns=columns)


def _compared(name: str, base_values: Mapping[str, float],
              head_values: Mapping[str, float]) -> list[tuple[Any, ...]]:
    rows = []
    for metric_name, metric in REGISTRY.items():
        before, after = base_values.get(metric_name), head_values.get(metric_name)
        if before is None and after is None:
            continue
        delta = None if before is None or after is None else after - before
        rel = None if delta is None or not before else delta / abs(before)
        rows.append((name, metric_name, metric.unit, metric.direction.value, before, after,
                     delta, rel))
    return rows


def fetch_latest_run_id(session: Session, config: str, version: str, suite: str) -> int | None:
    """The most recent run of one config version on one suite."""
    found: int | None = session.scalar(
        _runs_joined(RunModel.id)
        .where(ConfigVersionModel.name == config, ConfigVersionModel.version == version,
               SuiteModel.name == suite)
        .order_by(RunModel.started_at.desc(), RunModel.id.desc())
        .limit(1)
    )
    return found


# --- configs -------------------------------------------------------------------------------


def fetch_config_history(session: Session, name: str) -> list[ConfigVersionEntry]:
    """Every version of config ``name``, oldest first, with how many runs used it."""
    usage = (
        select(RunModel.config_version_id, func.count().label("runs"),
               func.max(RunModel.started_at).label("last_run_at"))
        .group_by(RunModel.config_version_id)
        .subquery()
    )
    rows = session.execute(
        select(ConfigVersionModel.version, ConfigVersionModel.first_seen_at,
               ConfigVersionModel.canonical, usage.c.runs, usage.c.last_run_at)
        .outerjoin(usage, usage.c.config_version_id == ConfigVersionModel.id)
        .where(ConfigVersionModel.name == name)
        .order_by(ConfigVersionModel.first_seen_at, ConfigVersionModel.id)
    ).all()
    return [ConfigVersionEntry(version, seen, canonical, int(runs or 0), _as_utc(last))
            for version, seen, canonical, runs, last in rows]


def fetch_config_bodies(session: Session, name: str) -> dict[str, Mapping[str, Any]]:
    """Config ``name``'s canonical body per version (for diffs on a trend)."""
    rows = session.execute(
        select(ConfigVersionModel.version, ConfigVersionModel.canonical)
        .where(ConfigVersionModel.name == name))
    return {version: canonical for version, canonical in rows}


# --- regressions ---------------------------------------------------------------------------


def fetch_regressions_frame(session: Session, statuses: Sequence[RegressionStatus],
                            limit: int = 500) -> pd.DataFrame:
    """Regression records of the given statuses, newest first (``limit`` per status)."""
    rows = []
    for status in statuses:
        for record in fetch_regressions(session, status=status, limit=limit):
            rows.append((record.id, record.status.value, record.series.config_name,
                         record.series.suite_name, record.series.workload, record.series.metric,
                         record.before, record.after, record.rel_change, record.regressed,
                         record.run_id, record.detected_at, record.updated_at,
                         record.updated_by, record.note, record.attribution))
    frame = pd.DataFrame(rows, columns=list(REGRESSION_COLUMNS))
    for column in ("detected_at", "updated_at"):
        frame[column] = _utc(frame[column])
    return frame.sort_values(["detected_at", "id"], ascending=False).reset_index(drop=True)
