"""``target.launch.cpus``: the launched server on its CPUs, the tracker's client off them."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.targets.test_launcher import SIM_COMMAND, make_loaded, run_suite
from tracker.errors import ConfigError
from tracker.inputs.configs import load_config
from tracker.load.workers import _pin
from tracker.targets.launcher import is_group_alive, launch_server
from tracker.targets.pinning import (
    Pinning,
    build_pinning_env,
    check_pinning,
    format_cpu_list,
    is_vllm_cpu_build,
    keep_client_off,
    parse_cpu_list,
)

USABLE = sorted(os.sched_getaffinity(0))
needs_two_cpus = pytest.mark.skipif(len(USABLE) < 2, reason="pinning apart needs two usable CPUs")


@pytest.fixture(autouse=True)
def log_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "logs"
    monkeypatch.setenv("TRACKER_LOG_DIR", str(directory))
    return directory


@pytest.fixture(autouse=True)
def affinity_restored() -> Iterator[None]:
    before = os.sched_getaffinity(0)
    yield
    assert os.sched_getaffinity(0) == before


def allowed_list(pid: int) -> set[int]:
    """A process's CPUs as the kernel states them (``Cpus_allowed_list`` in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return parse_cpu_list(line.split(":", 1)[1])
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


def test_cpu_lists_read_and_write_the_kernels_format() -> None:
    assert parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert format_cpu_list({11, 0, 1, 2, 3, 8, 10}) == "0-3,8,10-11"
    assert format_cpu_list([5]) == "5"


@pytest.mark.parametrize(("cpus", "message"), [
    ("[]", "at least 1 item"),
    ('["0"]', "must list CPU ids, whole numbers from 0"),
    ("[true]", "must list CPU ids"),
    ("[-1]", "must list CPU ids"),
    ("[0, 0]", "names a CPU twice"),
])
def test_a_cpu_list_that_is_not_cpu_ids_is_a_config_error(tmp_path: Path, cpus: str,
                                                          message: str) -> None:
    path = tmp_path / "pinned.yaml"
    path.write_text(f"name: pinned\ntarget:\n  kind: vllm\n  model: m\n  launch:\n    cpus: {cpus}\n")
    with pytest.raises(ConfigError, match=rf"target.launch.cpus.*{message}"):
        load_config(path)


def test_a_cpu_this_host_does_not_have_is_a_config_error_naming_its_cpus() -> None:
    with pytest.raises(ConfigError, match=r"launched-sim.yaml: target.launch.cpus: CPU 4096 is not a "
                                          r"CPU of this host \(its CPUs: 0"):
        check_pinning(make_loaded(cpus=[4096]))


def test_pinning_every_cpu_the_tracker_may_use_leaves_no_client_cpu_and_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"leaves the tracker's client no CPU .*leave at least one"):
        check_pinning(make_loaded(cpus=USABLE))


def test_no_cpus_no_pinning() -> None:
    assert check_pinning(make_loaded()) is None


def test_vllms_cpu_build_gets_its_thread_binding_unless_the_server_environment_sets_it() -> None:
    loaded = make_loaded(cpus=[0, 1, 2, 5])
    pinning = Pinning(frozenset({0, 1, 2, 5}), frozenset({3}))
    cpu_build = {"VLLM_TARGET_DEVICE": "cpu"}  # what vLLM's own platform check also reads
    assert build_pinning_env(loaded, pinning, ["vllm", "serve"], cpu_build) == \
        {"VLLM_CPU_OMP_THREADS_BIND": "0-2,5", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    users = {**cpu_build, "VLLM_CPU_OMP_THREADS_BIND": "1"}  # launch.env's, kept
    assert build_pinning_env(loaded, pinning, ["vllm", "serve"], users) == \
        {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    ranks = make_loaded({"tensor_parallel_size": 2}, cpus=[0, 1, 2, 5])
    assert build_pinning_env(ranks, pinning, ["vllm"], cpu_build)["VLLM_CPU_OMP_THREADS_BIND"] == \
        "0-1|2,5"


def test_a_rank_without_a_cpu_is_a_config_error() -> None:
    loaded = make_loaded({"tensor_parallel_size": 2}, cpus=[0])
    with pytest.raises(ConfigError, match=r"1 CPUs for tensor_parallel_size 2"):
        build_pinning_env(loaded, Pinning(frozenset({0}), frozenset({1})), ["vllm"],
                          {"VLLM_TARGET_DEVICE": "cpu"})


def test_a_server_that_is_not_vllms_cpu_build_gets_no_vllm_cpu_settings() -> None:
    env = {"PATH": os.environ["PATH"]}
    assert not is_vllm_cpu_build(SIM_COMMAND, env)  # the tracker's python has no vllm
    assert build_pinning_env(make_loaded(cpus=[0]), Pinning(frozenset({0}), frozenset({1})),
                             SIM_COMMAND, env) == {}


@needs_two_cpus
def test_keeping_the_client_off_moves_every_thread_and_gives_each_its_mask_back() -> None:
    server = frozenset(USABLE[:1])
    waiting, seen = threading.Event(), threading.Event()
    worker = threading.Thread(target=lambda: (seen.set(), waiting.wait(30)))
    worker.start()
    seen.wait(5)
    assert worker.native_id is not None
    try:
        with keep_client_off(server):
            assert os.sched_getaffinity(0) == set(USABLE[1:])
            assert os.sched_getaffinity(worker.native_id) == set(USABLE[1:])
            started_inside = threading.Thread(target=waiting.wait, args=(30,))
            started_inside.start()
            assert started_inside.native_id is not None
            assert os.sched_getaffinity(started_inside.native_id) == set(USABLE[1:])
        assert os.sched_getaffinity(worker.native_id) == set(USABLE)
    finally:
        waiting.set()
        worker.join()


def _report_pin(queue: Any) -> None:
    """A load worker's first step (``_pin(None)``: no CPU of its own), then where it may run."""
    _pin(None)
    queue.put(sorted(os.sched_getaffinity(0)))


@needs_two_cpus
def test_a_worker_from_an_older_forkserver_keeps_off_the_servers_cpus_too() -> None:
    context = multiprocessing.get_context("forkserver")
    queue = context.Queue()
    warm = context.Process(target=_report_pin, args=(queue,))  # the forkserver starts unpinned
    warm.start()
    assert queue.get(timeout=60) == USABLE
    warm.join()
    with keep_client_off(frozenset(USABLE[:1])):
        late = context.Process(target=_report_pin, args=(queue,))
        late.start()
        assert queue.get(timeout=60) == USABLE[1:]
        late.join()
    queue.close()
    queue.join_thread()


@needs_two_cpus
async def test_a_launched_server_runs_on_its_cpus_and_the_client_on_the_others() -> None:
    server_cpu, client_cpus = USABLE[0], set(USABLE[1:])
    loaded = make_loaded(command=[sys.executable, "-m", "tracker.sim"], cpus=[server_cpu])
    async with launch_server(loaded) as server:
        assert os.sched_getaffinity(0) == client_cpus  # the tracker, while the server runs
        assert allowed_list(server.record.pid) == {server_cpu}  # the server, from the kernel
        environment = server.record.as_environment()
        assert (environment["cpus"], environment["client_cpus"]) == ([server_cpu], sorted(client_cpus))
    assert os.sched_getaffinity(0) == set(USABLE)  # given back once it is stopped
    assert not is_group_alive(server.record.pid)


@needs_two_cpus
def test_a_pinned_run_with_worker_processes_completes_and_records_the_cpus(tmp_path: Path) -> None:
    config = tmp_path / "pinned.yaml"
    config.write_text(yaml.safe_dump(make_loaded(cpus=[USABLE[0]]).config.model_dump(
        mode="json", exclude_defaults=True)))
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: tiny\nworkers: 2\nworkloads:\n  - name: chat\n    prompts: {source: "
                     "synthetic, input_tokens: 32}\n    max_tokens: 8\n    ignore_eos: true\n"
                     "    concurrency: 4\n    num_requests: 16\n")
    run = run_suite(config, suite, tmp_path)
    assert run.status.value == "completed" and run.workloads[0].summary.completed == 16
    launch = run.environment["launch"]
    assert (launch["cpus"], launch["client_cpus"]) == ([USABLE[0]], USABLE[1:])
    assert not is_group_alive(launch["pid"])


def test_a_run_pinned_to_a_cpu_the_host_lacks_fails_before_anything_starts(
        tmp_path: Path, log_dir: Path) -> None:
    config = tmp_path / "pinned.yaml"
    config.write_text(yaml.safe_dump(make_loaded(cpus=[4096]).config.model_dump(
        mode="json", exclude_defaults=True)))
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: tiny\nworkloads:\n  - name: chat\n    prompts: {source: synthetic, "
                     "input_tokens: 8}\n    max_tokens: 4\n    concurrency: 1\n    num_requests: 1\n")
    with pytest.raises(ConfigError, match=r"target.launch.cpus: CPU 4096 is not a CPU of this host"):
        run_suite(config, suite, tmp_path)
    assert not log_dir.exists()  # no server was started
