"""The whole slice through the CLI: config + suite -> simulator -> load generator -> store -> JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.demo_run import DEMO_TIMEOUT_S, run_demo_once
from tests.simconfigs import FAST_SIM
from tracker.cli.demo_command import find_demo_data_db
from tracker.cli.main import main
from tracker.store.db import open_store
from tracker.store.runs import fetch_config_versions, fetch_run, fetch_runs

ROOT = Path(__file__).resolve().parents[2]


SMALL_SUITE = """\
name: small
seed: 5
workloads:
  - name: chat
    prompts: {source: synthetic, input_tokens: 32, system_prompt_tokens: 16}
    max_tokens: 8
    ignore_eos: true
    concurrency: 2
    num_requests: 6
    warmup_requests: 1
  - name: completions
    endpoint_type: completions
    prompts: {source: fixed, text: "hello there"}
    max_tokens: 4
    concurrency: 3
    num_requests: 6
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    config = tmp_path / "sim.yaml"
    config.write_text(FAST_SIM, encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SMALL_SUITE, encoding="utf-8")
    return {"config": config, "suite": suite, "dir": tmp_path}


def run_cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


def test_run_writes_the_result_json(files: dict[str, Path], db_url: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "out.json"
    code = run_cli("run", "--config", files["config"], "--suite", files["suite"], "--db", db_url,
                   "--json", out, "--quiet")
    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["schema"] == "tracker.run/1"
    assert result["status"] == "completed" and result["simulated"] is True
    assert result["config"]["name"] == "fast-sim" and len(result["config"]["version"]) == 64
    assert result["suite"]["name"] == "small"
    assert result["environment"]["python"]
    chat, completions = result["workloads"]
    assert (chat["name"], chat["concurrency"], chat["completed"], chat["failed"]) == \
        ("chat", 2, 6, 0)
    assert chat["total_output_tokens"] == 6 * 8  # ignore_eos: exactly max_tokens each
    assert chat["output_tokens_source"] == "usage"
    for key in ("duration", "total_input_tokens", "request_throughput", "output_throughput",
                "total_token_throughput", "mean_ttft_ms", "median_tpot_ms", "std_itl_ms",
                "p90_e2el_ms", "p99_ttft_ms"):
        assert isinstance(chat[key], int | float), key
    assert chat["p99_ttft_ms"] >= chat["median_ttft_ms"] > 0
    assert completions["completed"] == 6
    printed = capsys.readouterr().out
    assert "[SIMULATED]" in printed and "chat" in printed


def test_equal_configs_share_a_version_and_a_changed_arg_makes_a_new_one(
    files: dict[str, Path], db_url: str
) -> None:
    reordered = files["dir"] / "reordered.yaml"
    reordered.write_text(
        "engine: {block_size: 16, max_num_seqs: 8}\n"
        "target:\n  model: sim/test-model\n  kind: sim\n"
        "  simulator: {decode_per_seq_s: 0.0, decode_base_s: 0.001, seed: 1,"
        " prefill_s_per_token: 0.00001}\nname: fast-sim\n", encoding="utf-8")
    changed = files["dir"] / "changed.yaml"
    changed.write_text(FAST_SIM.replace("max_num_seqs: 8", "max_num_seqs: 4"), encoding="utf-8")
    for config in (files["config"], reordered, changed):
        assert run_cli("run", "--config", config, "--suite", files["suite"], "--db", db_url,
                       "--quiet") == 0
    engine = open_store(db_url)
    try:
        with Session(engine) as session:
            versions = fetch_config_versions(session, "fast-sim")
            runs = fetch_runs(session, 10)
    finally:
        engine.dispose()
    assert len(versions) == 2
    assert versions[1].canonical["engine"]["max_num_seqs"] == 4
    assert [r.config_version for r in runs].count(versions[0].version) == 2


def test_runs_and_show_read_back_what_run_stored(
    files: dict[str, Path], db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("run", "--config", files["config"], "--suite", files["suite"], "--db", db_url,
                   "--quiet") == 0
    capsys.readouterr()
    assert run_cli("runs", "--db", db_url) == 0
    listing = capsys.readouterr().out
    assert "fast-sim@" in listing and "small" in listing and "completed" in listing
    run_id = int(listing.splitlines()[2].split()[0])
    assert run_cli("show", str(run_id), "--db", db_url, "--json", "-") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run_id"] == run_id and len(shown["workloads"]) == 2


def test_show_of_an_unknown_run_is_a_clear_error(
    files: dict[str, Path], db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("show", "999", "--db", db_url) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "999" in err and "tracker runs" in err


def test_a_missing_api_key_fails_before_any_run_is_recorded(
    files: dict[str, Path], db_url: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TRACKER_TEST_MISSING_KEY", raising=False)
    config = files["dir"] / "gw.yaml"
    config.write_text("name: gw\ntarget:\n  kind: openai\n  model: m\n"
                      "  base_url: http://127.0.0.1:9/api\n  api_key_env: TRACKER_TEST_MISSING_KEY\n",
                      encoding="utf-8")
    assert run_cli("run", "--config", config, "--suite", files["suite"], "--db", db_url) == 2
    assert "TRACKER_TEST_MISSING_KEY is not set" in capsys.readouterr().err
    engine = open_store(db_url)
    try:
        with Session(engine) as session:
            assert fetch_runs(session, 5) == []
    finally:
        engine.dispose()


def test_an_unreachable_target_is_recorded_as_a_failed_run(
    files: dict[str, Path], db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = files["dir"] / "dead.yaml"
    config.write_text("name: dead\ntarget:\n  kind: vllm\n  model: m\n"
                      "  base_url: http://127.0.0.1:9\n", encoding="utf-8")
    assert run_cli("run", "--config", config, "--suite", files["suite"], "--db", db_url,
                   "--quiet") == 3
    out = capsys.readouterr().out
    assert "failed" in out and "connection_refused" in out


BAD_INPUTS = {
    "missing file": (None, "not found"),
    "invalid yaml": ("name: x\ntarget: [unclosed\n", ":3: invalid YAML"),
    "unknown key": (FAST_SIM + "  max_num_seq: 3\n", "engine.max_num_seq: unknown key"),
    "wrong type": (FAST_SIM.replace("max_num_seqs: 8", "max_num_seqs: lots"),
                   "engine.max_num_seqs"),
    "literal key": (FAST_SIM.replace("  model: sim/test-model\n",
                                     "  model: sim/test-model\n  api_key: sk-live0123456789abcdef\n"),
                    "literal secret"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_one_line_and_exit_2_without_traceback(
    case: str, files: dict[str, Path], tmp_path: Path
) -> None:
    text, fragment = BAD_INPUTS[case]
    config = tmp_path / "bad.yaml"
    if text is not None:
        config.write_text(text, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "tracker", "run", "--config", str(config), "--suite",
         str(files["suite"]), "--db", str(tmp_path / "t.db")],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0]
    assert "Traceback" not in proc.stderr
    assert "0123456789abcdef" not in proc.stderr


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupt_keeps_what_was_measured_as_a_partial_run(
    tmp_path: Path, signum: signal.Signals
) -> None:
    slow = tmp_path / "slow.yaml"
    slow.write_text(FAST_SIM.replace("decode_base_s: 0.001", "decode_base_s: 0.01"),
                    encoding="utf-8")
    suite = tmp_path / "long.yaml"
    suite.write_text(SMALL_SUITE.replace("warmup_requests: 1\n  - name: completions",
                                         "warmup_requests: 1\n  - name: long\n"
                                         "    prompts: {source: fixed, text: hi}\n"
                                         "    max_tokens: 100\n    ignore_eos: true\n"
                                         "    concurrency: 1\n    num_requests: 100\n"
                                         "  - name: completions"), encoding="utf-8")
    db = tmp_path / "t.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracker", "run", "--config", str(slow), "--suite", str(suite),
         "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"},
        preexec_fn=_default_signals)  # a shell's background job would otherwise ignore SIGINT
    assert proc.stderr is not None and "name: long" in suite.read_text(encoding="utf-8")
    deadline = time.monotonic() + 60
    seen = ""
    while "[2/3] long" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.readline()
    time.sleep(2.5)  # about two of the 1 s requests complete
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"tracker run did not stop on {signum.name}:\n{err}")
    assert proc.returncode == 130, err
    assert "kept as partial" in err and "Traceback" not in err
    engine = open_store(f"sqlite:///{db}")
    try:
        with Session(engine) as session:
            run = fetch_run(session, fetch_runs(session, 1)[0].run_id)
    finally:
        engine.dispose()
    assert run.status.value == "partial"
    assert [w.name for w in run.workloads] == ["chat", "long"]
    assert run.workloads[0].complete and not run.workloads[1].complete
    assert 0 < run.workloads[1].summary.completed < 100


def test_demo_from_an_empty_directory_stores_its_story_beside_the_default_database(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    demo = run_demo_once(tmp_path_factory)  # `python -m tracker demo` in an empty directory
    assert demo.returncode == 0, demo.stderr
    folder = Path(demo.folder)
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("tracker.db-")) \
        == ["tracker-demo-gate.md", "tracker.db"]  # the defaults: ./tracker.db, the report beside
    engine = open_store(demo.db_url)
    try:
        with Session(engine) as session:
            runs = fetch_runs(session, 1000)
    finally:
        engine.dispose()
    assert {r.suite_name for r in runs} == {"demo-load"}
    assert all(r.status.value == "completed" and r.simulated and r.failed == 0 for r in runs)
    assert all(r.completed == 48 for r in runs)  # every request of the suite's one workload
    assert f"The story, in sqlite:///tracker.db: {len(runs)} simulated runs of demo-chat on " \
           "demo-load" in demo.stdout
    assert demo.stderr == ""


def test_the_demo_inside_a_git_work_tree_keeps_its_story_in_the_data_directory(
    tmp_path: Path
) -> None:
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)  # what find_work_tree looks for, as git init makes
    (checkout / "sub").mkdir()
    data = tmp_path / "data"
    env = {key: value for key, value in os.environ.items() if key != "TRACKER_DB_URL"}
    first = find_demo_data_db(None, checkout / "sub", {**env, "XDG_DATA_HOME": str(data)})
    assert first == data / "tracker" / "demo" / "tracker.db"
    assert find_demo_data_db("my.db", checkout, env) is None  # --db: that database
    assert find_demo_data_db(None, checkout, {**env, "TRACKER_DB_URL": "x.db"}) is None
    assert find_demo_data_db(None, tmp_path, env) is None  # not a work tree: ./tracker.db
    first.parent.mkdir(parents=True)
    first.write_text("an older demo's file, replaced", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "tracker", "demo", "--quiet"], cwd=checkout / "sub",
                          env={**env, "XDG_DATA_HOME": str(data)}, capture_output=True, text=True,
                          timeout=DEMO_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in checkout.rglob("*")] == [".git", "sub"]  # nothing written there
    assert sorted(p.name for p in first.parent.iterdir()
                  if not p.name.startswith("tracker.db-")) == ["tracker-demo-gate.md", "tracker.db"]
    assert f"  tracker dashboard --db {first}\n" in done.stdout
    engine = open_store(f"sqlite:///{first}")
    try:
        with Session(engine) as session:
            assert {r.config_name for r in fetch_runs(session, 1000)} == {"demo-chat"}
    finally:
        engine.dispose()


def test_demo_refuses_a_gate_report_in_a_missing_directory_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.db"
    report = tmp_path / "missing" / "gate.md"
    assert run_cli("demo", "--db", db, "--gate-report", report, "--quiet") == 2
    err = capsys.readouterr().err
    assert f"error: --gate-report {report}: directory {report.parent} does not exist" in err
    assert not db.exists()


def test_a_reader_that_stops_early_is_not_an_internal_error(tmp_path: Path) -> None:
    """`tracker init DIR | head -1`: the pipe closes before the command has printed everything."""
    process = subprocess.Popen([sys.executable, "-m", "tracker", "init", str(tmp_path / "new")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the first line
    with process.stderr:
        err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0, err
    assert "internal error" not in err and "Traceback" not in err
