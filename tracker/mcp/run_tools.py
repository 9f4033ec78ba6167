"""A run, and a comparison judged by the one comparison policy.

``get_run`` is what `tracker show` tells of a run, as numbers with units. ``compare_runs`` and
``compare_versions`` are `tracker gate --base-run … --head-run …`: the same function
(``compare_stored_runs``: the run is the unit, the base version's history gives the noise, one
false-alarm budget over the rows), the same JSON verdict as ``tracker gate --json``, so an agent
and the CI gate never disagree. Two config versions are compared over their latest completed runs
of the history on a suite (the dashboard's Compare does the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field
from sqlalchemy.orm import Session

from tracker.errors import NotFoundError
from tracker.gate.gating import GateOptions, GateResult, compare_stored_runs
from tracker.mcp.arguments import Arguments, Name, StoredId, VersionRef
from tracker.mcp.context import ToolContext
from tracker.mcp.registry import ToolSpec
from tracker.mcp.shapes import metric_json, short, unit_of
from tracker.metrics import compute_quality_metrics, compute_run_metrics, compute_workload_metrics
from tracker.reports.gate_report import render_gate_json
from tracker.results import RunResult, WorkloadResult, compute_run_source
from tracker.store.queries import fetch_latest_run_id, fetch_previous_run_id
from tracker.store.regressions import fetch_config_version
from tracker.store.run_noise import fetch_noise_run_ids
from tracker.store.runs import fetch_run, fetch_run_warnings

RunIds = list[StoredId]


class RunId(Arguments):
    run_id: StoredId


class RunComparison(Arguments):
    base_run_ids: RunIds = Field(min_length=1, max_length=50,
                                 description="the base's stored runs (repeats of one config)")
    head_run_ids: RunIds = Field(min_length=1, max_length=50,
                                 description="the head's stored runs")


class VersionComparison(Arguments):
    config: Name = Field(description="config name")
    base_version: VersionRef = Field(description="the base version (6+ hex digits)")
    head_version: VersionRef = Field(description="the head version (6+ hex digits)")
    suite: Name = Field(description="suite name: the versions' runs on it are compared")
    max_runs: int = Field(10, ge=1, le=50, description="the latest completed runs a side")


def get_run(context: ToolContext, query: RunId) -> dict[str, Any]:
    with Session(context.engine) as session:
        run = fetch_run(session, query.run_id)
        warnings = fetch_run_warnings(session, [run.run_id]).get(run.run_id, ())
        previous = fetch_previous_run_id(session, run.run_id)
    return {
        "run_id": run.run_id, "status": run.status.value, "status_reason": run.status_reason,
        "simulated": run.simulated, "source": compute_run_source(run.environment),
        "config": {"name": run.config.name, "version": short(run.config.version)},
        "suite": {"name": run.suite.name, "version": short(run.suite.version)},
        "started_at": run.started_at, "ended_at": run.ended_at, "host": run.host,
        "workloads": [workload_json(workload, run) for workload in run.workloads],
        "quality": None if run.quality is None else {
            "set": run.quality.set_name,
            "metrics": with_units(compute_quality_metrics(run.quality))},
        "warnings": list(warnings), "previous_run_id": previous,
    }


def workload_json(workload: WorkloadResult, run: RunResult) -> dict[str, Any]:
    summary = workload.summary
    metrics = {**compute_workload_metrics(workload), **compute_run_metrics(run.environment)}
    return {"name": workload.name, "concurrency": workload.concurrency,
            "requests": workload.num_requests, "completed": summary.completed,
            "failed": summary.failed, "complete": workload.complete,
            "client_bound": workload.client_bound, "duration_s": summary.duration_s,
            "errors": dict(summary.errors), "metrics": with_units(metrics)}


def with_units(values: dict[str, float]) -> dict[str, dict[str, Any]]:
    return {name: {"value": value, "unit": unit_of(name)} for name, value in values.items()}


def compare_runs(context: ToolContext, query: RunComparison) -> dict[str, Any]:
    return judged(context, query.base_run_ids, query.head_run_ids)


def compare_versions(context: ToolContext, query: VersionComparison) -> dict[str, Any]:
    with Session(context.engine) as session:
        base = version_run_ids(session, query.config, query.base_version, query.suite,
                               query.max_runs)
        head = version_run_ids(session, query.config, query.head_version, query.suite,
                               query.max_runs)
    return judged(context, base, head)


def version_run_ids(session: Session, config: str, ref: str, suite: str, limit: int
                    ) -> list[int]:
    """The latest completed runs of the history of ``config@ref`` on ``suite`` (on the suite
    version and host of its latest run), oldest first."""
    name, row = fetch_config_version(session, f"{config}@{ref}")
    latest = fetch_latest_run_id(session, name, row.version, suite)
    if latest is None:
        raise NotFoundError(f"{name}@{row.short_version}: no run on suite {suite!r}; list the "
                            "config's versions and their runs with config_versions")
    run = fetch_run(session, latest)
    ids = fetch_noise_run_ids(session, row.version, run.suite.version, host=run.host,
                              limit=limit)
    if not ids:
        raise NotFoundError(f"{name}@{row.short_version}: no completed run of the history on "
                            f"suite {suite!r} (its latest, run {latest}, is "
                            f"{run.status.value}); nothing to compare")
    return sorted(ids)


def judged(context: ToolContext, base: Sequence[int], head: Sequence[int]) -> dict[str, Any]:
    result = compare_stored_runs(context.engine, base, head, GateOptions())
    verdict = render_gate_json(result)
    verdict["summary"] = summarise(result)
    verdict["metrics"] = {row.metric: metric_json(row.metric) for row in result.rows}
    verdict["same_as"] = "tracker gate " + " ".join(
        [*(f"--base-run {i}" for i in base), *(f"--head-run {i}" for i in head)])
    return verdict


def summarise(result: GateResult) -> str:
    regressed = [f"{row.workload} {row.label}" for row in result.rows if row.regressed]
    found = f": {', '.join(regressed)} regressed" if regressed else ""
    return (f"{result.outcome.value} (exit code {result.exit_code}) for {result.head_label} "
            f"against {result.base_label} on {result.suite}{found}")


TOOLS = (
    ToolSpec("get_run", "One run",
             "A stored run: its config and suite versions, status, host, and each workload's "
             "metrics with their units (what `tracker show` prints), the quality set's accuracy, "
             "measurement warnings and the previous run of the same config and suite.",
             RunId, get_run),
    ToolSpec("compare_runs", "Compare stored runs",
             "Judge head runs against base runs by the one comparison policy, exactly as "
             "`tracker gate --base-run … --head-run …` does (same JSON verdict: outcome, exit "
             "code, a row per workload and metric with the relative change, its interval and "
             "the outcome, the config diff).", RunComparison, compare_runs),
    ToolSpec("compare_versions", "Compare two config versions",
             "Judge two versions of a config on a suite by the one comparison policy over each "
             "version's latest completed runs of the history; the verdict names the runs and "
             "the equivalent `tracker gate` command.", VersionComparison, compare_versions),
)
