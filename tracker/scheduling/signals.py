"""SIGTERM and SIGINT as a stop request for the long-running commands (scheduler, worker)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_on_signals(on_stop: Callable[[str], None]) -> Iterator[None]:
    """Call ``on_stop(signal name)`` on SIGTERM/SIGINT while inside (a no-op off the main thread).

    ``on_stop`` runs in the main thread between two bytecodes: it must only set flags or hand
    work to other threads (``loop.call_soon_threadsafe``), never block.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        on_stop(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
