"""A metric's trend, as numbers: the nightly series with its change points and version boundaries.

The series is the watch's own (``fetch_metric_series``: the completed runs of the history, a
gate's, a bisection's and imported runs left out), so a point's ``index`` is the one a
regression record's ``location_index`` counts in. Its change points are the records the watch
stored, then the detector's own reading of the whole series (``detect_change_points``, as the
dashboard's Trends draws them) where no record sits within the monitor's tolerance. A version
boundary is the first run of a new config version, with the config diff from the one before.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import Field
from sqlalchemy.orm import Session

from tracker.analysis import detect_change_points
from tracker.analysis.changepoints import DEFAULT_MIN_REL_CHANGE
from tracker.analysis.monitor import DEFAULT_TOLERANCE
from tracker.errors import NotFoundError
from tracker.inputs.config_diff import compute_config_diff
from tracker.mcp.arguments import Arguments, MetricName, Name, UtcTime
from tracker.mcp.context import ToolContext
from tracker.mcp.registry import ToolSpec
from tracker.mcp.shapes import changes_json, metric_json, short
from tracker.metrics import REGISTRY
from tracker.store.queries import fetch_trend_options
from tracker.store.regressions import (
    RegressionRecord,
    SeriesKey,
    SeriesPoint,
    fetch_metric_series,
    fetch_regressions,
)

MAX_SERIES = 12  # workloads in one answer; more: name one
RECORDS_SCANNED = 1000
POINT_COLUMNS = ["index", "run_id", "started_at", "value", "config_version"]
KINDS = {True: "regression", False: "improvement", None: "change"}


class SeriesQuery(Arguments):
    config: Name = Field(description="config name")
    suite: Name = Field(description="suite name")
    metric: MetricName = Field(description="registry name, e.g. tpot_median_s")
    workload: Name | None = Field(None, description="one workload (default: every workload "
                                                    "of the suite)")
    since: UtcTime | None = Field(None, description="runs started at or after (ISO 8601, UTC)")
    until: UtcTime | None = Field(None, description="runs started before (ISO 8601, UTC)")
    max_points: int = Field(400, ge=1, le=5000, description="the newest points kept per series")


def get_series(context: ToolContext, query: SeriesQuery) -> dict[str, Any]:
    with Session(context.engine) as session:
        workloads = resolve_workloads(session, query)
        series = [describe_series(session, SeriesKey(query.config, query.suite, name,
                                                     query.metric), query)
                  for name in workloads]
    return {"config": query.config, "suite": query.suite, "metric": metric_json(query.metric),
            "series": series,
            "point_columns": POINT_COLUMNS,
            "notes": "value in the metric's unit; index: the run's place in the nightly series "
                     "(what a regression record's location counts); a detected change point has "
                     "no record (the watch does not follow that series, or it is new)"}


def resolve_workloads(session: Session, query: SeriesQuery) -> list[str]:
    """The workloads asked for, checked against the store (a name it does not hold is an
    error that lists the names it does)."""
    options = fetch_trend_options(session)
    if query.config not in options.configs:
        raise NotFoundError(f"config: no config named {query.config!r} in the store; it holds "
                            f"{_listed(options.configs)}")
    if query.suite not in options.suites:
        raise NotFoundError(f"suite: no suite named {query.suite!r} in the store; it holds "
                            f"{_listed(options.suites)}")
    known = list(options.workloads.get(query.suite, ()))
    if query.workload is not None:
        if query.workload not in known:
            raise NotFoundError(f"workload: suite {query.suite} has no workload "
                                f"{query.workload!r}; it has {_listed(known)}")
        return [query.workload]
    if len(known) > MAX_SERIES:
        raise NotFoundError(f"workload: suite {query.suite} has {len(known)} workloads, more "
                            f"than {MAX_SERIES} series in one answer; name one of "
                            f"{_listed(known)}")
    return known


def _listed(names: Sequence[str], most: int = 20) -> str:
    if not names:
        return "none"
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def describe_series(session: Session, key: SeriesKey, query: SeriesQuery) -> dict[str, Any]:
    points = fetch_metric_series(session, key)
    window = [i for i, p in enumerate(points) if _within(p.started_at, query.since, query.until)]
    kept = window[-query.max_points:]
    shown_at = set(kept)
    records = fetch_regressions(session, series=key, limit=RECORDS_SCANNED)
    changes = [*recorded_points(records, points), *detected_points(points, records, key.metric)]
    return {
        "workload": key.workload,
        "points": [[i, points[i].run_id, points[i].started_at, points[i].value,
                    short(points[i].config_version)] for i in kept],
        "series_length": len(points), "returned": len(kept),
        "truncated": len(kept) < len(window),
        "version_boundaries": [b for b in version_boundaries(points) if b["index"] in shown_at],
        "change_points": [c for c in changes if c["index"] is None or c["index"] in shown_at],
    }


def _within(moment: datetime, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or moment >= since) and (until is None or moment < until)


def version_boundaries(points: Sequence[SeriesPoint]) -> list[dict[str, Any]]:
    """Each first run of a new config version, with the diff from the version before."""
    return [{"index": i, "run_id": points[i].run_id, "started_at": points[i].started_at,
             "from_version": short(points[i - 1].config_version),
             "to_version": short(points[i].config_version),
             "changes": changes_json(compute_config_diff(points[i - 1].config_body,
                                                         points[i].config_body))}
            for i in range(1, len(points))
            if points[i].config_version != points[i - 1].config_version]


def recorded_points(records: Sequence[RegressionRecord], points: Sequence[SeriesPoint]
                    ) -> list[dict[str, Any]]:
    index_of = {point.run_id: i for i, point in enumerate(points)}
    return [{"source": "record", "regression_id": r.id, "kind": KINDS[r.regressed],
             "status": r.status.value,
             "index": index_of.get(r.run_id) if r.run_id is not None else None,
             "run_id": r.run_id, "before": r.before, "after": r.after,
             "rel_change": r.rel_change,
             "interval": None if r.interval is None else list(r.interval)}
            for r in sorted(records, key=lambda record: record.location_index)]


def detected_points(points: Sequence[SeriesPoint], records: Sequence[RegressionRecord],
                    metric: str) -> list[dict[str, Any]]:
    """The detector's change points of the whole series that no record holds."""
    found = REGISTRY[metric]
    values = [point.value for point in points]
    held = {i for i, p in enumerate(points) if p.run_id in {r.run_id for r in records}}
    held |= {r.location_index for r in records if r.run_id is None}
    smallest = 0.0 if found.bit_constant else DEFAULT_MIN_REL_CHANGE
    detected = detect_change_points(values, lower_is_better=found.lower_is_better,
                                    min_rel_change=smallest) if len(values) > 1 else []
    return [{"source": "detected", "kind": KINDS[None if c.after == c.before
                                                 else found.is_worse(c.before, c.after)],
             "index": c.index, "run_id": points[c.index].run_id, "before": c.before,
             "after": c.after, "rel_change": c.rel_change, "p_value": c.p_value}
            for c in detected
            if not any(abs(c.index - at) <= DEFAULT_TOLERANCE for at in held)]


TOOLS = (
    ToolSpec("get_series", "A metric's trend",
             "One metric of a config on a suite over time, as numbers: every completed nightly "
             "run's value (in the metric's unit) with its config version, the version "
             "boundaries with the config diff at each, and the change points: the regression "
             "records the watch stored, and the detector's own where no record is. One series "
             "per workload (or name one).", SeriesQuery, get_series),
)
