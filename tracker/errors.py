"""Every error a user can cause, in one tree, and the one table of exit codes.

    TrackerError                     exit code
    ├── UsageError                   2  bad command line
    │   └── LockHeldError            2  another process holds the scheduler's (or worker's) lock
    ├── ConfigError                  2  a config, suite, schedule or quality set is missing or invalid
    │   ├── SecretInConfigError      2  a literal key or token where only a variable name belongs
    │   └── QualitySetError          2  a quality set file or one of its items is invalid
    ├── StoreError                   2  the database URL is wrong or the schema at the wrong revision
    │   ├── NotFoundError            2  a run (or another stored thing) asked for does not exist
    │   ├── StoreLockedError         3  another process held a lock on the database for too long
    │   └── StoreWriteError          3  the database could not be written (disk full, read-only)
    ├── OutputWriteError             3  a result or report file could not be written (disk full)
    ├── MeasurementError             3  the target could not be measured (would not start, no answer)
    └── RunInterrupted             130  Ctrl-C or SIGTERM: what was measured is kept, marked partial

The CLI catches ``TrackerError`` once, prints ``error: <message>`` and exits with ``exit_code``.
Exit code 1 is not an error: it is the verdict "regression found". Every process the tracker runs
exits with a code from ``ExitCode`` (the supervisor of a launched server too).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # done; the gate passed; the endpoint is ready
    REGRESSION = 1  # the gate found a regression (a verdict, not an error)
    USAGE = 2  # bad command line, config, suite, schedule or database URL
    NOT_MEASURED = 3  # the target (or the store) could not be measured or written
    INTERNAL = 70  # a bug in the tracker (EX_SOFTWARE): one line, and please report it
    CANNOT_EXECUTE = 127  # a launched server's command could not be started (the shell's code)
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT); what was measured is kept


class TrackerError(Exception):
    """Base of every error the user can cause.

    The message says what failed, where, the bad value and the fix.
    """

    exit_code: int = ExitCode.USAGE


class UsageError(TrackerError):
    exit_code = ExitCode.USAGE


class LockHeldError(UsageError):
    """Another process holds the lock (a second scheduler, a second SQLite worker)."""


class ConfigError(TrackerError):
    exit_code = ExitCode.USAGE


class SecretInConfigError(ConfigError):
    """A literal secret in a config: the value is never shown, the fix names the variable way."""


class QualitySetError(ConfigError):
    """A quality set file is missing or one of its items is invalid."""


class StoreError(TrackerError):
    exit_code = ExitCode.USAGE


class NotFoundError(StoreError):
    """A run (or another stored thing) asked for by id or name does not exist."""


class StoreLockedError(StoreError):
    """A write waited longer than the busy (or lock) timeout. What was stored before is kept."""

    exit_code = ExitCode.NOT_MEASURED


class StoreWriteError(StoreError):
    """The database refused a write (its disk is full, the file is read-only). What was stored
    before is kept, and a run cut short by it is closed as partial by the next reader."""

    exit_code = ExitCode.NOT_MEASURED


class OutputWriteError(TrackerError):
    """A result or report file could not be written (disk full). No half-written file is left."""

    exit_code = ExitCode.NOT_MEASURED


class MeasurementError(TrackerError):
    exit_code = ExitCode.NOT_MEASURED


class RunInterrupted(TrackerError):
    """The run was stopped by Ctrl-C or SIGTERM. The message says what was kept."""

    exit_code = ExitCode.INTERRUPTED
