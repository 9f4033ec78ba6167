"""One event loop per command: uvloop where it is installed, asyncio's own otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(coro)


def event_loop_name() -> str:
    return "uvloop" if _loop_factory() is not None else "asyncio"
