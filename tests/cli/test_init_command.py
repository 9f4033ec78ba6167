"""`tracker init DIR` writes a starter set that loads and runs, and never overwrites a file."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.local_http import simulator_process, stop_process, wait_until_answers
from tracker.cli.init_command import STARTER_FILES
from tracker.cli.main import main
from tracker.inputs.configs import load_config
from tracker.inputs.package_data import shipped_baselines
from tracker.inputs.suites import load_suite
from tracker.scheduling.schedules import load_schedules
from tracker.store.db import DB_URL_ENV, open_store
from tracker.store.runs import fetch_runs
from tracker.targets.launcher import find_free_port

EXPECTED = sorted([
    "baselines/batch-throughput.yaml", "baselines/chat-short.yaml",
    "baselines/quality/mixed-1k.jsonl", "configs/sim-default.yaml",
    "configs/taotoken-example.yaml", "configs/vllm-launch-llama3-8b.yaml", "schedules.yaml",
    "configs/vllm-llama3-8b.yaml",
    "baselines/multi-turn-chat.yaml", "baselines/traffic/conversations.jsonl",
    "baselines/trace-replay.yaml", "baselines/traffic/mooncake-sample.jsonl",
    "baselines/traffic/azure-sample.csv",
])


def _written(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_init_writes_configs_suites_and_a_schedule_that_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "mybench"
    assert main(["init", str(root)]) == 0
    out = capsys.readouterr().out
    assert _written(root) == EXPECTED
    assert f"wrote 13 files to edit in {root}:" in out and f"  cd {root}\n" in out
    sim = load_config(root / "configs/sim-default.yaml").config
    launched = load_config(root / "configs/vllm-launch-llama3-8b.yaml").config
    gateway = load_config(root / "configs/taotoken-example.yaml").config
    assert sim.target.kind == "sim"
    assert launched.target.kind == "vllm" and launched.target.launch is not None
    assert launched.target.base_url is None  # the tracker starts it
    assert (root / "configs/vllm-launch-llama3-8b.yaml").read_text(encoding="utf-8") \
        .startswith("# A vLLM server the tracker starts itself")
    assert gateway.target.kind == "openai" and gateway.target.api_key_env == "TAOTOKEN_API_KEY"
    chat = load_suite(root / "baselines/chat-short.yaml")
    assert chat.quality is not None and len(chat.quality.items) > 0  # its set came along
    assert load_suite(root / "baselines/batch-throughput.yaml").suite.name == "batch-throughput"
    shipped = shipped_baselines()
    for name in ("multi-turn-chat.yaml", "trace-replay.yaml"):  # their data files came along
        assert load_suite(root / "baselines" / name).version == \
            load_suite(shipped / name).version
    (schedule,) = load_schedules(root / "schedules.yaml")  # the others are commented out
    assert schedule.name == "nightly-sim"
    assert schedule.configs == (str((root / "configs/sim-default.yaml").resolve()),)
    assert len(schedule.suites) == 2


def test_the_commented_schedules_load_once_uncommented(tmp_path: Path) -> None:
    """What a user gets by deleting the leading '# ' of the vLLM and gateway schedules."""
    assert main(["init", str(tmp_path)]) == 0
    path = tmp_path / "schedules.yaml"
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index("schedules:")
    path.write_text("\n".join(lines[:start + 1] + [
        line.replace("  # ", "  ", 1) if line.startswith("  # ") and not line.startswith(
            ("  # A ", "  # (")) else line for line in lines[start + 1:]]) + "\n",
        encoding="utf-8")
    rows = {row.name: row for row in load_schedules(path)}
    assert sorted(rows) == ["nightly-gateway", "nightly-sim", "nightly-vllm"]
    bisect = rows["nightly-vllm"].bisect
    assert bisect is not None and (bisect.enabled, bisect.max_probes, bisect.max_minutes) == (
        True, 12, 120.0)
    assert rows["nightly-sim"].bisect is not None and not rows["nightly-sim"].bisect.enabled


def test_init_writes_into_an_existing_directory_beside_other_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 0
    assert _written(tmp_path) == sorted([*EXPECTED, "notes.txt"])


def test_init_refuses_to_overwrite_a_file_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "schedules.yaml"
    mine.write_text("schedules: []  # mine\n", encoding="utf-8")
    assert main(["init", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (f"error: tracker init {tmp_path}: {mine} already exists and is never overwritten; "
            "move it away, or give another directory") in err
    assert mine.read_text(encoding="utf-8") == "schedules: []  # mine\n"
    assert _written(tmp_path) == ["schedules.yaml"]  # every file checked before the first write


def test_init_refuses_a_file_given_as_the_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x", encoding="utf-8")
    assert main(["init", str(target)]) == 2
    assert f"error: tracker init {target}: not a directory" in capsys.readouterr().err


def test_every_starter_file_is_shipped_with_the_package() -> None:
    assert sorted(starter.target for starter in STARTER_FILES) == EXPECTED
    assert all((starter.folder() / starter.source).is_file() for starter in STARTER_FILES)


def test_each_printed_next_step_exits_0_in_the_written_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's first day: every command `tracker init` prints, run as printed in DIR, exits
    0: the run on the simulator, the doctor of the attached vLLM config (the simulator serving
    the config's model on its port stands in for vLLM), the schedule, the dashboard (answering
    its health check)."""
    assert main(["init", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    steps = [line.split("#", 1)[0].strip() for line in out.split("next:\n", 1)[1].splitlines()]
    steps = [step for step in steps if step.startswith("tracker ")]
    assert [shlex.split(step)[1] for step in steps] == ["run", "doctor", "schedule", "dashboard"]
    env = {key: value for key, value in os.environ.items() if key != DB_URL_ENV}
    attached = tmp_path / "configs/vllm-llama3-8b.yaml"
    model = load_config(attached).config.target.model
    with simulator_process(model, "--block-size", "16", "--max-model-len", "8192") as url:
        # a free port: the config's own, 8000, may be taken on a shared host
        attached.write_text(attached.read_text(encoding="utf-8").replace(
            "http://127.0.0.1:8000", url), encoding="utf-8")
        for step in steps[:-1]:
            args = shlex.split(step)[1:] + (["--quiet"] if args_take_quiet(step) else [])
            done = subprocess.run([sys.executable, "-m", "tracker", *args], cwd=tmp_path,
                                  env=env, capture_output=True, text=True, timeout=300,
                                  check=False)
            assert done.returncode == 0, (step, done.stdout[-2000:], done.stderr[-2000:])
    engine = open_store(f"sqlite:///{tmp_path / 'tracker.db'}")  # the default, in DIR
    try:
        with Session(engine) as session:
            (run,) = fetch_runs(session, 10)
    finally:
        engine.dispose()
    assert (run.config_name, run.suite_name) == ("sim-default", "chat-short")
    assert run.status.value == "completed" and run.simulated and run.failed == 0
    dashboard_port = find_free_port()
    dashboard = subprocess.Popen([sys.executable, "-m", "tracker", *shlex.split(steps[-1])[1:],
                                  "--port", str(dashboard_port)], cwd=tmp_path, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_answers(f"http://127.0.0.1:{dashboard_port}/_stcore/health", dashboard)
    finally:
        stop_process(dashboard)


def args_take_quiet(step: str) -> bool:
    return shlex.split(step)[1] == "run"
