"""The shipped tuning walk (configs/walk/) moves TTFT, throughput and memory the documented way.

Documented in README.md ("The simulator's tuning walk"):

| step                         | mean TTFT      | output tok/s | memory |
| default -> continuous+paging | down           | up           | down   |
| -> AWQ                       | same or lower  | up           | down   |
| -> prefix caching            | down           | up           | down   |

The test runs the shipped configs and the shipped suite's workload, shortened (32 requests of
at most 160 tokens) and at 0.4 x the simulated durations, three times each, and compares medians.
"""

from __future__ import annotations

from pathlib import Path

from tracker.demo.walk import compute_walk_steps, measure_walk, scale_timings, shipped_walk
from tracker.inputs.configs import load_config
from tracker.inputs.suites import build_loaded_suite, load_suite
from tracker.store.db import open_store

REPEATS = 3
TIME_SCALE = 0.4
AWQ_TTFT_TOLERANCE = 0.15  # "same or lower": prefill is compute-bound, AWQ speeds the decode


def _short_suite(path: Path) -> object:
    loaded = load_suite(path)
    workload = loaded.suite.workloads[0].model_copy(
        update={"num_requests": 32, "warmup_requests": 4, "max_tokens": 160})
    return build_loaded_suite(loaded.suite.model_copy(update={"workloads": [workload]}),
                              loaded.path)


def test_the_walk_has_the_four_documented_steps() -> None:
    configs, _ = shipped_walk()
    loaded = [load_config(path).config for path in configs]
    assert [c.name for c in loaded] == ["walk-1-default", "walk-2-continuous-batching",
                                        "walk-3-awq", "walk-4-prefix-caching"]
    assert [c.simulator.batching for c in loaded] == ["static", *["continuous"] * 3]
    assert [c.engine.quantization for c in loaded] == [None, None, "awq", "awq"]
    assert [bool(c.engine.enable_prefix_caching) for c in loaded] == [False, False, False, True]


def test_each_step_of_the_walk_moves_ttft_throughput_and_memory_as_documented(
    tmp_path: Path,
) -> None:
    config_paths, suite_path = shipped_walk()
    configs = [scale_timings(load_config(p), TIME_SCALE) for p in config_paths]
    store = open_store(f"sqlite:///{tmp_path / 'walk.db'}")
    try:
        rows = measure_walk(store, configs, _short_suite(suite_path), REPEATS)  # type: ignore[arg-type]
    finally:
        store.dispose()
    assert all(len(runs) == REPEATS for runs in rows)
    assert len({m.output_tokens_per_s for m in rows[1]}) == REPEATS  # repeats differ a little
    default, paged, awq, prefix = compute_walk_steps(rows)
    table = "\n".join(f"{s.config}: {s.mean_ttft_s * 1000:.0f} ms, "
                      f"{s.output_tokens_per_s:.0f} tok/s, {s.memory_bytes / 2**30:.2f} GiB"
                      for s in (default, paged, awq, prefix))

    assert paged.mean_ttft_s < default.mean_ttft_s, table
    assert paged.output_tokens_per_s > default.output_tokens_per_s, table
    assert paged.memory_bytes < default.memory_bytes, table

    assert awq.mean_ttft_s < paged.mean_ttft_s * (1 + AWQ_TTFT_TOLERANCE), table
    assert awq.output_tokens_per_s > paged.output_tokens_per_s, table
    assert awq.memory_bytes < paged.memory_bytes, table

    assert prefix.mean_ttft_s < awq.mean_ttft_s, table
    assert prefix.output_tokens_per_s > awq.output_tokens_per_s, table
    assert prefix.memory_bytes < awq.memory_bytes, table
