"""On the simulator, prefix caching shows where the shipped traffic suites say it does.

Each side runs through the real runner (``SuiteRunner``, the embedded simulator it starts) with
``configs/sim-default.yaml`` and only ``engine.enable_prefix_caching`` changed, three seeded runs
(run ordinals 0, 1, 2: the simulator's run-to-run speed draws, the same on both sides), and the
medians are compared:

- ``multi-turn-chat``: the later turns (``<workload>/turns-2+``) carry the whole history, which
  caching serves from the cache. Turn 1 is cheaper with caching too, since the suite's sessions
  share system prompts; what only the history explains is that caching saves more on the later
  turns than on turn 1 (without caching, the later turns cost more than turn 1; with it, about
  the same).
- ``trace-replay`` (its Mooncake workload): the rows whose leading hash ids repeat an earlier
  row's are cheaper with caching on; the first row, whose ids nothing before it had and which
  meets an idle server, costs the same either way.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import yaml

from tests.telemetry.fake_nvml import FakeNvml
from tracker.eventloop import run_async
from tracker.inputs.configs import load_config
from tracker.inputs.suites import LoadedSuite, build_loaded_suite, load_suite
from tracker.results import QualityResult, RequestRecord, RunStatus, WorkloadResult
from tracker.runner.suite_runner import SuiteRunner
from tracker.telemetry import TelemetrySettings

ROOT = Path(__file__).resolve().parents[2]
RUNS = (0, 1, 2)  # run ordinals: the same three speed draws on both sides


class KeptResults:
    """A run sink that keeps the workload results in memory (the runner's own interface)."""

    def __init__(self) -> None:
        self.results: dict[str, WorkloadResult] = {}
        self.status: RunStatus | None = None

    def begin(self, *, started_at: datetime, simulated: bool,
              environment: dict[str, object]) -> int:
        return 1

    def save_workload(self, position: int, result: WorkloadResult) -> None:
        self.results[result.name] = result

    def save_quality(self, result: QualityResult) -> None:
        raise AssertionError("these suites ask no quality set")

    def finish(self, status: RunStatus, reason: str | None, ended_at: datetime) -> None:
        self.status = status


def sim_config(tmp_path: Path, *, caching: bool) -> Path:
    """The shipped sim-default config with prefix caching on or off."""
    data = yaml.safe_load((ROOT / "configs" / "sim-default.yaml").read_text(encoding="utf-8"))
    data["name"] = f"sim-caching-{'on' if caching else 'off'}"
    data["engine"]["enable_prefix_caching"] = caching
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def run_suite(config: Path, suite: LoadedSuite, ordinal: int) -> Mapping[str, WorkloadResult]:
    sink = KeptResults()
    runner = SuiteRunner(load_config(config), suite, sink,
                         telemetry=TelemetrySettings(nvml=FakeNvml(fail_init=True)),
                         run_ordinal=ordinal)
    run_async(runner.run())
    assert sink.status is RunStatus.COMPLETED
    return sink.results


def median_ttft_s(result: WorkloadResult) -> float:
    assert result.summary.failed == 0 and result.summary.ttft is not None
    return result.summary.ttft.median_s


def test_later_turns_of_multi_turn_chat_are_faster_with_prefix_caching(tmp_path: Path) -> None:
    suite = load_suite(ROOT / "baselines" / "multi-turn-chat.yaml")
    ttft_s: dict[bool, dict[str, float]] = {}
    for caching in (True, False):
        runs = [run_suite(sim_config(tmp_path, caching=caching), suite, n) for n in RUNS]
        ttft_s[caching] = {name: statistics.median(median_ttft_s(run[name]) for run in runs)
                           for name in runs[0]}
    on, off = ttft_s[True], ttft_s[False]
    for workload in ("live-history", "recorded-history"):
        first, later = f"{workload}/turn-1", f"{workload}/turns-2+"
        assert on[later] < 0.6 * off[later], (workload, on, off)
        # the history is what the later turns add: without caching it costs, with it barely
        assert off[later] > off[first], (workload, off)
        assert off[later] - on[later] > off[first] - on[first], (workload, on, off)


def first_token_s(record: RequestRecord) -> float:
    assert record.ttft_s is not None, record.error
    return record.ttft_s


def shared_prefix_blocks(rows: list[dict[str, list[int]]]) -> list[int]:
    """For each row, how many of its leading hash ids some earlier row also began with."""
    seen: set[tuple[int, ...]] = set()
    shared = []
    for row in rows:
        ids = tuple(row["hash_ids"])
        shared.append(next((n for n in range(len(ids), 0, -1) if ids[:n] in seen), 0))
        seen.update(ids[:n] for n in range(1, len(ids) + 1))
    return shared


def test_rows_whose_hash_ids_repeat_are_faster_with_prefix_caching(tmp_path: Path) -> None:
    shipped = load_suite(ROOT / "baselines" / "trace-replay.yaml")
    mooncake = shipped.suite.workloads[0]
    suite = build_loaded_suite(shipped.suite.model_copy(update={"workloads": [mooncake]}),
                               shipped.path)
    trace = ROOT / "baselines" / "traffic" / "mooncake-sample.jsonl"
    rows = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    warmup, measured = mooncake.warmup_requests, mooncake.num_requests
    shared = shared_prefix_blocks(rows[:warmup + measured])[warmup:]
    ttft_s: dict[bool, list[float]] = {}
    for caching in (True, False):
        runs = [run_suite(sim_config(tmp_path, caching=caching), suite, n)[mooncake.name]
                for n in RUNS]
        assert all(len(run.records) == measured and run.summary.failed == 0 for run in runs)
        ttft_s[caching] = [statistics.median(first_token_s(run.records[i]) for run in runs)
                           for i in range(measured)]
    on, off = ttft_s[True], ttft_s[False]
    repeated = [i for i in range(measured) if shared[i] > 0]
    assert len(repeated) >= measured // 2 and shared[0] == 0
    assert all(on[i] < off[i] for i in repeated), (on, off)
    assert statistics.median(on[i] / off[i] for i in repeated) < 0.6, (on, off)
    assert 0.85 < on[0] / off[0] < 1.15, (on[0], off[0])  # nothing to reuse, nothing ahead
