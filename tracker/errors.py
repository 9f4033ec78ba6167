"""Every error a user can cause, in one tree.

    TrackerError                 exit_code
    ├── UsageError               2  bad command line
    ├── ConfigError              2  a config, suite or schedule file is missing or invalid
    ├── SecretInConfigError      2  a literal key or token where only a variable name belongs
    ├── StoreError               2  the database URL is wrong or the schema is at the wrong revision
    │   └── StoreLockedError     3  another process held a lock on the database for too long
    └── MeasurementError         3  the target could not be measured (would not start, did not answer)

The CLI catches ``TrackerError`` once, prints ``error: <message>`` and exits with ``exit_code``.
Exit code 1 is not an error: it is the verdict "regression found".
"""

from __future__ import annotations


class TrackerError(Exception):
    """Base of every error the user can cause; the message says what, where, the value and the fix."""

    exit_code = 2


class UsageError(TrackerError):
    exit_code = 2


class ConfigError(TrackerError):
    exit_code = 2


class SecretInConfigError(ConfigError):
    exit_code = 2


class StoreError(TrackerError):
    exit_code = 2


class StoreLockedError(StoreError):
    """A write waited longer than the busy (or lock) timeout; what was stored before is kept."""

    exit_code = 3


class MeasurementError(TrackerError):
    exit_code = 3
