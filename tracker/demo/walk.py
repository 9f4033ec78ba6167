"""The tuning walk on the simulator: run one suite on each config of a walk, several times.

Each run gets a fresh simulator (in a thread, attached by URL, so its ``/metrics`` can be read
after the run) and goes through the ordinary pipeline into a store. Memory is the simulator's
weights plus the most KV-cache memory its requests held at once (``tracker_sim:*`` metrics) —
what a paged cache saves, AWQ shrinks and shared prefix blocks avoid.
"""

from __future__ import annotations

import statistics
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from tracker.errors import ConfigError, MeasurementError
from tracker.inputs.configs import LoadedConfig, ServingConfig, build_loaded_config
from tracker.inputs.package_data import shipped_configs
from tracker.inputs.suites import LoadedSuite
from tracker.pipeline.execute import execute_suite
from tracker.results import QualityResult
from tracker.sim.server import ThreadedSimServer


@dataclass(frozen=True, slots=True)
class WalkMeasurement:
    config: str
    mean_ttft_s: float
    output_tokens_per_s: float
    memory_bytes: int  # weights + peak KV-cache memory in use
    weights_bytes: int
    kv_peak_bytes: int
    preemptions: int
    quality: QualityResult | None = None  # the suite's quality set, where it asks one


@dataclass(frozen=True, slots=True)
class WalkStep:
    """The medians of a config's repeated runs."""

    config: str
    runs: int
    mean_ttft_s: float
    output_tokens_per_s: float
    memory_bytes: int


def shipped_walk() -> tuple[list[Path], Path]:
    """(the walk's configs in order, its suite)."""
    folder = shipped_configs() / "walk"
    configs = sorted(folder.glob("[0-9]*.yaml"))
    suite = folder / "suite.yaml"
    if not configs or not suite.is_file():
        raise ConfigError(f"{folder}: the tuning-walk configs or suite.yaml are missing; "
                          "reinstall the tracker")
    return configs, suite


def scale_timings(loaded: LoadedConfig, factor: float) -> LoadedConfig:
    """The same config with every simulated duration times ``factor`` (fast tests)."""
    settings = loaded.config.simulator
    faster = settings.model_copy(update={
        name: getattr(settings, name) * factor
        for name in ("prefill_s_per_token", "decode_base_s", "decode_per_seq_s",
                     "decode_s_per_kv_gib")})
    target = loaded.config.target.model_copy(update={"simulator": faster})
    return build_loaded_config(loaded.config.model_copy(update={"target": target}), loaded.path)


def _attached(loaded: LoadedConfig, base_url: str) -> LoadedConfig:
    target = loaded.config.target.model_copy(update={"base_url": base_url, "simulator": None})
    config: ServingConfig = loaded.config.model_copy(update={"target": target})
    return build_loaded_config(config, loaded.path)


def fetch_sim_metrics(base_url: str) -> dict[str, float]:
    """``{metric name: value}`` of the simulator's /metrics (labels dropped)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1: no proxy
    with opener.open(base_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            values[series.split("{", 1)[0]] = float(value)
    return values


def measure_config(store: Engine, loaded: LoadedConfig, suite: LoadedSuite,
                   repeat: int = 0) -> WalkMeasurement:
    """One run of ``loaded``, its ``repeat``-th (the simulator's run-to-run draw: the same for
    every config of one pass, so a pass compares configs, and passes vary like repeated runs)."""
    with ThreadedSimServer(loaded.config, run_ordinal=repeat) as server:
        run = execute_suite(store, _attached(loaded, server.base_url), suite)
        metrics = fetch_sim_metrics(server.base_url)
    summaries = [w.summary for w in run.workloads if w.summary.ttft is not None]
    if run.status.value != "completed" or not summaries:
        raise MeasurementError(f"walk: {loaded.config.name}: run {run.run_id} is {run.status} "
                               f"({run.status_reason}); nothing to compare")
    ttft = summaries[0].ttft
    throughput = summaries[0].output_throughput_tokens_per_s
    assert ttft is not None and throughput is not None
    weights = int(metrics["tracker_sim:weights_memory_bytes"])
    kv_peak = int(metrics["tracker_sim:kv_cache_peak_used_bytes"])
    return WalkMeasurement(loaded.config.name, ttft.mean_s, throughput, weights + kv_peak,
                           weights, kv_peak, int(metrics["vllm:num_preemptions_total"]),
                           run.quality)


def measure_walk(store: Engine, configs: Sequence[LoadedConfig], suite: LoadedSuite,
                 repeats: int) -> list[list[WalkMeasurement]]:
    """``repeats`` passes over the walk, interleaved (config 1..n, then again) so drift in the
    machine's load spreads over every config rather than landing on one."""
    rows: list[list[WalkMeasurement]] = [[] for _ in configs]
    for repeat in range(repeats):
        for index, loaded in enumerate(configs):
            rows[index].append(measure_config(store, loaded, suite, repeat))
    return rows


def compute_walk_steps(rows: Sequence[Sequence[WalkMeasurement]]) -> list[WalkStep]:
    return [WalkStep(runs[0].config, len(runs),
                     statistics.median(m.mean_ttft_s for m in runs),
                     statistics.median(m.output_tokens_per_s for m in runs),
                     int(statistics.median(m.memory_bytes for m in runs)))
            for runs in rows]
