"""The vLLM launcher, exercised by launching the simulator through the same code path as vLLM."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.waiting import wait_for
from tracker.errors import ConfigError, MeasurementError
from tracker.inputs.configs import LoadedConfig, ServingConfig, build_loaded_config, load_config
from tracker.inputs.suites import load_suite
from tracker.pipeline.execute import execute_suite
from tracker.results import RunResult
from tracker.store.db import open_store
from tracker.targets.launcher import build_command, is_group_alive, launch_server
from tracker.targets.resolve import open_target
from tracker.targets.supervisor import PidRecord, process_start_ticks, write_pid_file

ROOT = Path(__file__).resolve().parents[2]
SIM_COMMAND = [sys.executable, "-m", "tracker.sim"]
BLOCK_SIZE_16_LOG = Path(__file__).parent / "fixtures" / "vllm-0.32-cpu-block-size-16.log"
FAST = {"sim_decode_base_s": 0.001, "sim_prefill_s_per_token": 0.00001, "sim_noise": 0}

def make_loaded(engine: dict[str, Any] | None = None, **launch: Any) -> LoadedConfig:
    body = {
        "name": "launched-sim",
        "target": {"kind": "vllm", "model": "sim/launched",
                   "launch": {"command": SIM_COMMAND, "startup_timeout_s": 30, **launch}},
        "engine": {"block_size": 16, "gpu_memory_utilization": 0.9, "max_model_len": 4096,
                   "max_num_seqs": 32, "swap_space": 4, "tensor_parallel_size": 1,
                   "enable_prefix_caching": True, "extra_args": FAST, **(engine or {})},
    }
    return build_loaded_config(ServingConfig.model_validate(body), "launched-sim.yaml")


def run_suite(config: Path, suite: Path, tmp_path: Path) -> RunResult:
    """``tracker run``'s path: the files loaded, then one run into a SQLite file under tmp_path."""
    loaded, suite_loaded = load_config(config), load_suite(suite)
    engine = open_store(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        return execute_suite(engine, loaded, suite_loaded)
    finally:
        engine.dispose()


def sim_pid(log_path: Path) -> int:
    found = re.search(r"\[tracker-sim pid=(\d+)\]", log_path.read_text())
    assert found, log_path.read_text()
    return int(found.group(1))


@pytest.fixture(autouse=True)
def log_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "logs"
    monkeypatch.setenv("TRACKER_LOG_DIR", str(directory))
    return directory


def test_command_is_the_model_then_the_engine_flags_then_the_address() -> None:
    command = build_command(make_loaded(), 8123)
    assert command[: len(SIM_COMMAND) + 1] == [*SIM_COMMAND, "sim/launched"]
    flags = command[len(SIM_COMMAND) + 1:]
    assert flags[:4] == ["--block-size", "16", "--gpu-memory-utilization", "0.9"]
    assert "--enable-prefix-caching" in flags
    swap = flags.index("--swap-space")
    assert flags[swap:swap + 2] == ["--swap-space", "4"]
    assert flags[-4:] == ["--host", "127.0.0.1", "--port", "8123"]


def test_a_port_in_the_engine_args_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"engine.extra_args.port: the launcher chooses"):
        build_command(make_loaded({"extra_args": {"port": 9000}}), 8123)


async def test_launch_waits_for_health_records_the_startup_facts_and_stops_the_group(
    log_dir: Path,
) -> None:
    async with launch_server(make_loaded()) as server:
        record = server.record
        assert is_group_alive(record.pid)
        assert Path(record.log_path).parent == log_dir.resolve()
        assert record.facts.engine_version and record.facts.engine_version.startswith("tracker-sim")
        # 80 GiB x 0.9 - 16 GiB of weights, 128 KiB per token
        assert record.facts.kv_cache_tokens == 458752
        assert record.facts.weights_memory_bytes == 16 * 1024**3
        assert record.facts.max_concurrency == pytest.approx(112.0)
        assert record.facts.block_size == 16  # its /metrics' vllm:cache_config_info
        assert record.facts.model_load_s is not None
        assert record.startup_s > 0
    assert not is_group_alive(record.pid)
    assert "Shutting down" in Path(record.log_path).read_text()  # SIGTERM, handled


def test_a_run_on_a_launched_server_links_its_log_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    config = tmp_path / "launched.yaml"
    config.write_text(yaml.safe_dump(json.loads(json.dumps(
        make_loaded().config.model_dump(mode="json", exclude_defaults=True)))))
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: tiny\nworkloads:\n  - name: chat\n    prompts: {source: synthetic, "
                     "input_tokens: 32, system_prompt_tokens: 32}\n    max_tokens: 8\n"
                     "    ignore_eos: true\n    concurrency: 4\n    num_requests: 12\n")
    run = run_suite(config, suite, tmp_path)
    assert run.status.value == "completed"
    assert run.workloads[0].summary.completed == 12
    launch = run.environment["launch"]
    assert Path(launch["log_path"]).is_file()
    assert launch["kv_cache_tokens"] == 458752
    assert run.environment["engine"].startswith("tracker-sim")
    assert not is_group_alive(launch["pid"])


async def test_a_server_that_never_gets_healthy_is_stopped_and_its_log_named(
    log_dir: Path,
) -> None:
    # a "server" that starts a child in its group, says its pid and never listens
    script = ("import os, subprocess, sys, time; "
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              "print(f'[tracker-sim pid={os.getpid()}] loading', flush=True); time.sleep(60)")
    loaded = make_loaded(command=[sys.executable, "-c", script], startup_timeout_s=1.0)
    with pytest.raises(MeasurementError) as caught:
        async with launch_server(loaded):
            pytest.fail("the server never became healthy")
    message = str(caught.value)
    log_path = Path(re.search(r"see its log (\S+)", message).group(1))  # type: ignore[union-attr]
    assert "not healthy" in message and "startup_timeout_s" in message
    assert log_path.parent == log_dir.resolve() and log_path.is_file()
    assert not is_group_alive(sim_pid(log_path))


async def test_a_server_that_exits_at_startup_names_the_log_and_its_last_words() -> None:
    loaded = make_loaded({"gpu_memory_utilization": 0.1})  # vLLM would refuse: no room for KV
    with pytest.raises(MeasurementError, match=r"exited with code 3 .*see its log .*\.log: .*"
                                               r"no available memory for the cache blocks"):
        async with launch_server(loaded):
            pytest.fail("the server should have exited")


async def test_a_failed_start_names_the_program_behind_taskset_and_the_root_cause_line(
    tmp_path: Path, log_dir: Path,
) -> None:
    # a "vllm" that writes the log of vLLM 0.32's CPU build refusing --block-size 16 and exits 1
    fake = tmp_path / "bin" / "vllm"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport sys\n"
                    f"with open({str(BLOCK_SIZE_16_LOG)!r}, newline='') as log:\n"
                    "    sys.stderr.write(log.read())\nsys.exit(1)\n")
    fake.chmod(0o755)
    cpu = min(os.sched_getaffinity(0))
    loaded = make_loaded(command=["taskset", "-c", str(cpu), str(fake), "serve"])
    with pytest.raises(MeasurementError) as caught:
        async with launch_server(loaded):
            pytest.fail("the server should have exited")
    message = str(caught.value)
    (log_path,) = log_dir.glob("*.log")
    assert message == (
        f"launch: vllm exited with code 1 before it was healthy on {_url_in(message)}: ValueError: "
        "No common block size for 16 (CPU_ATTN: [MultipleOf(32)]). (line 74 of its log "
        f"{log_path.resolve()})")
    assert caught.value.exit_code == 3


def _url_in(message: str) -> str:
    found = re.search(r"healthy on (http://\S+):", message)
    assert found, message
    return found.group(1)


async def test_a_missing_command_says_how_to_fix_it() -> None:
    loaded = make_loaded(command=["/nonexistent/vllm", "serve"])
    with pytest.raises(MeasurementError, match=r"cannot start '/nonexistent/vllm'.*launch.command"):
        async with launch_server(loaded):
            pytest.fail("nothing should have started")


async def test_a_cancelled_run_stops_the_launched_group() -> None:
    started: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def hold() -> None:
        async with launch_server(make_loaded()) as server:
            started.set_result(server.record.pid)
            await asyncio.sleep(60)

    task = asyncio.create_task(hold())
    pid = await asyncio.wait_for(started, 30)
    assert is_group_alive(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not is_group_alive(pid)


def test_ctrl_c_during_a_cli_run_stops_the_launched_server(tmp_path: Path, log_dir: Path) -> None:
    config = tmp_path / "launched.yaml"
    loaded = make_loaded()
    config.write_text(yaml.safe_dump(loaded.config.model_dump(mode="json", exclude_defaults=True)))
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: long\nworkloads:\n  - name: chat\n    prompts: {source: synthetic, "
                     "input_tokens: 16}\n    max_tokens: 2000\n    ignore_eos: true\n"
                     "    concurrency: 2\n    num_requests: 50\n")
    env = {**os.environ, "TRACKER_LOG_DIR": str(log_dir)}
    # `python -m tracker run …`, with Ctrl-C's default restored first: a shell starts background
    # jobs (a CI script's `&`, nohup) with SIGINT ignored, and a child inherits that
    restore_sigint = ("import runpy, signal, sys; signal.signal(signal.SIGINT, "
                      "signal.default_int_handler); sys.argv[0] = 'tracker'; "
                      "runpy.run_module('tracker', run_name='__main__', alter_sys=True)")
    tracker = subprocess.Popen(
        [sys.executable, "-c", restore_sigint, "run", "--config", str(config), "--suite",
         str(suite), "--db", str(tmp_path / "runs.db"), "--quiet"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        log_path = _wait_for_log(log_dir, "Application startup complete", 30)
        base_url = _served_url(log_path)
        wait_for(lambda: _requests_running(base_url) > 0, 30, "requests streaming")
        tracker.send_signal(signal.SIGINT)
        _, err = tracker.communicate(timeout=30)
    finally:
        if tracker.poll() is None:
            tracker.kill()
            tracker.communicate()  # reap it and close its pipes, whatever failed above
    assert tracker.returncode == 130, err.decode()
    assert b"interrupted" in err
    assert not is_group_alive(sim_pid(log_path))


def _served_url(log_path: Path) -> str:
    found = re.search(r"Starting tracker-sim API server on (\S+)", log_path.read_text())
    assert found, log_path.read_text()
    return found.group(1)


def _requests_running(base_url: str) -> float:
    """The launched simulator's ``vllm:num_requests_running`` (127.0.0.1: no proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(base_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    running = [line for line in text.splitlines() if line.startswith("vllm:num_requests_running")]
    return float(running[0].rsplit(" ", 1)[1]) if running else 0.0


def _wait_for_log(log_dir: Path, text: str, timeout_s: float) -> Path:
    deadline_s = time.monotonic() + timeout_s
    while time.monotonic() < deadline_s:
        for path in log_dir.glob("*.log"):
            if text in path.read_text():
                return path
        time.sleep(0.1)
    raise AssertionError(f"no log in {log_dir} said {text!r}")


async def test_attaching_to_a_running_server_never_stops_it(tmp_path: Path) -> None:
    server = subprocess.Popen([*SIM_COMMAND, "sim/attached", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        base_url = _wait_for_address(server)
        body = {"name": "attached", "target": {"kind": "vllm", "model": "sim/attached",
                                               "base_url": base_url}}
        loaded = build_loaded_config(ServingConfig.model_validate(body), "attached.yaml")
        async with open_target(loaded) as handle:
            assert handle.launch is None
            assert handle.engine is not None and handle.engine.startswith("tracker-sim")
        assert server.poll() is None and is_group_alive(server.pid)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(10)
        assert server.stdout is not None
        server.stdout.close()


def _wait_for_address(process: subprocess.Popen[bytes]) -> str:
    assert process.stdout is not None
    for raw in process.stdout:
        found = re.search(r"server on (http://\S+)", raw.decode())
        if found:
            return found.group(1)
    raise AssertionError("the simulator never said where it listens")


# a launch command that writes its environment to argv[1], then is the simulator
DUMP_ENV_THEN_SIM = ("import json, os, runpy, sys; "
                     "json.dump(dict(os.environ), open(sys.argv[1], 'w')); "
                     "sys.argv = ['tracker.sim', *sys.argv[2:]]; "
                     "runpy.run_module('tracker.sim', run_name='__main__', alter_sys=True)")


async def test_the_launched_server_gets_only_the_environment_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept = {"HF_HOME": str(tmp_path / "hf"), "VLLM_LOGGING_LEVEL": "DEBUG", "NCCL_DEBUG": "WARN",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "LC_ALL": "C.UTF-8"}
    withheld = {"TRACKER_DB_URL": "postgresql+psycopg://u:db-password-123@db/tracker",
                "TRACKER_ALERT_WEBHOOK_URL": "https://hooks.example.test/T0/B0/xyz",
                "OPENAI_API_KEY": "sk-test-withheld-0123456789", "HF_TOKEN": "hf_withheld0123456789abcd",
                "VLLM_API_KEY": "server-key-withheld", "UNRELATED_SETTING": "1"}
    for name, value in {**kept, **withheld, "MY_SERVER_PASSWORD": "named-by-env-from"}.items():
        monkeypatch.setenv(name, value)
    dump = tmp_path / "env.json"
    loaded = make_loaded(command=[sys.executable, "-c", DUMP_ENV_THEN_SIM, str(dump)],
                         env={"FEATURE_FLAG": "on"}, env_from=["MY_SERVER_PASSWORD"])
    async with launch_server(loaded):
        env = json.loads(dump.read_text())
    assert {name: env.get(name) for name in kept} == kept
    assert env["PATH"] == os.environ["PATH"] and env["HOME"] == os.environ["HOME"]
    assert env["FEATURE_FLAG"] == "on" and env["MY_SERVER_PASSWORD"] == "named-by-env-from"
    assert sorted(set(withheld) & set(env)) == []
    assert not any(name.startswith("TRACKER_") for name in env)


async def test_a_variable_named_in_env_from_that_is_not_set_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TRACKER_TEST_UNSET_TOKEN", raising=False)
    loaded = make_loaded(env_from=["TRACKER_TEST_UNSET_TOKEN"])
    with pytest.raises(ConfigError, match=r"launched-sim.yaml: target.launch.env_from: "
                                          r"TRACKER_TEST_UNSET_TOKEN is not set"):
        async with launch_server(loaded):
            pytest.fail("nothing should have started")


async def test_the_launch_log_is_private_and_its_quoted_lines_redacted(log_dir: Path) -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
    script = f"print('loading with Authorization: Bearer {secret}', flush=True); raise SystemExit(1)"
    with pytest.raises(MeasurementError) as caught:
        async with launch_server(make_loaded(command=[sys.executable, "-c", script])):
            pytest.fail("the server should have exited")
    message = str(caught.value)
    assert "exited with code 1" in message and "[redacted]" in message and secret not in message
    (log_path,) = log_dir.glob("*.log")
    said = log_path.read_text()  # the server's own words, its secrets hidden as it wrote them
    assert secret not in said and "[redacted]" in said
    assert log_path.stat().st_mode & 0o777 == 0o600
    assert log_dir.stat().st_mode & 0o777 == 0o700
    assert list(log_dir.glob("*.pid")) == []


async def test_a_launch_stops_a_server_left_by_a_killed_tracker_and_supervisor(
    log_dir: Path,
) -> None:
    log_dir.mkdir()
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                start_new_session=True)
    try:
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()  # the tracker and the supervisor of the leftover: both dead
        ticks = process_start_ticks(leftover.pid)
        write_pid_file(log_dir / "old-run.pid", PidRecord(
            socket.gethostname(), gone.pid, None, gone.pid, None, leftover.pid, ticks, "vllm"))
        async with launch_server(make_loaded()) as server:
            assert leftover.wait(10) == -signal.SIGTERM
            assert is_group_alive(server.record.pid)
        assert list(log_dir.glob("*.pid")) == []
    finally:
        if leftover.poll() is None:
            leftover.kill()
            leftover.wait()
