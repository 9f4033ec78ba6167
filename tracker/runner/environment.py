"""The environment a run was measured in: what must match before two runs are compared.

Never includes environment variables, command lines or anything else that could hold a secret.

The fingerprint: host, CPU, Python, tracker version, OS, the GPUs (model, count, driver and CUDA
driver version from NVML, or why they are unknown), the engine and its version, and the git
commit of the config file (and whether the file differs from it) when the config lives in a git
repository. The dashboard's Compare page shows what differs between two runs' environments.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import tracker
from tracker.eventloop import event_loop_name
from tracker.telemetry.gpu import collect_gpu_environment

GIT_TIMEOUT_S = 5.0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(directory: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True,
                              text=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def collect_git_facts(path: str | Path) -> dict[str, Any]:
    """The commit the config file's repository is at, and whether the file differs from it."""
    file = Path(path).resolve()
    commit = _git(file.parent, "rev-parse", "HEAD")
    if not commit:
        return {}
    status = _git(file.parent, "status", "--porcelain", "--", file.name)
    return {"config_git_commit": commit, "config_git_dirty": bool(status) if status is not None
            else None}


def collect_environment(*, target_kind: str, engine: str | None,
                        config_path: str | Path | None = None, nvml: Any = None) -> dict[str, Any]:
    """The fingerprint of this host and target. ``nvml`` is injected by tests (default pynvml)."""
    git = collect_git_facts(config_path) if config_path is not None else {}
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
        **collect_gpu_environment(nvml),
        **git,
    }
