"""A launched server on CPUs of its own (``target.launch.cpus``), and the tracker's client off them.

Where the engine and the load generator share cores, the engine's busy threads (vLLM's CPU build
busy-polls every core it may use, and a GPU build's API server and engine core are CPU-bound Python
processes too) keep the client's event loop off the CPU, and the run is client-bound ("starved",
``tracker.load.client_health``). ``launch.cpus: [0]`` gives the server its CPUs:

- ``check_pinning``, before anything starts: each id is an online CPU of this host, and the CPUs
  the tracker may use less these leave at least one for the client (``ConfigError`` otherwise).
- the server's supervisor (``tracker.targets.supervisor --cpus``) moves itself onto them before it
  starts the server, so the server and every process and thread it starts run there.
- ``build_pinning_env``, for vLLM's CPU build (``is_vllm_cpu_build``): ``VLLM_CPU_OMP_THREADS_BIND``
  (its OpenMP threads on those CPUs, one list per tensor-parallel rank, ``|``-separated) and
  ``VLLM_CPU_NUM_OF_RESERVED_CPU=0``, each only where the server's environment does not set it.
- ``keep_client_off``: every thread of the tracker's process (and so each thread and load worker
  it starts) runs on the other CPUs while the server runs. Each gets its own mask back after.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tracker.errors import ConfigError
from tracker.inputs.configs import LoadedConfig

_ONLINE = Path("/sys/devices/system/cpu/online")
_TASKS = Path("/proc/self/task")
THREADS_BIND = "VLLM_CPU_OMP_THREADS_BIND"
RESERVED_CPUS = "VLLM_CPU_NUM_OF_RESERVED_CPU"


@dataclass(frozen=True, slots=True)
class Pinning:
    server: frozenset[int]  # the server's CPUs (launch.cpus)
    client: frozenset[int]  # the CPUs the tracker keeps while the server runs


def parse_cpu_list(text: str) -> set[int]:
    """``0-3,8`` (the kernel's and taskset's list format) as {0, 1, 2, 3, 8}."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def format_cpu_list(cpus: Iterable[int]) -> str:
    """{0, 1, 2, 3, 8} as ``0-3,8``."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def online_cpus() -> frozenset[int]:
    """The CPUs this host has online (``/sys/devices/system/cpu/online``, else 0..cpu_count-1)."""
    with contextlib.suppress(OSError, ValueError):
        return frozenset(parse_cpu_list(_ONLINE.read_text()))
    return frozenset(range(os.cpu_count() or 1))


def usable_cpus() -> frozenset[int]:
    """The CPUs this thread may run on (its affinity mask)."""
    return frozenset(os.sched_getaffinity(0))


def check_pinning(loaded: LoadedConfig) -> Pinning | None:
    """``launch.cpus`` checked against this host, or None when the config pins nothing."""
    launch = loaded.config.target.launch
    if launch is None or launch.cpus is None:
        return None
    where = f"{loaded.path}: target.launch.cpus"
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError(f"{where}: this OS gives processes no CPU affinity (Linux does); "
                          "remove cpus")
    server = frozenset(launch.cpus)
    online = online_cpus()
    missing = sorted(server - online)
    if missing:
        raise ConfigError(f"{where}: CPU {missing[0]} is not a CPU of this host (its CPUs: "
                          f"{format_cpu_list(online)}); list CPUs it has, e.g. cpus: "
                          f"[{min(online)}]")
    mine = usable_cpus()
    client = mine - server
    if not client:
        raise ConfigError(f"{where}: [{', '.join(map(str, sorted(server)))}] leaves the tracker's "
                          f"client no CPU (it may use {format_cpu_list(mine)}); leave at least "
                          "one of those out of cpus, or run the tracker on another CPU "
                          "(taskset -c N tracker run …)")
    return Pinning(server, frozenset(client))


def is_vllm_cpu_build(command: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether ``command`` runs vLLM's CPU build: "cpu" in the installed ``vllm``'s version, as
    vLLM's own platform check reads it (or ``VLLM_TARGET_DEVICE=cpu``). It is False when it
    cannot be told (a container command, no vLLM on the PATH)."""
    if env.get("VLLM_TARGET_DEVICE", "").lower() == "cpu":
        return True
    # imported here: vllm_install imports the launcher, which imports this module
    from tracker.targets.vllm_install import find_launch_python, read_installed_version

    found = find_launch_python(command, env.get("PATH"))
    version = None if found is None else read_installed_version(found[1], env)
    return version is not None and "cpu" in version


def build_pinning_env(loaded: LoadedConfig, pinning: Pinning, command: Sequence[str],
                      env: Mapping[str, str]) -> dict[str, str]:
    """What vLLM's CPU build needs to keep its OpenMP threads on the server's CPUs, less what
    ``env`` (the server's environment: launch.env, env_from, passed-through VLLM_*) sets."""
    if not is_vllm_cpu_build(command, env):
        return {}
    ranks = loaded.config.engine.tensor_parallel_size or 1
    cpus = sorted(pinning.server)
    if ranks > len(cpus) and THREADS_BIND not in env:
        raise ConfigError(f"{loaded.path}: target.launch.cpus: {len(cpus)} CPUs for "
                          f"tensor_parallel_size {ranks}: give each rank at least one, or set "
                          f"{THREADS_BIND} in launch.env")
    share, extra = divmod(len(cpus), ranks)
    lists, first = [], 0
    for rank in range(ranks):
        count = share + (1 if rank < extra else 0)
        lists.append(format_cpu_list(cpus[first:first + count]))
        first += count
    wanted = {THREADS_BIND: "|".join(lists), RESERVED_CPUS: "0"}
    return {name: value for name, value in wanted.items() if name not in env}


def _threads() -> list[int]:
    """The ids of this process's threads (just this one where /proc is missing)."""
    try:
        return [int(name) for name in os.listdir(_TASKS)]
    except OSError:
        return [0]


def _affinity(thread: int) -> frozenset[int] | None:
    try:
        return frozenset(os.sched_getaffinity(thread))
    except OSError:  # the thread ended
        return None


def _set_affinity(thread: int, cpus: Iterable[int]) -> None:
    with contextlib.suppress(OSError):  # the thread ended
        os.sched_setaffinity(thread, set(cpus))


@contextlib.contextmanager
def keep_client_off(server: frozenset[int]) -> Iterator[None]:
    """Keep every thread of this process off ``server`` until the block ends, then put each back
    on its mask from before (a thread started meanwhile: the mask of the thread that entered).
    Blocks nest: one launched server at a time per tracker (runs are sequential)."""
    entered = usable_cpus()
    saved = {thread: mask for thread in _threads()
             if (mask := _affinity(thread)) is not None}
    for thread, mask in saved.items():
        _set_affinity(thread, (mask - server) or (entered - server))
    try:
        yield
    finally:
        for thread in _threads():
            _set_affinity(thread, saved.get(thread, entered))
