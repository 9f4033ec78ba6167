"""The nightly bisection: a confirmed regression at a config change of several fields queues one
bisection of the two config versions, and a worker runs it like any queued request.

After each run of a schedule whose ``bisect:`` option is enabled, ``queue_bisections`` looks at
the open regression records of the run's config x suite (the watch stored them just before): a
record whose change point sits at a config-version boundary (the first run of a new version,
within the monitor's tolerance of the estimated location, as the attribution reads it) names a
base version (the one before) and a head version (the one after). The head must be the version
the run ran (a change point further back was someone else's to bisect), and the diff of the two
stored bodies must have more than one field: one field needs no bisection, the attribution
already names it. Each (config, suite, base, head) is queued once, ever (``run_requests.job_key``
is unique), however many series regressed at that boundary and however often the watch looks.

``run_bisection_request`` runs it from the two versions' stored bodies (never from the files,
which may have changed since) and the suite as the schedule queued it: the gate, then the
probes, with the schedule's budget (``tracker.bisection.probes``). Its base and head are renamed
``NAME.probe`` (like the probes), so that the gate's base runs, version A after B's nights, are
not points of the nightly series. The bisection is stored under the series' name and versions.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.analysis.attribution import ATTRIBUTION_TOLERANCE, compute_attribution_window
from tracker.bisection.plan import BisectOutcome
from tracker.bisection.probes import (
    PROBE_SUFFIX,
    BisectBudget,
    BisectionOrigin,
    BisectResult,
    run_bisection,
)
from tracker.errors import ConfigError, MeasurementError
from tracker.gate.config_refs import ConfigSide
from tracker.gate.gating import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_MAX_ROUNDS_WITH_PRIOR,
    GateDesign,
    GateOptions,
    run_config_gate,
)
from tracker.inputs.config_diff import compute_config_diff
from tracker.inputs.configs import LoadedConfig, ServingConfig, build_loaded_config
from tracker.redaction import redact_one_line
from tracker.results import RunResult
from tracker.scheduling.queueing import load_request_inputs
from tracker.store.bisections import StoredBisection, save_bisection
from tracker.store.db import retry_when_locked
from tracker.store.regressions import (
    RegressionStatus,
    SeriesKey,
    SeriesPoint,
    fetch_config_version,
    fetch_metric_series,
    fetch_regressions,
)
from tracker.store.run_queue import NewRequest, RequestKind, RunRequest, enqueue_job
from tracker.store.schedule_rows import fetch_schedule

log = logging.getLogger(__name__)

RECORDS_SCANNED = 1000
NIGHTLY_DESIGN = GateDesign(DEFAULT_MAX_ROUNDS, rounds_with_prior=DEFAULT_MAX_ROUNDS_WITH_PRIOR)


@dataclass(frozen=True, slots=True)
class BisectCandidate:
    """A config change that a confirmed regression sits at."""

    config_name: str
    suite_name: str
    base_version: str
    head_version: str
    base_body: Mapping[str, Any]
    head_body: Mapping[str, Any]
    fields: tuple[str, ...]  # the diff's paths
    regression_ids: tuple[int, ...] = field(default=())

    @property
    def job_key(self) -> str:
        """One per config x suite x version pair (names may be long: a digest of them)."""
        text = "\0".join((self.config_name, self.suite_name, self.base_version,
                          self.head_version))
        return f"bisect:{hashlib.sha256(text.encode()).hexdigest()}"


def find_boundary(points: Sequence[SeriesPoint], index: int,
                  tolerance: int = ATTRIBUTION_TOLERANCE) -> int | None:
    """The first run of a new config version within ``tolerance`` of ``index`` (the attribution's
    window), or None where no version changes there, or more than one does (which one caused it is
    not known)."""
    found = [at for at in compute_attribution_window(index, len(points), tolerance)
             if points[at].config_version != points[at - 1].config_version]
    return found[0] if len(found) == 1 else None


def find_candidates(session: Session, run: RunResult) -> list[BisectCandidate]:
    """The config changes into ``run``'s version that an open regression of its config x suite
    sits at, one per version pair, with the records behind each."""
    records = [r for r in fetch_regressions(session, status=RegressionStatus.OPEN,
                                            limit=RECORDS_SCANNED)
               if r.regressed is True and r.series.config_name == run.config.name
               and r.series.suite_name == run.suite.name]
    series: dict[SeriesKey, list[SeriesPoint]] = {}
    found: dict[tuple[str, str], BisectCandidate] = {}
    for record in records:
        points = series.setdefault(record.series, fetch_metric_series(session, record.series))
        index = next((i for i, p in enumerate(points) if p.run_id == record.run_id),
                     record.location_index)
        boundary = find_boundary(points, index) if 0 <= index < len(points) else None
        if boundary is None or points[boundary].config_version != run.config.version:
            continue
        base, head = points[boundary - 1], points[boundary]
        key = (base.config_version, head.config_version)
        known = found.get(key)
        if known is None:
            diff = compute_config_diff(base.config_body, head.config_body)
            known = BisectCandidate(run.config.name, run.suite.name, *key, base.config_body,
                                    head.config_body, tuple(c.path for c in diff))
        found[key] = replace(known, regression_ids=(*known.regression_ids, record.id))
    return list(found.values())


def queue_bisections(engine: Engine, request: RunRequest, run: RunResult,
                     now: datetime | None = None) -> list[int]:
    """After a scheduled run: queue a bisection for each new config change with a confirmed
    regression, where the schedule enables it, and return the ids queued (none when off)."""
    if request.schedule_name is None:
        return []
    name = request.schedule_name

    def queue() -> list[int]:
        with Session(engine) as session, session.begin():
            schedule = fetch_schedule(session, name)
            if schedule is None or schedule.bisect is None or not schedule.bisect.enabled:
                return []
            ids: list[int] = []
            for candidate in find_candidates(session, run):
                if len(candidate.fields) < 2:
                    continue  # one field: the regression's attribution names it already
                job = {"base_version": candidate.base_version,
                       "head_version": candidate.head_version, "fields": list(candidate.fields),
                       "regression_ids": list(candidate.regression_ids),
                       "max_probes": schedule.bisect.max_probes,
                       "max_minutes": schedule.bisect.max_minutes, "after_run_id": run.run_id}
                queued = enqueue_job(session, name, _job_request(request, candidate),
                                     RequestKind.BISECT, job, candidate.job_key,
                                     now or datetime.now(UTC))
                if queued is not None:
                    ids.append(queued)
            return ids

    return retry_when_locked(queue)


def _job_request(request: RunRequest, candidate: BisectCandidate) -> NewRequest:
    return NewRequest(position=0, config_name=candidate.config_name,
                      config_path=request.config_path, config_body=dict(candidate.head_body),
                      suite_name=request.suite_name, suite_path=request.suite_path,
                      suite_body=dict(request.suite_body), labels=dict(request.labels))


# --- running one ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BisectJob:
    base_version: str
    head_version: str
    budget: BisectBudget


def parse_job(request: RunRequest) -> BisectJob:
    job = request.job or {}
    try:
        minutes = job.get("max_minutes")
        return BisectJob(str(job["base_version"]), str(job["head_version"]),
                         BisectBudget(int(job["max_probes"]),
                                      None if minutes is None else float(minutes)))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"request {request.id}: its bisection job is unreadable "
                          f"({type(exc).__name__}: {exc}); queue it again") from None


def load_stored_side(session: Session, config_name: str, version: str,
                     place: Callable[[LoadedConfig], LoadedConfig]) -> ConfigSide:
    """A stored config version as a bisection side, renamed ``NAME.probe`` (out of the series)."""
    name, row = fetch_config_version(session, f"{config_name}@{version}")
    label = f"{name}@{row.short_version}"
    body = {**dict(row.canonical), "name": f"{name}{PROBE_SUFFIX}"}
    try:
        config = ServingConfig.model_validate(body)
    except ValueError as exc:
        raise ConfigError(f"{label}: the stored body no longer validates "
                          f"({redact_one_line(str(exc))[:300]}); bisect the files with "
                          "`tracker bisect` instead") from None
    return ConfigSide(label, place(build_loaded_config(config, label)))


@dataclass(frozen=True, slots=True)
class NightlyBisection:
    """What a ``bisect`` request came to, as stored."""

    bisection_id: int
    outcome: str  # a BisectOutcome's value, or "failed"
    summary: str  # one line: the culprit(s), or why there is none
    row: str | None  # the failing row bisected: "busy TTFT median"
    error: str | None = None  # why it could not run (the request is marked failed with it)


def run_bisection_request(engine: Engine, request: RunRequest,
                          place: Callable[[LoadedConfig], LoadedConfig],
                          stopping: Callable[[], bool] = lambda: False) -> NightlyBisection:
    """Run the bisection a ``bisect`` request asks for and store it. One that cannot run (a
    stored version refused, a target that does not start) is stored as ``failed`` with the
    reason. ``RunInterrupted`` (a stop while probing) goes up, its probes stored."""
    job = parse_job(request)
    origin = BisectionOrigin(request.config_name, job.base_version, job.head_version)
    try:
        with Session(engine) as session:
            base = load_stored_side(session, request.config_name, job.base_version, place)
            head = load_stored_side(session, request.config_name, job.head_version, place)
        _, suite = load_request_inputs(request)
        options = GateOptions()
        gate = run_config_gate(engine, base, head, suite, NIGHTLY_DESIGN, options)
        result = run_bisection(engine, base, head, suite, gate, NIGHTLY_DESIGN, options,
                               job.budget, place=place, origin=origin, stopping=stopping)
    except (ConfigError, MeasurementError) as exc:
        reason = redact_one_line(str(exc))
        stored = save_failed_bisection(engine, origin, request.suite_name, reason)
        return NightlyBisection(stored, "failed", f"could not run: {reason}", None, reason)
    assert result.bisection_id is not None  # run_bisection stores it
    return NightlyBisection(result.bisection_id, result.outcome.value, describe_result(result),
                            result.label)


def save_failed_bisection(engine: Engine, origin: BisectionOrigin, suite_name: str,
                          reason: str) -> int:
    failed = StoredBisection(origin.config_name, suite_name, origin.base_version,
                             origin.head_version, None, None, "failed", reason, (), (),
                             datetime.now(UTC), ())
    with Session(engine) as session, session.begin():
        return save_bisection(session, failed)


def describe_result(result: BisectResult) -> str:
    """One line: the outcome and the culprit(s), as the worker's log and the alert say it."""
    culprits = "; ".join(" + ".join(c.fields) + ("" if c.share is None
                                                 else f" ({c.share * 100:.0f}% of it)")
                         for c in result.culprits)
    if result.outcome is BisectOutcome.FOUND:
        return f"culprit{'s' if len(result.culprits) > 1 else ''}: {culprits}"
    if result.outcome is BisectOutcome.NARROWED and culprits:
        return f"narrowed to {culprits} ({result.stop_reason})"
    return f"{result.outcome.value}: {result.stop_reason}"
