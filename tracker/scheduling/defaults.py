"""The scheduling machinery's defaults, in a module of constants (the CLI's parser shows them
without importing the scheduler, the queue or the alerts)."""

from __future__ import annotations

DEFAULT_HEARTBEAT_S = 15.0
DEFAULT_STALE_AFTER_S = 120.0  # no heartbeat for this long: the worker is taken for dead
DEFAULT_MISFIRE_GRACE_S = 86400.0  # a slot missed by up to a day still runs (once)
DEFAULT_SYNC_INTERVAL_S = 30.0
WEBHOOK_ENV = "TRACKER_ALERT_WEBHOOK_URL"
