"""Runs imported from other tools' result files (``tracker import``).

An imported run is a run like any other (same tables, same metrics), marked by its environment's
``import`` entry: the source tool, its version and the file's sha256. The config and suite it is
filed under are named by the user. A name the store has not seen gets a placeholder version that
says it was imported. All of one file's runs are saved in the caller's one transaction, so a
file is imported whole or not at all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

import tracker
from tracker.ingest import ImportedRun
from tracker.results import IMPORT_KEY, RunStatus
from tracker.store.models import ConfigVersionModel, RunModel, SuiteModel
from tracker.store.runs import _get_or_create, begin_run, finish_run, save_workload


def fetch_imported_run_ids(session: Session, sha256: str) -> list[int]:
    """The runs already imported from a file with this sha256, oldest first."""
    found = RunModel.environment[IMPORT_KEY]["sha256"].as_string() == sha256
    return list(session.scalars(select(RunModel.id).where(found).order_by(RunModel.id)))


def save_import_config(session: Session, name: str, tool: str) -> int:
    """The newest stored version of config ``name``. A name never seen gets an imported
    placeholder version (its body says so and names the tool)."""
    newest = session.scalar(select(ConfigVersionModel.id).where(ConfigVersionModel.name == name)
                            .order_by(ConfigVersionModel.first_seen_at.desc(),
                                      ConfigVersionModel.id.desc()).limit(1))
    if newest is not None:
        return newest
    canonical = {"name": name, "imported_from": tool}
    return _get_or_create(session, ConfigVersionModel, {
        "name": name, "version": _digest(canonical), "canonical": canonical,
        "source_path": f"(imported from {tool})"})


def save_import_suite(session: Session, name: str, tool: str,
                      workloads: Sequence[str]) -> int:
    """The newest stored version of suite ``name``. A name never seen gets a placeholder
    version listing the imported workloads (so Trends offers them)."""
    newest = session.scalar(select(SuiteModel.id).where(SuiteModel.name == name)
                            .order_by(SuiteModel.first_seen_at.desc(), SuiteModel.id.desc())
                            .limit(1))
    if newest is not None:
        return newest
    canonical = {"name": name, "imported_from": tool,
                 "workloads": [{"name": w} for w in dict.fromkeys(workloads)]}
    return _get_or_create(session, SuiteModel, {
        "name": name, "version": _digest(canonical), "canonical": canonical,
        "prompts_digest": hashlib.sha256(b"").hexdigest(),
        "source_path": f"(imported from {tool})"})


def save_imported_run(session: Session, run: ImportedRun, config_version_id: int,
                      suite_id: int) -> int:
    """Store one imported benchmark as a completed run and return its id."""
    run_id = begin_run(session, config_version_id=config_version_id, suite_id=suite_id,
                       started_at=run.started_at, host=run.host,
                       tracker_version=tracker.__version__, simulated=run.simulated,
                       environment=run.environment)
    save_workload(session, run_id, 0, run.workload)
    status = RunStatus.COMPLETED if run.workload.summary.completed else RunStatus.FAILED
    reason = None if status is RunStatus.COMPLETED else "no request completed in the file"
    finish_run(session, run_id, status, run.ended_at, reason)
    return run_id


def _digest(canonical: Mapping[str, Any]) -> str:
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
