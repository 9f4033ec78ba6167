"""What regressed: the regression records the nightly watch stored, as the analysis judged them.

A record exists only where the nightly monitor's test found a step that persists (a change point,
not noise at its false-alarm rate). It carries the two levels (the last good config version's runs
against the runs since), the relative change with its interval, the direction, the attribution the
watch wrote, and its triage. Here each record also gets its change point's place in the series
and, when it sits on a config-version boundary (the attribution's window), the one config diff
between the two versions, field by field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field
from sqlalchemy.orm import Session

from tracker.errors import NotFoundError
from tracker.inputs.config_diff import compute_config_diff
from tracker.mcp.arguments import Arguments, MetricName, Name, StoredId, UtcTime
from tracker.mcp.context import ToolContext
from tracker.mcp.record_series import RecordSeries
from tracker.mcp.registry import ToolSpec
from tracker.mcp.shapes import changes_json, metric_json, percent, short, shown
from tracker.scheduling.nightly_bisect import find_boundary
from tracker.store.regressions import (
    RegressionRecord,
    RegressionStatus,
    SeriesPoint,
    fetch_regression,
    fetch_regressions,
)

RECORDS_SCANNED = 10_000  # per status: the most records a filter looks through
KINDS = {True: "regression", False: "improvement", None: "change"}
Status = Literal["open", "acknowledged", "fixed", "expected", "improvement"]


class RegressionQuery(Arguments):
    config: Name | None = Field(None, description="config name, e.g. demo-chat")
    suite: Name | None = Field(None, description="suite name")
    workload: Name | None = Field(None, description="workload name within the suite")
    metric: MetricName | None = Field(None, description="registry name, e.g. ttft_p99_s")
    statuses: list[Status] = Field(["open", "acknowledged"], min_length=1, max_length=5,
                                   description="triage states to include")
    since: UtcTime | None = Field(None, description="detected at or after (ISO 8601, UTC)")
    until: UtcTime | None = Field(None, description="detected before (ISO 8601, UTC)")
    limit: int = Field(20, ge=1, le=50, description="the most records returned, newest first")


class RegressionId(Arguments):
    regression_id: StoredId


def list_regressions(context: ToolContext, query: RegressionQuery) -> dict[str, Any]:
    with Session(context.engine) as session:
        found = fetch_matching(session, query)
        series = RecordSeries(session)
        items = [describe_record(record, series) for record in found[:query.limit]]
    return {"regressions": items, "returned": len(items), "matching": len(found),
            "truncated": len(found) > query.limit,
            "filters": query.model_dump(mode="json", exclude_none=True)}


def fetch_matching(session: Session, query: RegressionQuery) -> list[RegressionRecord]:
    """Records of the query's statuses that pass its filters, newest first."""
    found: list[RegressionRecord] = []
    for status in dict.fromkeys(query.statuses):
        found += fetch_regressions(session, status=RegressionStatus(status),
                                   limit=RECORDS_SCANNED)
    wanted = {"config_name": query.config, "suite_name": query.suite,
              "workload": query.workload, "metric": query.metric}
    kept = [record for record in found
            if all(value is None or getattr(record.series, key) == value
                   for key, value in wanted.items())
            and (query.since is None or record.detected_at >= query.since)
            and (query.until is None or record.detected_at < query.until)]
    return sorted(kept, key=lambda record: (record.detected_at, record.id), reverse=True)


def get_regression(context: ToolContext, query: RegressionId) -> dict[str, Any]:
    with Session(context.engine) as session:
        try:
            record = fetch_regression(session, query.regression_id)
        except NotFoundError:
            raise NotFoundError(f"regression_id: no regression {query.regression_id} in the "
                                "store; list them with list_regressions") from None
        return describe_record(record, RecordSeries(session))


def describe_record(record: RegressionRecord, series: RecordSeries) -> dict[str, Any]:
    """One record as the agent reads it: where, how big, with what interval, which config
    change, and its triage."""
    points = series.points(record.series)
    index = next((i for i, p in enumerate(points) if p.run_id == record.run_id),
                 record.location_index)
    metric = metric_json(record.series.metric)
    return {
        "id": record.id, "kind": KINDS[record.regressed], "summary": summarise(record),
        "series": {"config": record.series.config_name, "suite": record.series.suite_name,
                   "workload": record.series.workload, "metric": record.series.metric},
        "metric": metric,
        "change_point": change_point_json(record, points, index),
        "before": record.before, "after": record.after, "unit": metric["unit"],
        "rel_change": record.rel_change,
        "interval": None if record.interval is None else list(record.interval),
        "interval_meaning": "each end a one-sided 95% bound of rel_change (runs as the unit)",
        "attribution": record.attribution,
        "config_diff": boundary_diff(record.series.config_name, points, index, series),
        "triage": {"status": record.status.value, "note": record.note,
                   "updated_by": record.updated_by, "updated_at": record.updated_at},
        "detected_at": record.detected_at,
    }


def change_point_json(record: RegressionRecord, points: Sequence[SeriesPoint], index: int
                      ) -> dict[str, Any]:
    """The first run of the new level and its place in the nightly series."""
    point = points[index] if 0 <= index < len(points) else None
    return {"run_id": record.run_id, "index": index, "series_length": len(points),
            "started_at": None if point is None else point.started_at,
            "config_version": None if point is None else short(point.config_version)}


def boundary_diff(config: str, points: Sequence[SeriesPoint], index: int,
                  series: RecordSeries) -> dict[str, Any] | None:
    """The config diff at the version boundary the change point sits on (within the
    attribution's window), or None when no single version change is there."""
    boundary = find_boundary(points, index) if 0 < index < len(points) else None
    if boundary is None:
        return None
    base, head = points[boundary - 1], points[boundary]
    return {"base_version": short(base.config_version),
            "head_version": short(head.config_version),
            "first_head_run_id": head.run_id,
            "changes": changes_json(compute_config_diff(
                series.body(config, base.config_version),
                series.body(config, head.config_version)))}


def summarise(record: RegressionRecord) -> str:
    """One line: the series, the kind, the change with its interval, the levels, the state."""
    metric = record.series.metric
    change = percent(record.rel_change) or "size unknown"
    if record.interval is not None:
        change += f" [{percent(record.interval[0])}, {percent(record.interval[1])}]"
    return (f"{record.series.render()}: {KINDS[record.regressed]} {change} "
            f"({shown(record.before, metric)} → {shown(record.after, metric)}) from run "
            f"{record.run_id}; {record.status.value}")


TOOLS = (
    ToolSpec("list_regressions", "What regressed",
             "The regression records the nightly watch stored (open and acknowledged by "
             "default), newest first: each with its change point (the first run of the new "
             "level), the two levels in the metric's unit, the relative change with its "
             "interval, the config diff at the version boundary it sits on, the watch's "
             "attribution and the triage state. Filter by config, suite, workload, metric, "
             "status and detection time.", RegressionQuery, list_regressions),
    ToolSpec("get_regression", "One regression record",
             "One regression record by id, shaped as list_regressions shapes each.",
             RegressionId, get_regression),
)
