"""Running the simulator: in the caller's event loop, in a thread of its own, or in the foreground.

``SimServer`` serves on the caller's loop. ``ThreadedSimServer`` gives the server a loop in a
daemon thread, so its work never competes with a load generator's loop. ``serve_forever`` is
``tracker sim serve``. All three raise ``MeasurementError`` when the simulator cannot start.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable
from types import TracebackType

from aiohttp import web

from tracker.errors import MeasurementError, TrackerError
from tracker.inputs.configs import ServingConfig
from tracker.sim.app import create_app
from tracker.sim.engine import Engine

_SHUTDOWN_TIMEOUT_S = 2.0  # grace for in-flight handlers; the engine has ended their requests
DEFAULT_START_TIMEOUT_S = 10.0


def _format_base_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class SimServer:
    """The simulator on the running event loop: ``async with SimServer(cfg) as server: ...``.

    Each start runs a fresh engine. The n-th start draws the run factor of ordinal
    ``run_ordinal + n``, so a server restarted for each repeat varies like repeated runs."""

    def __init__(self, config: ServingConfig, host: str = "127.0.0.1", port: int = 0, *,
                 run_ordinal: int = 0) -> None:
        self.config = config
        self.host = host
        self.port = port  # 0 asks the OS for a free port; base_url has the real one
        self._next_run_ordinal = run_ordinal
        self._engine: Engine | None = None
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (no ``/v1``)."""
        if self._base_url is None:
            raise RuntimeError("the simulator is not started: call start() or use `async with`")
        return self._base_url

    @property
    def run_factor(self) -> float:
        """The speed factor the running engine drew for this run."""
        if self._engine is None:
            raise RuntimeError("the simulator is not started: call start() or use `async with`")
        return self._engine.run_factor

    async def start(self) -> str:
        if self._base_url is not None:
            return self._base_url
        # raises MeasurementError for a KV cache vLLM would refuse
        engine = Engine(self.config, run_ordinal=self._next_run_ordinal)
        self._next_run_ordinal += 1
        engine.start()
        runner = web.AppRunner(
            create_app(self.config, engine), access_log=None, handle_signals=False,
            shutdown_timeout=_SHUTDOWN_TIMEOUT_S,
            handler_cancellation=True,  # a client that goes away frees its engine slot at once
        )
        try:
            await runner.setup()
            await web.TCPSite(runner, self.host, self.port).start()
        except OSError as exc:
            await runner.cleanup()
            await engine.close()
            raise MeasurementError(
                f"simulator: cannot listen on {self.host}:{self.port}: {exc.strerror or exc}; "
                "choose another host or port (port 0 picks a free one)"
            ) from exc
        self._engine, self._runner = engine, runner
        self._base_url = _format_base_url(self.host, int(runner.addresses[0][1]))
        return self._base_url

    async def stop(self) -> None:
        """End in-flight requests, stop listening and stop the engine. It is safe to call twice."""
        engine, runner = self._engine, self._runner
        self._engine = self._runner = None
        self._base_url = None
        if engine is not None:
            await engine.close()
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()


class ThreadedSimServer:
    """A ``SimServer`` on its own event loop in a daemon thread: ``with ThreadedSimServer(cfg)``."""

    def __init__(
        self, config: ServingConfig, host: str = "127.0.0.1", port: int = 0,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S, *, run_ordinal: int = 0,
    ) -> None:
        self._server = SimServer(config, host, port, run_ordinal=run_ordinal)
        self._start_timeout_s = start_timeout_s
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None
        self._error: Exception | None = None
        self._base_url: str | None = None

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("the simulator is not started: call start() or use `with`")
        return self._base_url

    @property
    def run_factor(self) -> float:
        """The running engine's speed draw for this run (see ``SimServer.run_factor``)."""
        return self._server.run_factor

    def start(self) -> str:
        """Start the thread, block until the server listens, and return the base URL."""
        if self._thread is not None:
            raise RuntimeError("this ThreadedSimServer was already started")
        self._thread = threading.Thread(target=self._main, name="tracker-sim", daemon=True)
        self._thread.start()
        if not self._ready.wait(self._start_timeout_s):
            self.stop()
            raise MeasurementError(
                f"simulator: not listening on {self._server.host}:{self._server.port} after "
                f"{self._start_timeout_s:g} s; the machine may be overloaded, retry"
            )
        if self._error is not None:
            self.stop()
            if isinstance(self._error, TrackerError):
                raise self._error
            raise MeasurementError(f"simulator: could not start: {self._error!r}") from self._error
        return self.base_url

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the server and join the thread. It is safe to call twice."""
        thread = self._thread
        if thread is None:
            return
        self._stopping.set()
        loop, stop_requested = self._loop, self._stop_requested
        if loop is not None and stop_requested is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(stop_requested.set)
        thread.join(timeout_s)
        self._thread = None
        self._base_url = None

    def __enter__(self) -> ThreadedSimServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        try:
            self._base_url = await self._server.start()
        except Exception as exc:  # job boundary: handed to start() in the caller's thread
            self._error = exc
            self._ready.set()
            return
        self._stop_requested = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._ready.set()
        try:
            if not self._stopping.is_set():
                await self._stop_requested.wait()
        finally:
            await self._server.stop()


def serve_forever(
    config: ServingConfig, host: str, port: int,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve in the foreground until SIGINT or SIGTERM, and give ``on_ready`` the base URL."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_until_signalled(config, host, port, on_ready))


async def _serve_until_signalled(
    config: ServingConfig, host: str, port: int, on_ready: Callable[[str], None] | None
) -> None:
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    installed: list[signal.Signals] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, stop_requested.set)
            installed.append(signum)
    try:
        async with SimServer(config, host, port) as server:
            if on_ready is not None:
                on_ready(server.base_url)
            await stop_requested.wait()
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
