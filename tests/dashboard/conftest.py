"""Databases for the dashboard tests: missing, empty, and filled by real `tracker run`s.

The populated database holds runs made through the CLI on the built-in simulator: config
``fast-sim`` at two versions (two runs, then a third after an engine change), ``other-sim``
once, and ``unreachable`` once, which fails because nothing listens on its port. ``inject_outside_text``
then writes outside text into a copy the way an older tracker would have stored it: raw.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tracker.cli.main import main
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


# --- outside text, stored raw ------------------------------------------------------------------

SENTINEL = "sk-SENTINEL-dash-Zq7Wx3Kp9Lm2Vb8N"  # shaped like an OpenAI key


def markup(image_url: str) -> str:
    """Outside text that a Markdown or HTML renderer would turn into a fetch, a link, an icon
    and a formula, with a key in it."""
    return f"{named_markup(image_url)} [link](http://127.0.0.1:9/phish) :material/warning: " \
        f"$x^2$ key {SENTINEL}"


def named_markup(image_url: str) -> str:
    """The image and the tag, for names (which the URL's query string carries)."""
    return f"![x]({image_url}) <img src=\"{image_url}\">"


def inject_outside_text(populated: Populated, directory: Path, image_url: str) -> str:
    """A copy of the populated database holding ``markup(image_url)`` in every outside text
    the pages show, written with plain sqlite3 (no redaction, as an older tracker stored it):
    run 5's reason, host and request errors (its config's name gets ``named_markup``); run 3's
    environment, quality items,
    quality set and GPU reason; the regression's note and attribution; fast-sim's newest
    config body. Returns the copy's URL."""
    path = directory / "outside-text.db"
    shutil.copy(populated.url.removeprefix("sqlite:///"), path)
    text = markup(image_url)
    connection = sqlite3.connect(path)
    try:
        with connection:
            _inject(connection, text, image_url)
    finally:
        connection.close()
    return f"sqlite:///{path}"


def _inject(connection: sqlite3.Connection, text: str, image_url: str) -> None:
    execute = connection.execute
    execute("UPDATE runs SET status_reason = ?, host = ? WHERE id = 5", (f"failed: {text}", text))
    execute("UPDATE config_versions SET name = ? WHERE name = 'unreachable'",
            (f"unreachable {named_markup(image_url)}",))
    execute("UPDATE request_records SET error = ? WHERE workload_result_id IN "
            "(SELECT id FROM workload_results WHERE run_id = 5)", (text,))
    execute("UPDATE request_records SET error_class = ? WHERE id = (SELECT MIN(id) FROM "
            "request_records WHERE error IS NOT NULL)", (text,))
    (environment,) = execute("SELECT environment FROM runs WHERE id = 3").fetchone()
    execute("UPDATE runs SET environment = ? WHERE id = 3",
            (json.dumps({**json.loads(environment), "server_log": f"/var/log/{text}"}),))
    execute("UPDATE workload_telemetry SET gpu_measured = 0, gpu_reason = ? WHERE "
            "workload_result_id IN (SELECT id FROM workload_results WHERE run_id = 3)", (text,))
    execute("INSERT INTO quality_summaries (run_id, set_name, set_version, items, answered, "
            "correct, accuracy, accuracy_ci_low, accuracy_ci_high, drift, drift_baseline_run_id, "
            "drift_compared) VALUES (3, ?, 'v1', 2, 1, 1, 0.5, 0.1, 0.9, NULL, NULL, 0)",
            (f"set {text}",))
    execute("INSERT INTO quality_items (run_id, position, item_id, scorer, output, score, error, "
            "changed) VALUES (3, 0, 'q1', 'exact', ?, 1.0, NULL, NULL), "
            "(3, 1, 'q2', 'exact', NULL, NULL, ?, NULL)", (text, text))
    execute("UPDATE regressions SET note = ?, attribution = ?", (text, text))
    (canonical,) = execute("SELECT canonical FROM config_versions WHERE id = 2").fetchone()
    execute("UPDATE config_versions SET canonical = ? WHERE id = 2",
            (json.dumps({**json.loads(canonical), "served_by": text}),))
