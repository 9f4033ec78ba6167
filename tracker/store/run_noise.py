"""Earlier runs of one config version: what the sequential gate's run-to-run noise prior is
taken from.

``fetch_noise_runs`` returns the last completed runs of a config version with a suite version
(on one host, when given), newest first, as ``tracker.results`` values: ORM rows stay here.
Runs imported from another tool (``tracker import``: an ``import`` entry in the environment)
are left out: other definitions, another client, not this config's run-to-run noise.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.results import NATIVE_SOURCE, RunResult, RunStatus
from tracker.store.models import ConfigVersionModel, RunModel, SuiteModel
from tracker.store.runs import fetch_run

NOISE_RUNS = 10  # the most earlier runs a prior is taken from


def fetch_noise_run_ids(session: Session, config_version: str, suite_version: str, *,
                        host: str | None = None, limit: int = NOISE_RUNS) -> list[int]:
    """The ids of the last ``limit`` completed runs of the config version (its sha256) with the
    suite version, newest first, imported runs left out, and only runs of ``host`` when it is
    given."""
    query = (
        select(RunModel.id)
        .join(ConfigVersionModel, RunModel.config_version_id == ConfigVersionModel.id)
        .join(SuiteModel, RunModel.suite_id == SuiteModel.id)
        .where(ConfigVersionModel.version == config_version,
               SuiteModel.version == suite_version,
               RunModel.status == RunStatus.COMPLETED.value,
               RunModel.source == NATIVE_SOURCE)
        .order_by(RunModel.started_at.desc(), RunModel.id.desc())
        .limit(limit)
    )
    if host is not None:
        query = query.where(RunModel.host == host)
    return list(session.scalars(query))


def fetch_noise_runs(session: Session, config_version: str, suite_version: str, *,
                     host: str | None = None, limit: int = NOISE_RUNS) -> tuple[RunResult, ...]:
    """Those runs, whole (workloads and request records), newest first."""
    ids = fetch_noise_run_ids(session, config_version, suite_version, host=host, limit=limit)
    return tuple(fetch_run(session, run_id) for run_id in ids)
