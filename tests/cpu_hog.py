"""A bounded CPU hog: one busy loop per core, as a busy GPU host or a shared CI machine has.

Each loop is a separate Python process that spins until its deadline (never longer than
``seconds``), so a test that dies cannot leave the machine loaded; leaving the ``with`` block
kills them at once. Used by the tests that judge verdicts under load and by
``bench/gate_under_load.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def count_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@contextmanager
def cpu_hog(seconds: float = 600.0, processes: int | None = None) -> Iterator[int]:
    """Busy loops on every core (or ``processes`` of them) for at most ``seconds``; yields how
    many were started."""
    count = processes if processes is not None else count_cores()
    code = SPIN.format(seconds=float(seconds))
    spinners = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(count)]
    try:
        yield count
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
