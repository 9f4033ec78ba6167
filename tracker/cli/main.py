"""Command line: parse, dispatch, and the one place that turns errors into exit codes.

The exit codes are ``tracker.errors.ExitCode``: 0 pass, 1 regression found, 2 usage or config
error, 3 could not measure, 70 internal error (a bug), 130 interrupted (what was measured is
kept, marked partial). Each command's module is imported when that command runs, so a bad flag
or a hostile config file is answered before the load generator, the store or the dashboard load.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from tracker.cli.parsers import build_parser, check_flags
from tracker.errors import ExitCode, TrackerError
from tracker.redaction import redacted_output

SCHEDULE_COMMANDS = ("schedule", "scheduler", "worker", "queue")


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


def main(argv: list[str] | None = None) -> int:
    with redacted_output():  # nothing secret is printed or logged, whatever the command does
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        check_flags(args)  # before the command's modules load: a bad combination answers at once
        return dispatch(args)
    except TrackerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `tracker runs | head`: the reader has all it wanted
        _silence_stdout()
        return ExitCode.OK
    except Exception as exc:  # the job boundary: a bug, reported in one line
        if os.environ.get("TRACKER_DEBUG"):
            traceback.print_exc()
        print(f"error: internal error: {type(exc).__name__}: {exc} (set TRACKER_DEBUG=1 for the "
              "traceback and please report it)", file=sys.stderr)
        return ExitCode.INTERNAL
