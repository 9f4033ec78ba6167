"""What a tool call works with: the store, whether writes are allowed, and who is asking.

One ``ToolContext`` per call: the engine and URL are the server's, ``writes_allowed`` is the
``--allow-writes`` flag, and ``viewer`` is who a triage is recorded as (``local:<user>`` on stdio
and on a loopback address, the trusted proxy's user header otherwise). ``viewer`` is None when
the request does not say, and then a triage is refused.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass, replace

from sqlalchemy import Engine

from tracker.dashboard.access import AuthMode, compute_viewer

ALLOW_WRITES_FLAG = "--allow-writes"


@dataclass(frozen=True, slots=True)
class ToolContext:
    engine: Engine
    url: str
    writes_allowed: bool
    viewer: str | None = None

    def for_viewer(self, viewer: str | None) -> ToolContext:
        return replace(self, viewer=viewer)


def os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no $USER: a container's anonymous uid
        return "unknown"


def local_viewer() -> str | None:
    """Who a triage is recorded as when the server answers this machine only."""
    return compute_viewer(AuthMode.LOCAL, {}, (), os_user())
