"""On the simulator, the shipped agentic suite's later turns are faster with prefix caching on.

Each side runs ``baselines/agentic-sessions.yaml`` through the real runner (``SuiteRunner``, the
embedded simulator it starts) with ``configs/sim-default.yaml`` and only
``engine.enable_prefix_caching`` changed, three seeded runs each (run ordinals 0, 1, 2), and
the medians over the runs are compared. Every later request of a session carries its whole
context (a 1,536-word system prompt, every question, answer and tool result, and, for a
sub-agent, the calling turn), which caching serves from the cache: the effect is several times
over, far past the noise of a busy host. Without caching the later turns cost more than turn 1
(the context grows); with it they do not, and each session ends sooner.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from tests.sim.test_multi_turn_prefix_caching import RUNS, median_ttft_s, run_suite, sim_config
from tracker.inputs.suites import load_suite
from tracker.metrics import compute_workload_metrics

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = {"agent-loop": 2 * 13, "agent-trace": 3 * 7}  # measured requests of each


def test_later_turns_of_the_agentic_suite_are_faster_with_prefix_caching(
        tmp_path: Path) -> None:
    suite = load_suite(ROOT / "baselines" / "agentic-sessions.yaml")
    ttft_s: dict[bool, dict[str, float]] = {}
    session_s: dict[bool, dict[str, float]] = {}
    for caching in (True, False):
        runs = [run_suite(sim_config(tmp_path, caching=caching), suite, n) for n in RUNS]
        for run in runs:
            for name, requests in WORKLOADS.items():
                assert len(run[name].records) == requests and run[name].summary.failed == 0
                assert "session_duration_median_s" not in compute_workload_metrics(
                    run[f"{name}/turns-2+"])
        ttft_s[caching] = {name: statistics.median(median_ttft_s(run[name]) for run in runs)
                           for name in runs[0]}
        session_s[caching] = {name: statistics.median(
            compute_workload_metrics(run[name])["session_duration_median_s"] for run in runs)
            for name in WORKLOADS}
    on, off = ttft_s[True], ttft_s[False]
    for workload in WORKLOADS:
        first, later = f"{workload}/turn-1", f"{workload}/turns-2+"
        assert on[later] < 0.4 * off[later], (workload, on, off)
        assert off[later] > off[first], (workload, off)  # the growing context costs, uncached
        assert session_s[True][workload] < session_s[False][workload], session_s
