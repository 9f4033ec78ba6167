"""Databases for the dashboard tests: missing, empty, and filled by real `tracker run`s.

The populated database holds runs made through the CLI on the built-in simulator: config
``fast-sim`` at two versions (two runs, then a third after an engine change), ``other-sim``
once, and ``unreachable`` once, which fails because nothing listens on its port.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tracker.cli import main
from tracker.store.db import open_store
from tracker.store.regressions import SeriesKey, save_regression

FAST_SIM = """\
name: {name}
target:
  kind: sim
  model: sim/test-model
  simulator: {{seed: 1, prefill_s_per_token: 0.00001, decode_base_s: 0.001, decode_per_seq_s: 0.0}}
engine:
  max_num_seqs: {max_num_seqs}
  block_size: 16
"""

UNREACHABLE = """\
name: unreachable
target:
  kind: openai
  model: some-model
  base_url: http://127.0.0.1:9
"""

SMALL_SUITE = """\
name: small
seed: 5
workloads:
  - name: chat
    prompts: {source: synthetic, input_tokens: 32, system_prompt_tokens: 16}
    max_tokens: 8
    ignore_eos: true
    concurrency: 2
    num_requests: 12
    warmup_requests: 1
  - name: completions
    endpoint_type: completions
    prompts: {source: fixed, text: "hello there"}
    max_tokens: 4
    concurrency: 3
    num_requests: 9
"""


@dataclass(frozen=True, slots=True)
class Populated:
    url: str
    run_ids: dict[str, list[int]]  # config name -> its run ids, oldest first


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def _run(url: str, config: Path, suite: Path) -> int:
    return main(["run", "--config", str(config), "--suite", str(suite), "--db", url, "--quiet"])


REGRESSION_SERIES = SeriesKey("fast-sim", "small", "chat", "ttft_p99_s")


def _save_regression(url: str) -> None:
    """One open regression on fast-sim's chat TTFT p99, first seen in run 3 (as analysis would)."""
    engine = open_store(url)
    try:
        with Session(engine) as session, session.begin():
            save_regression(session, REGRESSION_SERIES, run_id=3, location_index=2,
                            before=0.004, after=0.005, rel_change=0.25, regressed=True,
                            attribution="config fast-sim: engine.max_num_seqs 8 -> 4")
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def populated(tmp_path_factory: pytest.TempPathFactory) -> Populated:
    directory = tmp_path_factory.mktemp("dashboard-db")
    url = f"sqlite:///{directory / 'populated.db'}"
    suite = _write(directory, "small.yaml", SMALL_SUITE)
    v1 = _write(directory, "fast-v1.yaml", FAST_SIM.format(name="fast-sim", max_num_seqs=8))
    v2 = _write(directory, "fast-v2.yaml", FAST_SIM.format(name="fast-sim", max_num_seqs=4))
    other = _write(directory, "other.yaml", FAST_SIM.format(name="other-sim", max_num_seqs=8))
    failing = _write(directory, "unreachable.yaml", UNREACHABLE)
    for config in (v1, v1, v2, other):
        assert _run(url, config, suite) == 0
    assert _run(url, failing, suite) == 3  # could not measure: stored as failed
    _save_regression(url)
    names = {1: "fast-sim", 2: "fast-sim", 3: "fast-sim", 4: "other-sim", 5: "unreachable"}
    run_ids: dict[str, list[int]] = {}
    for run_id, name in names.items():
        run_ids.setdefault(name, []).append(run_id)
    return Populated(url, run_ids)


@pytest.fixture
def missing_url(tmp_path: Path) -> str:
    """A SQLite path where no file exists yet (the dashboard must not create it)."""
    return f"sqlite:///{tmp_path / 'nothing-here.db'}"


@pytest.fixture
def empty_url(tmp_path: Path) -> str:
    """A database at the newest schema with no runs."""
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    open_store(url).dispose()
    return url
