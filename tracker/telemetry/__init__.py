"""Telemetry during each workload: GPUs through NVML (``gpu``), the target's ``/metrics``
(``server``), and how both are shown (``render``).

``TelemetrySettings`` is what the runner needs: the rates, and the NVML module (the real
``pynvml`` unless a test injects a fake).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tracker.inputs.configs import Target
from tracker.telemetry.gpu import DEFAULT_SAMPLE_HZ
from tracker.telemetry.server_metrics import DEFAULT_SCRAPE_INTERVAL_S

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "[::1]"})


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    gpu_sample_hz: float = DEFAULT_SAMPLE_HZ
    server_scrape_interval_s: float = DEFAULT_SCRAPE_INTERVAL_S
    nvml: Any = None  # None: the real pynvml
    gpu_indices: tuple[int, ...] | None = None  # the GPUs the target uses; None: every GPU


def compute_gpu_skip_reason(target: Target) -> str | None:
    """Why this host's GPUs are not the target's (None: sample them)."""
    if target.kind == "openai":
        return ("not measured: the target is a remote OpenAI-compatible endpoint; its GPUs "
                "are not visible from here")
    return None if target.base_url is None else compute_host_gpu_skip_reason(target.base_url)


def compute_host_gpu_skip_reason(base_url: str) -> str | None:
    """Why this host's GPUs are not those of the server at ``base_url`` (None: it runs here)."""
    host = urlsplit(base_url).hostname or ""
    if host in LOCAL_HOSTS or host == socket.gethostname():
        return None
    return (f"not measured: the target runs on {host}; NVML sees only this host's GPUs "
            "(run the tracker on the serving host to measure them)")


__all__ = ["TelemetrySettings", "compute_gpu_skip_reason", "compute_host_gpu_skip_reason"]
