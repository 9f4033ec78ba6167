"""``tracker import`` of the tracker's own JSON stores what the original run stored: the same
workloads, under the same names, with the same simulated flag, filed under the file's config
and suite; another tool's file without ``--config`` is one error that says what to pass."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.local_http import simulator_process
from tracker.cli.main import main
from tracker.results import RunResult
from tracker.store.db import open_store
from tracker.store.runs import fetch_run

ROOT = Path(__file__).resolve().parents[2]
MODEL = "sim/import-model"
SUITE = """\
name: import-roundtrip
workloads:
  - name: chat-c2
    prompts: {source: fixed, text: "hello there"}
    max_tokens: 3
    concurrency: 2
    num_requests: 4
  - name: chat-c1
    prompts: {source: fixed, text: "hello"}
    max_tokens: 2
    concurrency: 1
    num_requests: 2
"""


@pytest.fixture(scope="module")
def sim_server() -> Iterator[str]:
    """``python -m tracker.sim`` on a free port, as a user starts it."""
    with simulator_process(MODEL) as url:
        yield url


def _stored(db: str, run_id: int) -> RunResult:
    engine = open_store(db)
    try:
        with Session(engine) as session:
            return fetch_run(session, run_id)
    finally:
        engine.dispose()


def _import(path: Path, db: str, capsys: pytest.CaptureFixture[str], *flags: str) -> int:
    assert main(["import", str(path), "--db", db, *flags]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    return int(out.split(":", 1)[0].removeprefix("run "))


def _same_run(original: RunResult, imported: RunResult) -> None:
    assert [w.name for w in imported.workloads] == [w.name for w in original.workloads]
    assert imported.simulated is original.simulated
    assert (imported.config.name, imported.suite.name) == \
        (original.config.name, original.suite.name)
    for before, after in zip(original.workloads, imported.workloads, strict=True):
        assert (after.concurrency, after.num_requests) == (before.concurrency,
                                                           before.num_requests)
        assert (after.summary.completed, after.summary.total_output_tokens) == \
            (before.summary.completed, before.summary.total_output_tokens)
        assert before.summary.ttft is not None and after.summary.ttft is not None
        assert after.summary.ttft.p99_s == pytest.approx(before.summary.ttft.p99_s)


def test_import_of_run_and_show_json_stores_the_same_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite, out, shown = tmp_path / "suite.yaml", tmp_path / "run.json", tmp_path / "show.json"
    suite.write_text(SUITE, encoding="utf-8")
    source_db, db = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    assert main(["run", "--config", str(ROOT / "configs/sim-default.yaml"), "--suite",
                 str(suite), "--db", source_db, "--json", str(out), "--quiet"]) == 0
    capsys.readouterr()
    original = _stored(source_db, json.loads(out.read_text(encoding="utf-8"))["run_id"])
    assert original.simulated and [w.name for w in original.workloads] == ["chat-c2", "chat-c1"]

    _same_run(original, _stored(db, _import(out, db, capsys)))
    assert main(["show", str(original.run_id), "--db", source_db, "--json", str(shown)]) == 0
    _same_run(original, _stored(db, _import(shown, f"sqlite:///{tmp_path / 'c.db'}", capsys)))


def test_import_of_bench_json_stores_its_workload_and_simulated_flag(
        sim_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, db = tmp_path / "bench.json", f"sqlite:///{tmp_path / 'b.db'}"
    assert main(["bench", "--base-url", sim_server, "--num-prompts", "5", "--random-input-len",
                 "8", "--random-output-len", "3", "--json", str(out), "--quiet"]) == 0
    capsys.readouterr()
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["simulated"] is True
    imported = _stored(db, _import(out, db, capsys))
    assert [w.name for w in imported.workloads] == ["bench"] and imported.simulated
    assert (imported.config.name, imported.suite.name) == ("adhoc", "bench")
    assert imported.workloads[0].summary.completed == data["workloads"][0]["completed"] == 5


def test_export_then_import_keeps_the_workload_name_and_simulated_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite, exported = tmp_path / "suite.yaml", tmp_path / "export.json"
    suite.write_text(SUITE, encoding="utf-8")
    source_db, db = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    assert main(["run", "--config", str(ROOT / "configs/sim-default.yaml"), "--suite",
                 str(suite), "--db", source_db, "--json", "-", "--quiet"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["export", str(run_id), "--workload", "chat-c2", "--out", str(exported),
                 "--db", source_db]) == 0
    imported = _stored(db, _import(exported, db, capsys, "--config", "sim-default"))
    assert [w.name for w in imported.workloads] == ["chat-c2"] and imported.simulated
    # without --config, the config and suite the export names (vLLM's readers ignore the key)
    other = f"sqlite:///{tmp_path / 'c.db'}"
    again = _stored(other, _import(exported, other, capsys))
    assert (again.config.name, [w.name for w in again.workloads], again.simulated) == \
        ("sim-default", ["chat-c2"], True)


def test_import_of_another_tools_file_without_config_says_what_to_pass(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [vllm_file] = sorted((ROOT / "tests/ingest/fixtures/vllm").glob("*.json"))[:1]
    code = main(["import", str(vllm_file), "--db", f"sqlite:///{tmp_path / 'b.db'}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "pass --config NAME" in err and "e.g. --config llama-8b" in err, err
