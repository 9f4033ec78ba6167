"""The environment a run was measured in: what must match before two runs are compared.

Never includes environment variables, command lines or anything else that could hold a secret.
"""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

import tracker
from tracker.aio import event_loop_name


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect_environment(*, target_kind: str, engine: str | None) -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "tracker_version": tracker.__version__,
        "event_loop": event_loop_name(),
        "target_kind": target_kind,
        "engine": engine,
    }
