"""Save and fetch a run's quality: its items' answers and scores, and the drift of its answers.

Every function takes a Session, and the caller owns the transaction. Rows stay in here: callers
get ``tracker.results`` values.

The drift of a run's answers is computed when its quality is saved, against the baseline run:
the one given, or else the latest earlier *completed* run of the same suite name and config name
that answered the same quality set. ``find_quality_to_reuse`` finds the run of the night whose
answers a run copies instead of asking again.
"""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from tracker.errors import NotFoundError
from tracker.quality.accuracy import compute_drift
from tracker.results import QualityItemResult, QualityResult, RunStatus
from tracker.store.models import ConfigVersionModel, RunModel, SuiteModel
from tracker.store.models_quality import QualityItemModel, QualitySummaryModel


def find_quality_baseline(session: Session, run_id: int, set_name: str) -> int | None:
    """The latest earlier completed run of the same suite and config names with this set."""
    run = session.get(RunModel, run_id)
    if run is None:
        raise NotFoundError(f"run {run_id} not found; list runs with `tracker runs`")
    config_name = session.scalar(select(ConfigVersionModel.name)
                                 .where(ConfigVersionModel.id == run.config_version_id))
    suite_name = session.scalar(select(SuiteModel.name).where(SuiteModel.id == run.suite_id))
    found = session.scalar(
        select(RunModel.id)
        .join(ConfigVersionModel, RunModel.config_version_id == ConfigVersionModel.id)
        .join(SuiteModel, RunModel.suite_id == SuiteModel.id)
        .join(QualitySummaryModel, QualitySummaryModel.run_id == RunModel.id)
        .where(ConfigVersionModel.name == config_name, SuiteModel.name == suite_name,
               RunModel.status == RunStatus.COMPLETED.value, RunModel.id != run_id,
               RunModel.started_at <= run.started_at, QualitySummaryModel.set_name == set_name)
        .order_by(RunModel.started_at.desc(), RunModel.id.desc())
        .limit(1)
    )
    return found


def fetch_quality_answers(session: Session, run_id: int) -> dict[str, str | None]:
    rows = session.execute(select(QualityItemModel.item_id, QualityItemModel.output)
                           .where(QualityItemModel.run_id == run_id))
    return {item_id: output for item_id, output in rows}


def find_quality_to_reuse(session: Session, run_id: int, set_version: str) -> int | None:
    """The run whose answers ``run_id`` may reuse: the first run of the same config version and
    suite version begun the same UTC day that asked these items itself (``set_version``) and got
    an answer to every one (a failed request is not copied into every later run of the night)."""
    run = session.get(RunModel, run_id)
    if run is None:
        raise NotFoundError(f"run {run_id} not found; list runs with `tracker runs`")
    day = run.started_at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return session.scalar(
        select(RunModel.id)
        .join(QualitySummaryModel, QualitySummaryModel.run_id == RunModel.id)
        .where(RunModel.config_version_id == run.config_version_id,
               RunModel.suite_id == run.suite_id, RunModel.id != run_id,
               RunModel.started_at >= day, RunModel.started_at < day + timedelta(days=1),
               QualitySummaryModel.set_version == set_version,
               QualitySummaryModel.reused_from_run_id.is_(None),
               QualitySummaryModel.answered == QualitySummaryModel.items)
        .order_by(RunModel.started_at, RunModel.id)
        .limit(1))


def save_quality(session: Session, run_id: int, result: QualityResult,
                 baseline_run_id: int | None = None) -> QualityResult:
    """Store a run's quality with its drift from the baseline run and return what was stored. A
    result reused from another run (``reused_from_run_id``) keeps that run's drift."""
    baseline = baseline_run_id or find_quality_baseline(session, run_id, result.set_name)
    if baseline is not None and result.reused_from_run_id is None:
        result = compute_drift(result, fetch_quality_answers(session, baseline), baseline)
    session.add(QualitySummaryModel(
        run_id=run_id, set_name=result.set_name, set_version=result.set_version,
        items=len(result.items), answered=result.answered, correct=result.correct,
        accuracy=result.accuracy, accuracy_ci_low=result.accuracy_ci_low,
        accuracy_ci_high=result.accuracy_ci_high, drift=result.drift,
        drift_baseline_run_id=result.drift_baseline_run_id,
        drift_compared=result.drift_compared, reused_from_run_id=result.reused_from_run_id))
    if result.items:
        session.execute(insert(QualityItemModel), [_item_values(run_id, i, item)
                                                   for i, item in enumerate(result.items)])
    session.flush()
    return result


def _item_values(run_id: int, position: int, item: QualityItemResult) -> dict[str, Any]:
    return {"run_id": run_id, "position": position, "item_id": item.item_id,
            "scorer": item.scorer, "output": item.output, "score": item.score,
            "error": item.error, "changed": item.changed}


def fetch_quality(session: Session, run_id: int) -> QualityResult | None:
    head = session.get(QualitySummaryModel, run_id)
    if head is None:
        return None
    rows = session.scalars(select(QualityItemModel).where(QualityItemModel.run_id == run_id)
                           .order_by(QualityItemModel.position))
    items = tuple(QualityItemResult(r.item_id, r.scorer, r.output, r.score, r.error, r.changed)
                  for r in rows)
    return QualityResult(
        set_name=head.set_name, set_version=head.set_version, items=items,
        answered=head.answered, correct=head.correct, accuracy=head.accuracy,
        accuracy_ci_low=head.accuracy_ci_low, accuracy_ci_high=head.accuracy_ci_high,
        drift=head.drift, drift_baseline_run_id=head.drift_baseline_run_id,
        drift_compared=head.drift_compared, reused_from_run_id=head.reused_from_run_id)
