"""Work that needs a GPU is asked for, never run here: a run or a bisection goes on the run queue,
the call answers its request id at once, and ``get_request`` reads what came of it later.

A worker (``tracker worker``, one per GPU set) takes the request as it takes a schedule's: a run
from a stored config version and a suite file read now (the request carries both, as a
schedule's does, so the worker needs neither file), a bisection between two stored versions of a
config (``tracker.scheduling.nightly_bisect``: the gate, then probes over the diff's fields, the
result stored as a bisection). A bisection of a version pair is queued once, shared with the
nightly bisection's key, unless ``again`` is asked. Queueing is a write: the server must be
started with ``--allow-writes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, ValidationError
from sqlalchemy.orm import Session

from tracker.errors import ConfigError, NotFoundError
from tracker.inputs.config_diff import compute_config_diff
from tracker.inputs.configs import ServingConfig
from tracker.inputs.suites import LoadedSuite, load_suite
from tracker.mcp.arguments import Arguments, Name, StoredId, VersionRef
from tracker.mcp.context import ToolContext
from tracker.mcp.registry import ToolSpec
from tracker.mcp.shapes import short
from tracker.redaction import redact_one_line
from tracker.scheduling.nightly_bisect import BisectCandidate
from tracker.scheduling.queueing import compute_suite_body
from tracker.store.bisections import StoredBisection, fetch_bisection
from tracker.store.db import retry_when_locked
from tracker.store.listings import ConfigVersionRow
from tracker.store.regressions import fetch_config_version
from tracker.store.run_queue import (
    NewRequest,
    RequestKind,
    RunRequest,
    enqueue_job,
    enqueue_requests,
    fetch_job_request,
    fetch_request,
)
from tracker.store.runs import fetch_config_versions

Labels = dict[Name, Name]


class RunRequestArgs(Arguments):
    config: Name = Field(description="config name")
    version: VersionRef | None = Field(None, description="a stored version (default: the "
                                                         "newest)")
    suite_file: str = Field(min_length=1, max_length=4096,
                            description="the suite YAML, a path on the server's machine")
    labels: Labels = Field({}, max_length=16, description="labels a worker must carry")


class BisectionRequestArgs(Arguments):
    config: Name = Field(description="config name")
    base_version: VersionRef = Field(description="the good version (6+ hex digits)")
    head_version: VersionRef = Field(description="the version that regresses")
    suite_file: str = Field(min_length=1, max_length=4096,
                            description="the suite YAML, a path on the server's machine")
    max_probes: int = Field(8, ge=1, le=64, description="the most probe configs it runs")
    max_minutes: float | None = Field(None, gt=0, le=24 * 60, description="time budget")
    labels: Labels = Field({}, max_length=16, description="labels a worker must carry")
    again: bool = Field(False, description="queue it even if this pair was queued before")


class RequestId(Arguments):
    request_id: StoredId


def queue_run(context: ToolContext, query: RunRequestArgs) -> dict[str, Any]:
    with Session(context.engine) as session:
        name, row = resolve_version(session, query.config, query.version)
    check_body(name, row)
    suite = load_suite(query.suite_file)  # ConfigError: where, what, the fix
    request = new_request(name, row, suite, query.labels)

    def enqueue() -> list[int]:
        with Session(context.engine) as session, session.begin():
            return enqueue_requests(session, None, None, [request], datetime.now(UTC))

    (request_id,) = retry_when_locked(enqueue)
    return queued(request_id, "run", f"{name}@{row.short_version} x {suite.suite.name}")


def queue_bisection(context: ToolContext, query: BisectionRequestArgs) -> dict[str, Any]:
    with Session(context.engine) as session:
        name, base = fetch_config_version(session, f"{query.config}@{query.base_version}")
        _, head = fetch_config_version(session, f"{query.config}@{query.head_version}")
    fields = [change.path for change in compute_config_diff(base.canonical, head.canonical)]
    if not fields:
        raise ConfigError(f"{name}@{base.short_version} and @{head.short_version} do not "
                          "differ: nothing to bisect; compare them with compare_versions")
    check_body(name, base)
    check_body(name, head)
    suite = load_suite(query.suite_file)  # ConfigError: where, what, the fix
    # the nightly bisection's key: a version pair on a suite is queued once, whoever asks
    key = BisectCandidate(name, suite.suite.name, base.version, head.version, {}, {},
                          tuple(fields)).job_key
    if query.again:
        key = f"{key}:{datetime.now(UTC).isoformat()}"
    job = {"base_version": base.version, "head_version": head.version, "fields": fields,
           "regression_ids": [], "max_probes": query.max_probes,
           "max_minutes": query.max_minutes, "after_run_id": None}
    request = new_request(name, head, suite, query.labels)

    def enqueue() -> int | None:
        with Session(context.engine) as session, session.begin():
            return enqueue_job(session, None, request, RequestKind.BISECT, job, key,
                               datetime.now(UTC))

    request_id = retry_when_locked(enqueue)
    what = (f"{name}@{base.short_version} → @{head.short_version} x {suite.suite.name} over "
            f"{', '.join(fields)}")
    if request_id is None:
        return {"queued": False, "request_id": find_job(context, key), "kind": "bisect",
                "what": what, "next": "this pair was queued before (by the nightly bisection "
                "or an earlier call); read it with get_request, or pass again: true"}
    return queued(request_id, "bisect", what)


def resolve_version(session: Session, config: str, ref: str | None
                    ) -> tuple[str, ConfigVersionRow]:
    if ref is not None:
        return fetch_config_version(session, f"{config}@{ref}")
    versions = fetch_config_versions(session, config)
    if not versions:
        raise NotFoundError(f"config: no config named {config!r} in the store; list them "
                            "with list_regressions or config_versions")
    return config, versions[-1]


def check_body(name: str, row: ConfigVersionRow) -> None:
    """The stored body must still validate, or the worker would refuse it later."""
    try:
        ServingConfig.model_validate(dict(row.canonical))
    except ValidationError as exc:
        raise ConfigError(f"{name}@{row.short_version}: the stored body no longer validates "
                          f"({redact_one_line(str(exc), 200)}); queue a run of its file with "
                          "`tracker schedule run-now` instead") from None


def new_request(name: str, row: ConfigVersionRow, suite: LoadedSuite,
                labels: Mapping[str, str]) -> NewRequest:
    return NewRequest(position=0, config_name=name,
                      config_path=f"{name}@{row.short_version} (stored version)",
                      config_body=dict(row.canonical), suite_name=suite.suite.name,
                      suite_path=suite.path, suite_body=compute_suite_body(suite),
                      labels=dict(labels))


def queued(request_id: int, kind: str, what: str) -> dict[str, Any]:
    return {"queued": True, "request_id": request_id, "kind": kind, "what": what,
            "next": "a worker takes it (tracker worker, with the labels asked); read the "
                    "result with get_request"}


def find_job(context: ToolContext, key: str) -> int | None:
    with Session(context.engine) as session:
        request = fetch_job_request(session, key)
        return None if request is None else request.id


def get_request(context: ToolContext, query: RequestId) -> dict[str, Any]:
    with Session(context.engine) as session:
        request = fetch_request(session, query.request_id)
        if request is None:
            raise NotFoundError(f"request_id: no request {query.request_id} on the run queue; "
                                "queue_run and queue_bisection answer the ids they queue")
        bisection = None if request.bisection_id is None else fetch_bisection(
            session, request.bisection_id)
    return request_json(request, bisection)


def request_json(request: RunRequest, bisection: StoredBisection | None) -> dict[str, Any]:
    return {
        "request_id": request.id, "kind": request.kind.value, "status": request.status.value,
        "config": request.config_name, "suite": request.suite_name,
        "labels": dict(request.labels), "attempts": request.attempts,
        "worker_id": request.worker_id, "enqueued_at": request.enqueued_at,
        "claimed_at": request.claimed_at, "finished_at": request.finished_at,
        "error": request.error, "run_id": request.run_id,
        "bisection": None if bisection is None else bisection_json(bisection),
        "next": NEXT[request.status.value],
    }


NEXT = {
    "queued": "waiting for a worker whose labels match (tracker worker --labels …)",
    "running": "a worker is on it; ask again later",
    "done": "finished: a run's numbers with get_run, a bisection's culprits here",
    "failed": "failed: the error says why",
}


def bisection_json(bisection: StoredBisection) -> dict[str, Any]:
    culprits = [dict(culprit) for culprit in bisection.culprits]
    named = "; ".join(" + ".join(c.get("fields", [])) for c in culprits) or "none"
    return {"bisection_id": bisection.bisection_id, "outcome": bisection.outcome,
            "summary": f"{bisection.outcome}: culprits {named} ({bisection.stop_reason})",
            "base_version": short(bisection.base_version),
            "head_version": short(bisection.head_version),
            "row": {"workload": bisection.workload, "metric": bisection.metric},
            "culprits": culprits, "probes": [dict(probe) for probe in bisection.probes],
            "stop_reason": bisection.stop_reason, "created_at": bisection.created_at,
            "run_ids": [{"probe": probe, "role": role, "run_id": run_id}
                        for probe, role, run_id in bisection.runs]}


TOOLS = (
    ToolSpec("queue_run", "Queue a run",
             "Queue one run of a stored config version (default: the newest) on a suite file, "
             "for a worker to run on its GPUs; answers the request id at once (read it later "
             "with get_request).", RunRequestArgs, queue_run, writes=True),
    ToolSpec("queue_bisection", "Queue a bisection",
             "Queue a bisection between two stored versions of a config on a suite file: a "
             "worker runs the gate, then probe configs over the diff's fields, and names the "
             "field (or the pair) that regresses, with its share. Answers the request id at "
             "once (read the culprits later with get_request).", BisectionRequestArgs,
             queue_bisection, writes=True),
    ToolSpec("get_request", "A queued request's state and result",
             "A run-queue request by id: queued, running, done or failed, with the run it made "
             "or the bisection it stored (outcome, culprits with their share, probes).",
             RequestId, get_request),
)
