"""Waiting on a condition, never on the clock: poll a predicate until it holds or a deadline
passes (then fail, naming what never happened)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str,
             interval_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


async def wait_for_async(condition: Callable[[], Awaitable[bool]], timeout_s: float, what: str,
                         interval_s: float = 0.01) -> None:
    """``wait_for`` on the running event loop, for a condition that has to be awaited."""
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(interval_s)
