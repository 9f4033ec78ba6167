"""Telemetry, fingerprint and quality for people and programs (the edge: JSON and text lines)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.metrics import GIB, SIM_MEMORY_GAUGE
from tracker.results import (
    SERVER_CHECK_KEY,
    GpuDeviceSummary,
    GpuTelemetry,
    QualityResult,
    RunResult,
    ServerTelemetry,
)
from tracker.targets.startup import compute_cache_config_facts
from tracker.telemetry.server_metrics import merge_summaries
from tracker.telemetry.spec_decode import LENGTH_KEY, RATE_KEY, compute_position_rates

NOT_RUN = "telemetry was not collected for this run"


def _device_json(device: GpuDeviceSummary) -> dict[str, Any]:
    return {
        "index": device.gpu_index, "name": device.name,
        "memory_total_bytes": device.memory_total_bytes, "samples": device.samples,
        "memory_peak_bytes": device.memory_used_peak_bytes,
        "memory_mean_bytes": device.memory_used_mean_bytes,
        "util_mean_pct": device.gpu_util_mean_pct, "util_peak_pct": device.gpu_util_peak_pct,
        "power_mean_w": device.power_mean_w, "power_peak_w": device.power_peak_w,
        "sm_clock_mean_mhz": device.sm_clock_mean_mhz,
        "temperature_peak_c": device.temperature_peak_c,
        "throttle_reasons": list(device.throttle_reasons),
        "energy_j": device.energy_j, "energy_source": device.energy_source,
    }


def render_gpu_json(gpu: GpuTelemetry | None) -> dict[str, Any]:
    if gpu is None:
        return {"measured": False, "reason": NOT_RUN}
    if not gpu.measured:
        return {"measured": False, "reason": gpu.reason}
    return {
        "measured": True, "sample_hz": gpu.sample_hz, "samples": len(gpu.samples),
        "gpu_memory_peak_bytes": gpu.memory_peak_bytes, "gpu_util_mean": gpu.gpu_util_mean_pct,
        "power_mean_w": gpu.power_mean_w, "energy_j": gpu.energy_j,
        "energy_mean_w": gpu.energy_mean_w, "energy_source": gpu.energy_source,
        "energy_note": gpu.energy_note, "duration_s": gpu.duration_s,
        "devices": [_device_json(d) for d in gpu.devices],
    }


def render_server_json(server: ServerTelemetry | None) -> dict[str, Any]:
    if server is None:
        return {"measured": False, "reason": NOT_RUN}
    if not server.measured:
        return {"measured": False, "reason": server.reason}
    return {"measured": True, "scrapes": server.scrapes, **dict(server.values)}


def _run_gpu_json(run: RunResult) -> dict[str, Any]:
    gpus = [w.gpu for w in run.workloads if w.gpu is not None]
    measured = [g for g in gpus if g.measured]
    if not measured:
        reason = next((g.reason for g in gpus if g.reason), NOT_RUN)
        return {"measured": False, "reason": reason}
    peaks = [g.memory_peak_bytes for g in measured if g.memory_peak_bytes is not None]
    utils = [g.gpu_util_mean_pct for g in measured if g.gpu_util_mean_pct is not None]
    powers = [g.power_mean_w for g in measured if g.power_mean_w is not None]
    devices = {d.gpu_index: d.name for g in measured for d in g.devices}
    energies = [g.energy_j for g in measured]
    return {
        "energy_j": None if any(e is None for e in energies)
        else sum(e for e in energies if e is not None),
        "measured": True,
        "gpu_memory_peak_bytes": max(peaks) if peaks else None,
        "gpu_util_mean": sum(utils) / len(utils) if utils else None,
        "power_mean_w": sum(powers) / len(powers) if powers else None,
        "devices": [{"index": i, "name": name} for i, name in sorted(devices.items())],
    }


def _run_server_json(run: RunResult) -> dict[str, Any]:
    servers = [w.server for w in run.workloads if w.server is not None]
    if not any(s.measured for s in servers):
        reason = next((s.reason for s in servers if s.reason), NOT_RUN)
        return {"measured": False, "reason": reason}
    return {"measured": True, **merge_summaries(servers)}


def render_run_telemetry_json(run: RunResult) -> dict[str, Any]:
    return {"gpu": _run_gpu_json(run), "server": _run_server_json(run)}


def render_quality_json(quality: QualityResult | None) -> dict[str, Any] | None:
    if quality is None:
        return None
    ci = None
    if quality.accuracy_ci_low is not None and quality.accuracy_ci_high is not None:
        ci = [quality.accuracy_ci_low, quality.accuracy_ci_high]
    return {
        "set": {"name": quality.set_name, "version": quality.set_version},
        "accuracy": quality.accuracy, "accuracy_ci": ci,
        "answered": quality.answered, "correct": quality.correct,
        "drift": quality.drift, "drift_baseline_run_id": quality.drift_baseline_run_id,
        "drift_compared": quality.drift_compared,
        "reused_from_run_id": quality.reused_from_run_id,
        "items": [{"id": i.item_id, "scorer": i.scorer, "output": i.output, "score": i.score,
                   "changed": i.changed, "error": i.error} for i in quality.items],
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _gpu_line(run: RunResult) -> str:
    gpu = _run_gpu_json(run)
    if not gpu["measured"]:
        return f"gpu: not measured ({gpu['reason']})"
    peak = gpu["gpu_memory_peak_bytes"]
    util, power = gpu["gpu_util_mean"], gpu["power_mean_w"]
    return (f"gpu: {', '.join(str(d['name']) for d in gpu['devices'])}; memory peak "
            f"{'-' if peak is None else f'{peak / GIB:.2f} GiB'}, util mean "
            f"{'-' if util is None else f'{util:.0f}%'}, power mean "
            f"{'-' if power is None else f'{power:.0f} W'}"
            + ("" if gpu["energy_j"] is None else f", energy {gpu['energy_j']:.4g} J"))


def _server_line(run: RunResult) -> str:
    server = _run_server_json(run)
    if not server["measured"]:
        return f"server: not measured ({server['reason']})"
    preemptions = server.get("num_preemptions")
    memory = server.get(f"{SIM_MEMORY_GAUGE}_peak")
    simulated = ("" if memory is None else
                 f"; simulated GPU memory {memory / GIB:.2f} GiB per GPU (the simulator's own "
                 "account: the GPU memory the tracker judges)")
    return (f"server: kv-cache peak {_pct(server.get('kv_cache_usage_peak'))}, preemptions "
            f"{'-' if preemptions is None else int(preemptions)}, prefix-cache hit rate "
            f"{_pct(server.get('prefix_cache_hit_rate'))}{_workload_hit_rates(run)}"
            f"{_acceptance(server)}{simulated}")


def _acceptance(server: Mapping[str, Any]) -> str:
    """``, spec-decode acceptance 62.0% (mean length 3.48 tokens; by position 85%, 70%)``
    where the server drafts (vLLM's counters), and empty where it does not."""
    rate, length = server.get(RATE_KEY), server.get(LENGTH_KEY)
    if not isinstance(rate, float):
        return ""
    text = f", spec-decode acceptance {_pct(rate)}"
    if isinstance(length, float):
        text += f" (mean length {length:.2f} tokens"
        positions = compute_position_rates({k: v for k, v in server.items()
                                            if isinstance(v, float)})
        if positions:
            text += "; by position " + ", ".join(f"{p:.0%}" for p in positions)
        text += ")"
    return text


def _workload_hit_rates(run: RunResult) -> str:
    """`` (chat 12.0%, agent 81.5%)`` when more than one workload measured a hit rate."""
    rates = [(w.name, w.server.values["prefix_cache_hit_rate"]) for w in run.workloads
             if w.server is not None and w.server.measured
             and "prefix_cache_hit_rate" in w.server.values]
    if len(rates) < 2:
        return ""
    return " (" + ", ".join(f"{name} {_pct(rate)}" for name, rate in rates) + ")"


def _quality_line(quality: QualityResult) -> str:
    text = f"quality ({quality.set_name}): accuracy {_pct(quality.accuracy)}"
    if quality.accuracy_ci_low is not None and quality.accuracy_ci_high is not None:
        text += f" [{_pct(quality.accuracy_ci_low)}, {_pct(quality.accuracy_ci_high)}]"
    text += f" ({quality.correct}/{quality.answered} answered right"
    unanswered = len(quality.items) - quality.answered
    text += f", {unanswered} not answered)" if unanswered else ")"
    if quality.reused_from_run_id is not None:
        text += f"; answers reused from run {quality.reused_from_run_id} (asked once a night)"
    if quality.drift is None:
        return text + "; drift: no earlier run of this suite and config to compare with"
    return (text + f"; drift {_pct(quality.drift)} of {quality.drift_compared} answers changed "
            f"since run {quality.drift_baseline_run_id}")


def _energy_notes(run: RunResult) -> list[str]:
    return [f"note: energy of {w.name}: {w.gpu.energy_note}" for w in run.workloads
            if w.gpu is not None and w.gpu.energy_note]


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _startup_facts(environment: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """A launched server's ``launch`` facts, or an attached one's from the ``cache_config_info``
    its server check kept, or None when the target stated neither."""
    launch = environment.get("launch")
    if isinstance(launch, Mapping):
        return "engine start", launch
    check = environment.get(SERVER_CHECK_KEY)
    labels = check.get("cache_config") if isinstance(check, Mapping) else None
    if not isinstance(labels, Mapping):
        return None
    facts = compute_cache_config_facts({str(k): str(v) for k, v in labels.items()})
    return "engine (attached)", facts.as_environment()


def render_startup_line(environment: Mapping[str, Any]) -> str | None:
    """The KV cache, block size, prefix caching, load and startup times the engine stated. A
    fact it did not state is "not reported"."""
    found = _startup_facts(environment)
    if found is None:
        return None
    head, facts = found
    tokens, kv_bytes = _number(facts.get("kv_cache_tokens")), _number(facts.get("kv_cache_memory_bytes"))
    block, prefix = _number(facts.get("block_size")), facts.get("prefix_caching")
    parts = [f"KV cache {'tokens not reported' if tokens is None else f'{tokens:,.0f} tokens'}, "
             f"{'bytes not reported' if kv_bytes is None else f'{kv_bytes / GIB:.2f} GiB'}",
             f"block size {'not reported' if block is None else f'{block:.0f}'}",
             "prefix caching " + ("on" if prefix is True else "off" if prefix is False
                                  else "not reported")]
    if head == "engine start":
        load_s, weights = _number(facts.get("model_load_s")), _number(facts.get("weights_memory_bytes"))
        startup_s = _number(facts.get("startup_s"))
        parts += [f"model load {'not reported' if load_s is None else f'{load_s:.2f} s'}",
                  f"weights {'not reported' if weights is None else f'{weights / GIB:.2f} GiB'}",
                  f"ready after {'-' if startup_s is None else f'{startup_s:.1f} s'}"]
    return f"{head}: " + "; ".join(parts)


def render_telemetry_lines(run: RunResult) -> list[str]:
    lines = [_gpu_line(run), *_energy_notes(run), _server_line(run)]
    if (startup := render_startup_line(run.environment)) is not None:
        lines.append(startup)
    if run.quality is not None:
        lines.append(_quality_line(run.quality))
    return lines
