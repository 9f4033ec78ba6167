"""Trend series shaping: series labels, display units, the noise band, config version changes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tracker.inputs.config_diff import compute_config_diff
from tracker.metrics import GIB, REGISTRY
from tracker.reports.diff_report import render_diff_lines
from tracker.reports.gate_report import render_value
from tracker.results import NATIVE_SOURCE

NOISE_WINDOW_RUNS = 10
NOISE_MIN_RUNS = 4
NOISE_SIGMAS = 2.0
DIFF_HOVER_LINES = 12  # a version marker's hover lists at most this many changed keys
LATENCY_LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2E latency"}
STAT_LABELS = {"mean": "mean", "median": "median (p50)", "std": "std", "p90": "p90", "p99": "p99"}
THROUGHPUT_LABELS = {
    "request_throughput_per_s": "request throughput",
    "output_throughput_tokens_per_s": "output token throughput",
    "total_token_throughput_tokens_per_s": "total token throughput",
    "usd_per_1m_output_tokens": "cost per 1M output tokens",
    "usd_per_1m_tokens": "cost per 1M tokens",
    "joules_per_output_token": "energy per output token",
    "joules_per_token": "energy per token",
    "gpu_memory_peak_bytes": "GPU memory peak",
    "gpu_memory_mean_bytes": "GPU memory mean",
    "kv_cache_usage_peak": "KV-cache usage peak",
    "num_preemptions": "preemptions",
    "startup_s": "startup time",
    "accuracy": "accuracy",
    "answer_drift": "answer drift",
}
UNIT_LABELS = {"usd_per_1m_tokens": "$/1M tokens"}
SECONDS_SHOWN = frozenset({"startup_s"})  # per-run durations of seconds to minutes: not in ms
# A displayed value's digits in a table, as the CLI writes them: `tracker show` (1 decimal in ms
# and tokens/s, 2 in req/s), its GPU line (2 decimals in GiB) and its cost and energy line (4
# significant digits, the default here); Streamlit's number formats.
DISPLAY_FORMATS = {"ms": "%.1f", "s": "%.1f", "tokens/s": "%.1f", "req/s": "%.2f",
                   "GiB": "%.2f", "fraction": "percent", "count": "%d"}
GATE_UNITS = frozenset({"s", "bytes", "fraction", "req/s", "tokens/s"})  # the gate's own formats


@dataclass(frozen=True, slots=True)
class DisplayUnit:
    label: str  # "ms", "tokens/s", ...
    scale: float  # stored value x scale = displayed value


def display_unit(metric: str) -> DisplayUnit:
    unit = REGISTRY[metric].unit
    if unit == "s":
        return DisplayUnit("s", 1.0) if metric in SECONDS_SHOWN else DisplayUnit("ms", 1000.0)
    if unit == "bytes":
        return DisplayUnit("GiB", 1.0 / GIB)
    return DisplayUnit(UNIT_LABELS.get(unit, unit), 1.0)


def display_format(metric: str) -> str:
    """The Streamlit number format of the metric's displayed value (``display_unit``)."""
    return DISPLAY_FORMATS.get(display_unit(metric).label, "%.4g")


def render_metric_value(value: float | None, metric: str) -> str | None:
    """One stored value with its unit, as the gate's report writes it (``483.68 ms``,
    ``72.00 GiB``, ``66.7%``, ``2242.98 tokens/s``). Cost, energy, counts and the startup time
    are in their displayed unit to 4 significant digits, as `tracker show`'s cost line. It is
    None when not measured."""
    if value is None:
        return None
    unit = REGISTRY[metric].unit
    if unit in GATE_UNITS and metric not in SECONDS_SHOWN:
        return render_value(value, unit)
    shown = display_unit(metric)
    return f"{value * shown.scale:.4g}" + ("" if unit == "count" else f" {shown.label}")


def split_latency(metric: str) -> tuple[str, str] | None:
    """``"scheduled_ttft_p99_s"`` -> ``("scheduled_ttft", "p99")``, or None for other metrics."""
    if not metric.endswith("_s") or metric in SECONDS_SHOWN:
        return None
    key, _, stat = metric[:-2].rpartition("_")
    return (key, stat) if key and stat in STAT_LABELS else None


def latency_label(key: str) -> str:
    if key.startswith("scheduled_"):
        return f"scheduled {latency_label(key.removeprefix('scheduled_'))}"
    return LATENCY_LABELS.get(key, key.replace("_", " "))


def metric_label(metric: str) -> str:
    if metric in THROUGHPUT_LABELS:
        return THROUGHPUT_LABELS[metric]
    latency = split_latency(metric)
    if latency is not None:
        return f"{latency_label(latency[0])} {STAT_LABELS[latency[1]]}"
    return metric.removesuffix("_per_s").replace("_", " ")


def series_label(config: str, suite: str, workload: str, source: str = NATIVE_SOURCE) -> str:
    """One series per config, suite and workload, and per source: runs imported from another
    tool, and a gate's or a bisection's runs, are never drawn, banded or change-pointed as one
    series with the tracker's own history."""
    label = f"{config} · {suite} · {workload}"
    return label if source == NATIVE_SOURCE else f"{label} · from {source}"


def shape_trend(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Add the series label, the displayed value and the noise band, per series, oldest first."""
    unit = display_unit(metric)
    shaped = frame.copy()
    sources = shaped["source"] if "source" in shaped else [NATIVE_SOURCE] * len(shaped)
    shaped["series"] = [series_label(c, s, w, source) for c, s, w, source in
                        zip(shaped["config"], shaped["suite"], shaped["workload"], sources,
                            strict=True)]
    shaped["shown"] = shaped["value"] * unit.scale
    shaped = shaped.sort_values(["series", "started_at", "run_id"], kind="stable")
    center, low, high = compute_noise_band(shaped)
    shaped["band_center"], shaped["band_low"], shaped["band_high"] = center, low, high
    return shaped.reset_index(drop=True)


def compute_noise_band(shaped: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """(centre, low, high) of each run's band: the median ± ``NOISE_SIGMAS`` std of the
    previous ``NOISE_WINDOW_RUNS`` runs of the same series *and config version* (a new version
    starts afresh: its first ``NOISE_MIN_RUNS`` runs have none), so a jump lands outside the band
    of the runs before it. Drawn in the metric's own space: where a version's values are all
    positive, on their log (a ratio band, as the comparison of runs reads them: never below
    zero), else on the values, cut at zero when none is negative. ``shaped`` is sorted per
    series, oldest first."""
    series = shaped["series"]
    new_version = shaped.groupby("series", sort=False)["config_version"].shift(1) \
        != shaped["config_version"]
    version = new_version.astype(int).groupby(series, sort=False).cumsum()
    keys = [series, version]
    shown = shaped["shown"].astype(float)
    positive = shown.gt(0.0).groupby(keys, sort=False).transform("all").astype(bool)
    signed = shown.lt(0.0).groupby(keys, sort=False).transform("any").astype(bool)
    space = pd.Series(np.where(positive, np.log(shown.where(positive, 1.0)), shown),
                      index=shaped.index)
    previous = space.groupby(keys, sort=False).shift(1)
    rolling = previous.groupby(keys, sort=False).rolling(NOISE_WINDOW_RUNS,
                                                         min_periods=NOISE_MIN_RUNS)
    middle = rolling.median().reset_index(level=[0, 1], drop=True).reindex(shaped.index)
    spread = rolling.std(ddof=0).reset_index(level=[0, 1], drop=True).reindex(shaped.index)

    def back(values: pd.Series) -> pd.Series:
        linear = values.where(signed, values.clip(lower=0.0))
        return pd.Series(np.where(positive, np.exp(values), linear), index=shaped.index)

    return (back(middle), back(middle - NOISE_SIGMAS * spread),
            back(middle + NOISE_SIGMAS * spread))


def find_version_changes(shaped: pd.DataFrame,
                         bodies: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> pd.DataFrame:
    """Runs whose config version differs from the previous run of the same series.

    ``bodies`` is config name -> version -> canonical body. The ``diff`` column holds plain
    text lines for the hover.
    """
    previous = shaped.groupby("series", sort=False)["config_version"].shift(1)
    changed = shaped[previous.notna() & (previous != shaped["config_version"])].copy()
    changed["previous_version"] = previous[changed.index]
    changed["diff"] = [
        _diff_text(bodies.get(config, {}), old, new)
        for config, old, new in zip(changed["config"], changed["previous_version"],
                                    changed["config_version"], strict=True)
    ]
    return changed


def _diff_text(versions: Mapping[str, Mapping[str, Any]], old: str, new: str) -> str:
    if old not in versions or new not in versions:
        return "(config bodies not stored)"
    lines = render_diff_lines(compute_config_diff(versions[old], versions[new]),
                              limit=DIFF_HOVER_LINES)
    return "\n".join(lines) if lines else "(no difference in the canonical body)"
