"""The nightly series behind regression records, read for many records at once.

A record's change point is placed in its series (the watch's: the completed runs of the history,
a gate's, a bisection's and imported runs left out) and, where a config version begins within
the attribution's window of it, the config diff at that boundary is taken from the two versions'
bodies. The series of a config, suite and metric is read for every workload in one query
(``fetch_trend``, without the body and environment each point of ``fetch_metric_series``
carries), and each config's bodies once (``fetch_config_bodies``): on a year of history a page of
records costs a query per config x suite x metric, not a decoded history per record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from tracker.results import NATIVE_SOURCE, RunStatus
from tracker.store.queries import fetch_config_bodies, fetch_trend
from tracker.store.regressions import SeriesKey, SeriesPoint

Group = tuple[str, str, str]  # config, suite, metric


class RecordSeries:
    """Series and config bodies read on demand for one session, each once."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._series: dict[Group, dict[str, list[SeriesPoint]]] = {}
        self._bodies: dict[str, dict[str, Mapping[str, Any]]] = {}

    def points(self, key: SeriesKey) -> list[SeriesPoint]:
        """The series' points, oldest first. Their bodies and environments are left empty."""
        group = (key.config_name, key.suite_name, key.metric)
        if group not in self._series:
            self._series[group] = self._read(group)
        return self._series[group].get(key.workload, [])

    def body(self, config: str, version: str) -> Mapping[str, Any]:
        if config not in self._bodies:
            self._bodies[config] = fetch_config_bodies(self.session, config)
        return self._bodies[config].get(version, {})

    def _read(self, group: Group) -> dict[str, list[SeriesPoint]]:
        config, suite, metric = group
        frame = fetch_trend(self.session, metric, configs=[config], suites=[suite])
        kept = frame[(frame["status"] == RunStatus.COMPLETED.value)
                     & (frame["source"] == NATIVE_SOURCE)]
        columns = ("workload", "run_id", "started_at", "value", "config_version")
        series: dict[str, list[SeriesPoint]] = {}
        for workload, run_id, started_at, value, version in zip(
                *(kept[column].tolist() for column in columns), strict=True):
            point = SeriesPoint(int(run_id), started_at.to_pydatetime(), float(value),
                                str(version), {}, "", {})
            series.setdefault(str(workload), []).append(point)
        return series
