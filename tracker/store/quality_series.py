"""Quality as series: a run's accuracy and answer drift, per quality set, over the nights.

Quality is a run's, not a workload's (``quality_summaries``, one row per run), so its series are
named for the set: the workload of a ``SeriesKey`` or a trend row is ``quality:<set name>``
(``tracker.metrics.quality_series_name``), and the metrics are ``tracker.metrics``'
``QUALITY_METRICS``. The trend, the watch and the dashboard read them here like any other series.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from tracker.metrics import QUALITY_SERIES_PREFIX, quality_series_name
from tracker.results import NATIVE_SOURCE, RunStatus
from tracker.store.models import ConfigVersionModel, RunModel, SuiteModel
from tracker.store.models_quality import QualitySummaryModel

_COLUMNS = {"accuracy": QualitySummaryModel.accuracy, "answer_drift": QualitySummaryModel.drift}


def is_quality_metric(metric: str) -> bool:
    """A registry metric of a run's quality set (``QUALITY_METRICS``: each has its column here),
    not of a workload."""
    return metric in _COLUMNS


def _joined(*columns: Any) -> Select[Any]:
    return (select(*columns).select_from(RunModel)
            .join(QualitySummaryModel, QualitySummaryModel.run_id == RunModel.id)
            .join(ConfigVersionModel, RunModel.config_version_id == ConfigVersionModel.id)
            .join(SuiteModel, RunModel.suite_id == SuiteModel.id))


def fetch_quality_series_rows(session: Session, config_name: str, suite_name: str,
                              workload: str, metric: str) -> list[Any]:
    """The history's completed runs' (run id, started, value, config version, canonical config,
    suite version, environment) of one set's ``metric``, oldest first. A run not measured has no
    row, and imported, gate and bisection runs are left out (``runs.source``)."""
    if not workload.startswith(QUALITY_SERIES_PREFIX):
        return []
    column = _COLUMNS[metric]
    query = (_joined(RunModel.id, RunModel.started_at, column, ConfigVersionModel.version,
                     ConfigVersionModel.canonical, SuiteModel.version, RunModel.environment)
             .where(ConfigVersionModel.name == config_name, SuiteModel.name == suite_name,
                    QualitySummaryModel.set_name == workload.removeprefix(QUALITY_SERIES_PREFIX),
                    RunModel.status == RunStatus.COMPLETED.value, column.is_not(None),
                    RunModel.source == NATIVE_SOURCE)
             .order_by(RunModel.started_at, RunModel.id))
    return list(session.execute(query).all())


def fetch_quality_series_names(session: Session, config_name: str, suite_name: str) -> list[str]:
    """The quality series (``quality:<set>``) a config's runs on a suite measured, by name."""
    names = session.scalars(
        _joined(QualitySummaryModel.set_name)
        .where(ConfigVersionModel.name == config_name, SuiteModel.name == suite_name)
        .distinct().order_by(QualitySummaryModel.set_name)).all()
    return [quality_series_name(name) for name in names]


def fetch_quality_trend_rows(session: Session, metric: str, *, configs: Sequence[str],
                             suites: Sequence[str], workloads: Sequence[str] | None,
                             since: datetime | None) -> list[Any]:
    """The trend's rows (``tracker.store.queries.TREND_COLUMNS``) of a quality metric."""
    column = _COLUMNS[metric]
    query = (_joined(RunModel.id, RunModel.started_at, RunModel.status, RunModel.simulated,
                     ConfigVersionModel.name, ConfigVersionModel.version, SuiteModel.name,
                     QualitySummaryModel.set_name, column, RunModel.source)
             .where(ConfigVersionModel.name.in_(list(configs)), SuiteModel.name.in_(list(suites)),
                    column.is_not(None))
             .order_by(RunModel.started_at, RunModel.id))
    if since is not None:
        query = query.where(RunModel.started_at >= since)
    rows = [(*row[:7], quality_series_name(row[7]), *row[8:]) for row in session.execute(query)]
    if workloads is not None:
        rows = [row for row in rows if row[7] in set(workloads)]
    return rows
