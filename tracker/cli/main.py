"""Command line: parse, dispatch, and the one place that turns errors into exit codes.

The exit codes are ``tracker.errors.ExitCode``: 0 pass, 1 regression found, 2 usage or config
error, 3 could not measure, 70 internal error (a bug), 130 interrupted (what was measured is
kept, marked partial). Each command's module is imported when that command runs, so a bad flag
or a hostile config file is answered before the load generator, the store or the dashboard load.
What a command prints passes the one redaction where it is printed (``tracker.redaction.say``,
the parser's own messages included), and what it logs passes it in the one log handler here.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from tracker.cli.parsers import build_parser, check_flags
from tracker.errors import ExitCode, TrackerError
from tracker.redaction import RedactingFormatter, say

SCHEDULE_COMMANDS = ("schedule", "scheduler", "worker", "queue")
LONG_RUNNING = ("scheduler", "worker")  # their log lines say when
MESSAGE_ONLY = "%(message)s"  # a command's warnings, as Python prints them unconfigured
TIMESTAMPED = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command (its module imported now, not before)."""
    command = args.command
    if command in ("run", "runs", "show", "db"):
        from tracker.cli import run_commands
        return run_commands.dispatch(args)
    if command == "demo":
        from tracker.cli import demo_command
        return demo_command.cmd_demo(args.db, args.quiet, args.gate_report)
    if command == "init":
        from tracker.cli import init_command
        return init_command.cmd_init(args.directory)
    if command == "dashboard":
        from tracker.cli import dashboard_command
        return dashboard_command.cmd_dashboard(args)
    if command == "mcp":
        from tracker.cli import mcp_command
        return mcp_command.cmd_mcp(args)
    if command == "bench":
        from tracker.cli import bench_command
        return bench_command.cmd_bench(args)
    if command == "import":
        from tracker.cli import import_command
        return import_command.cmd_import(args)
    if command == "export":
        from tracker.cli import export_command
        return export_command.cmd_export(args)
    if command == "sim":
        from tracker.cli import sim_command
        return sim_command.cmd_sim_serve(args.config, args.host, args.port)
    if command == "doctor":
        from tracker.cli import doctor_command
        return doctor_command.cmd_doctor(args)
    if command in SCHEDULE_COMMANDS:
        from tracker.cli import schedule_commands
        return schedule_commands.dispatch(args)
    if command == "bisect":
        from tracker.cli import bisect_command
        return bisect_command.cmd_bisect(args)
    if command in ("diff", "gate"):
        from tracker.cli import gate_commands
        return gate_commands.dispatch(args)
    raise AssertionError(f"unhandled command {command}")


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)


@contextmanager
def logging_to_stderr(line_format: str) -> Iterator[None]:
    """For one command: every log record of WARNING or above, Python's warnings included, goes
    to stderr as one redacted line. The handler is removed afterwards (a test, or any caller,
    may run several commands in one process)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(RedactingFormatter(line_format))
    root = logging.getLogger()
    root.addHandler(handler)
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        root.removeHandler(handler)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with logging_to_stderr(TIMESTAMPED if args.command in LONG_RUNNING else MESSAGE_ONLY):
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    try:
        check_flags(args)  # before the command's modules load: a bad combination answers at once
        return dispatch(args)
    except TrackerError as exc:
        say(f"error: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        say("interrupted", err=True)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `tracker runs | head`: the reader has all it wanted
        _silence_stdout()
        return ExitCode.OK
    except Exception as exc:  # the job boundary: a bug, reported in one line
        if os.environ.get("TRACKER_DEBUG"):
            say(traceback.format_exc(), err=True, end="")
        say(f"error: internal error: {type(exc).__name__}: {exc} (set TRACKER_DEBUG=1 for the "
            "traceback and please report it)", err=True)
        return ExitCode.INTERNAL
