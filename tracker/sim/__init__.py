"""The embedded OpenAI-compatible simulator: a continuous-batching time model behind aiohttp.

``SimServer`` (async), ``ThreadedSimServer`` (own loop in a daemon thread) and ``serve_forever``
(``tracker sim serve``) are the entry points. See ``tracker.sim.engine`` for the performance model.
"""

from tracker.sim.server import SimServer, ThreadedSimServer, serve_forever

__all__ = ["SimServer", "ThreadedSimServer", "serve_forever"]
