"""The earlier runs a gate's noise prior comes from: the base config version's completed runs
of the same suite version on the same host, newest first, at most ten, none imported."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.inputs.configs import LoadedConfig, ServingConfig, build_loaded_config
from tracker.inputs.suites import LoadedSuite, Suite, build_loaded_suite
from tracker.results import RunStatus
from tracker.store import begin_run, finish_run, save_config_version, save_suite
from tracker.store.run_noise import fetch_noise_run_ids, fetch_noise_runs

T0 = datetime(2026, 11, 3, 9, 30, tzinfo=UTC)


def _config(max_num_seqs: int = 64) -> LoadedConfig:
    config = ServingConfig.model_validate({
        "name": "sim-small", "target": {"kind": "sim", "model": "sim-7b"},
        "engine": {"max_num_seqs": max_num_seqs, "block_size": 16}})
    return build_loaded_config(config, "configs/sim-small.yaml")


def _suite(requests: int = 2) -> LoadedSuite:
    suite = Suite.model_validate({"name": "smoke", "seed": 7, "workloads": [
        {"name": "short", "prompts": {"source": "synthetic", "input_tokens": 8},
         "max_tokens": 4, "concurrency": 2, "num_requests": requests}]})
    return build_loaded_suite(suite, "baselines/smoke.yaml")


def _run(engine: Engine, minute: int, *, config: LoadedConfig | None = None,
         suite: LoadedSuite | None = None, host: str = "bench-01",
         status: RunStatus = RunStatus.COMPLETED,
         environment: dict[str, object] | None = None) -> int:
    with Session(engine) as session, session.begin():
        run_id = begin_run(session, config_version_id=save_config_version(session,
                                                                          config or _config()),
                           suite_id=save_suite(session, suite or _suite()),
                           started_at=T0 + timedelta(minutes=minute), host=host,
                           tracker_version="0.1.0", simulated=True,
                           environment=environment or {})
        finish_run(session, run_id, status, T0 + timedelta(minutes=minute, seconds=30), None)
    return run_id


def test_only_completed_runs_of_the_config_and_suite_version_on_the_host_newest_first(
        store: Engine) -> None:
    wanted = [_run(store, minute) for minute in (1, 3, 2)]
    _run(store, 4, config=_config(max_num_seqs=8))  # another config version
    _run(store, 5, suite=_suite(requests=3))  # another suite version
    _run(store, 6, host="bench-02")
    _run(store, 7, status=RunStatus.FAILED)
    _run(store, 8, environment={"import": {"tool": "aiperf", "sha256": "ab" * 32}})
    with Session(store) as session:
        ids = fetch_noise_run_ids(session, _config().version, _suite().version, host="bench-01")
        anywhere = fetch_noise_run_ids(session, _config().version, _suite().version)
    assert ids == [wanted[1], wanted[2], wanted[0]]
    assert len(anywhere) == 4  # the other host's too


def test_at_most_the_last_ten_runs_come_back_whole(store: Engine) -> None:
    ids = [_run(store, minute) for minute in range(12)]
    with Session(store) as session:
        runs = fetch_noise_runs(session, _config().version, _suite().version, host="bench-01")
    assert [run.run_id for run in runs] == ids[::-1][:10]
    assert all(run.status is RunStatus.COMPLETED and run.config.version == _config().version
               for run in runs)


def test_no_earlier_runs_is_an_empty_answer(store: Engine) -> None:
    with Session(store) as session:
        assert fetch_noise_runs(session, _config().version, _suite().version) == ()
