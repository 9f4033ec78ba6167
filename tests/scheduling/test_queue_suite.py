"""A queued run runs the suite ``tracker run`` runs: the same version, its quality set included."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from tests.scheduling.conftest import ROOT, add_schedule, requests_of
from tracker.cli.main import main
from tracker.errors import ConfigError
from tracker.inputs.suites import load_suite
from tracker.quality.sets import compute_sample
from tracker.scheduling.queueing import QUALITY_SET_KEY, enqueue_schedule, load_request_inputs
from tracker.scheduling.worker import Worker, WorkerSettings
from tracker.store.db import open_store
from tracker.store.models import RunModel, SuiteModel
from tracker.store.models_scheduling import RunRequestModel
from tracker.store.quality import fetch_quality
from tracker.store.run_queue import RequestStatus, RunRequest

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
SHIPPED_SUITE = ROOT / "baselines" / "chat-short.yaml"  # asks baselines/quality/mixed-1k.jsonl

QUALITY_SUITE = """\
name: tiny-quality
workloads:
  - name: one
    prompts: {source: fixed, text: "hello"}
    max_tokens: 2
    concurrency: 1
    num_requests: 1
quality:
  path: quality/basic.jsonl
"""


@pytest.fixture
def quality_suite(tmp_path: Path) -> Path:
    """A suite whose quality set lies beside it, relative to the suite file."""
    (tmp_path / "quality").mkdir()
    shutil.copy(ROOT / "baselines" / "quality" / "basic.jsonl", tmp_path / "quality")
    path = tmp_path / "tiny-quality.yaml"
    path.write_text(QUALITY_SUITE, encoding="utf-8")
    return path


def _queue_one(engine: Engine, config: Path, suite: Path) -> RunRequest:
    add_schedule(engine, "nightly", config, suite)
    enqueue_schedule(engine, "nightly", slot=False, now=T0)
    (request,) = requests_of(engine)
    return request


def _set_suite_body(engine: Engine, request_id: int, body: dict[str, Any]) -> RunRequest:
    with Session(engine) as session, session.begin():
        session.execute(update(RunRequestModel).where(RunRequestModel.id == request_id)
                        .values(suite_body=body))
    (request,) = requests_of(engine)
    return request


def test_a_request_runs_its_quality_set_on_a_host_without_the_files(
        engine: Engine, files: dict[str, Path], quality_suite: Path) -> None:
    loaded = load_suite(quality_suite)
    request = _queue_one(engine, files["fast"], quality_suite)
    shutil.rmtree(quality_suite.parent / "quality")  # a worker on another host has neither
    quality_suite.unlink()
    _, suite = load_request_inputs(request)
    assert suite.version == loaded.version
    assert suite.quality is not None and loaded.quality is not None
    assert (suite.quality.name, suite.quality.version) == \
        (loaded.quality.name, loaded.quality.version)
    assert suite.quality.items == loaded.quality.items and len(suite.quality.items) > 10


def test_a_request_queued_without_its_quality_set_reads_it_beside_the_suite_file(
        engine: Engine, files: dict[str, Path], quality_suite: Path) -> None:
    request = _queue_one(engine, files["fast"], quality_suite)
    older = {k: v for k, v in request.suite_body.items() if k != QUALITY_SET_KEY}
    _, suite = load_request_inputs(_set_suite_body(engine, request.id, older))
    assert suite.version == load_suite(quality_suite).version
    assert suite.quality is not None


def test_a_quality_set_changed_in_the_database_after_queueing_is_refused(
        engine: Engine, files: dict[str, Path], quality_suite: Path) -> None:
    request = _queue_one(engine, files["fast"], quality_suite)
    body = dict(request.suite_body)
    stored = dict(body[QUALITY_SET_KEY])
    stored["items"] = [{**stored["items"][0], "prompt": "What is 2 + 2?"}, *stored["items"][1:]]
    tampered = _set_suite_body(engine, request.id, {**body, QUALITY_SET_KEY: stored})
    with pytest.raises(ConfigError, match=rf"request {request.id} \(tiny-quality\): the stored "
                       "quality set basic does not match its version .*queue the suite again"):
        load_request_inputs(tampered)


@pytest.mark.postgres
def test_a_worker_records_the_suite_version_and_quality_that_tracker_run_records(
        postgres_url: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--config", str(files["fast"]), "--suite", str(SHIPPED_SUITE),
                 "--db", postgres_url, "--quiet"])
    assert code == 0, capsys.readouterr().err
    engine = open_store(postgres_url)
    try:
        _queue_one(engine, files["fast"], SHIPPED_SUITE)
        settings = WorkerSettings(poll_s=0.1, exit_when_empty=True)
        assert Worker(engine, settings, emit=lambda _message: None).run() == 1
        (request,) = requests_of(engine)
        with Session(engine) as session:
            runs = session.execute(select(RunModel.id, RunModel.suite_id, RunModel.status)
                                   .order_by(RunModel.id)).all()
            versions = session.scalars(select(SuiteModel.version)).all()
            qualities = [fetch_quality(session, run_id) for run_id, _, _ in runs]
    finally:
        engine.dispose()
    assert request.status is RequestStatus.DONE and request.run_id == runs[1].id
    assert [status for _, _, status in runs] == ["completed", "completed"]
    assert runs[0].suite_id == runs[1].suite_id  # one suites row: the same version
    expected = load_suite(SHIPPED_SUITE)
    assert versions == [expected.version] and expected.quality is not None
    direct, queued = qualities
    assert direct is not None and queued is not None
    block = expected.suite.quality
    assert block is not None and block.sample is not None  # both runs ask the seeded sample
    sample = compute_sample(expected.quality, block.sample, block.seed)
    assert len(queued.items) == len(direct.items) == block.sample
    assert queued.set_version == direct.set_version == sample.version
    assert queued.reused_from_run_id == runs[0].id  # the same config version that night
