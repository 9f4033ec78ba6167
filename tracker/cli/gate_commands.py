"""The ``diff`` and ``gate`` commands: parsing here, wiring in cmd_*, the work in tracker.gate.config_refs,
tracker.gate.gating and tracker.reports.gate_report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tracker.cli.run_commands import write_json, write_text
from tracker.errors import UsageError
from tracker.gate.config_refs import compute_config_diff, load_config_ref, render_diff_text
from tracker.gate.gating import (
    GATE_METRICS,
    GateOptions,
    GateResult,
    compare_stored_runs,
    run_config_gate,
)
from tracker.inputs.suites import load_suite
from tracker.redaction import redact_text
from tracker.reports.gate_report import render_gate_json, render_gate_junit, render_gate_markdown
from tracker.store.db import open_store, resolve_db_url

COMMANDS = ("diff", "gate")
EXIT_OK = 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                add_db: Callable[[argparse.ArgumentParser], None]) -> None:
    diff = sub.add_parser("diff", help="show what differs between two serving-config versions")
    diff.add_argument("base", metavar="A", help="a config file, a git ref such as "
                      "main:configs/prod.yaml, or a stored version (NAME@VERSION or 6+ hex digits)")
    diff.add_argument("head", metavar="B", help="the same kinds as A")
    add_db(diff)

    gate = sub.add_parser("gate", help="fail a PR whose serving config regresses: run base and "
                                       "head interleaved, or compare stored runs")
    gate.add_argument("--base", metavar="REF", help="base config: file, git ref or stored version")
    gate.add_argument("--head", metavar="REF", help="head config: file, git ref or stored version")
    gate.add_argument("--suite", metavar="FILE", help="baseline suite YAML (with --base/--head)")
    gate.add_argument("--repeats", type=int, default=3, metavar="N",
                      help="runs of each config, interleaved ABAB (default: 3; the run is the "
                           "unit of replication)")
    gate.add_argument("--base-run", type=int, action="append", metavar="RUN_ID",
                      help="a stored base run (repeat for several)")
    gate.add_argument("--head-run", type=int, action="append", metavar="RUN_ID",
                      help="a stored head run (repeat for several)")
    add_db(gate)
    gate.add_argument("--markdown", metavar="OUT", help="write the Markdown report (PR comment)")
    gate.add_argument("--junit", metavar="OUT", help="write a JUnit XML report")
    gate.add_argument("--json", metavar="OUT", help="write the JSON verdict (- = stdout)")
    gate.add_argument("--min-effect", action="append", default=[], metavar="METRIC=FRACTION",
                      help="smallest relative change that counts, e.g. ttft_p99_s=0.1 "
                           "(defaults: 0.02 medians and throughput, 0.05 p99)")
    gate.add_argument("--confidence", type=float, default=0.95, metavar="LEVEL")
    gate.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    gate.add_argument("--quiet", action="store_true", help="no progress display")


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "diff":
        return cmd_diff(args.base, args.head, args.db)
    return cmd_gate(args)


def cmd_diff(base_ref: str, head_ref: str, db: str | None) -> int:
    base, head = load_config_ref(base_ref, db), load_config_ref(head_ref, db)
    changes = compute_config_diff(base.loaded.canonical, head.loaded.canonical)
    print(render_diff_text(base, head, changes))
    return EXIT_OK


def parse_min_effects(items: list[str]) -> dict[str, float]:
    known = {metric.name for metric in GATE_METRICS}
    effects: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not sep or name not in known or not 0.0 <= value < 1.0:
            raise UsageError(f"--min-effect {item}: expected METRIC=FRACTION with METRIC one of "
                             f"{', '.join(sorted(known))} and 0 <= FRACTION < 1, e.g. "
                             "ttft_p99_s=0.1")
        effects[name] = value
    return effects


def _options(args: argparse.Namespace) -> GateOptions:
    if not 0.5 < args.confidence < 1.0:
        raise UsageError(f"--confidence: must be between 0.5 and 1 (got {args.confidence})")
    return GateOptions(parse_min_effects(args.min_effect), args.confidence, args.seed)


def _check_mode(args: argparse.Namespace) -> bool:
    """True for configs (--base/--head/--suite), False for stored runs; usage errors otherwise."""
    by_config = any(v is not None for v in (args.base, args.head, args.suite))
    by_runs = bool(args.base_run or args.head_run)
    if by_config == by_runs:
        raise UsageError("gate: give either --base REF --head REF --suite FILE, or "
                         "--base-run ID --head-run ID (not both, not neither)")
    if by_config and None in (args.base, args.head, args.suite):
        raise UsageError("gate: --base, --head and --suite go together; give all three")
    if by_runs and not (args.base_run and args.head_run):
        raise UsageError("gate: give at least one --base-run and one --head-run")
    for target in (args.markdown, args.junit):
        if target and not Path(target).parent.is_dir():
            raise UsageError(f"{target}: directory {Path(target).parent} does not exist")
    return by_config


def cmd_gate(args: argparse.Namespace) -> int:
    by_config = _check_mode(args)
    options = _options(args)
    engine = open_store(resolve_db_url(args.db))
    try:
        if by_config:
            base = load_config_ref(args.base, args.db)
            head = load_config_ref(args.head, args.db)
            suite = load_suite(args.suite)
            result = run_config_gate(engine, base, head, suite, args.repeats, options,
                                     quiet=args.quiet)
        else:
            result = compare_stored_runs(engine, args.base_run, args.head_run, options)
    finally:
        engine.dispose()
    _write_reports(result, args)
    return result.exit_code


def _write_reports(result: GateResult, args: argparse.Namespace) -> None:
    """Each report through the one redaction (the Markdown becomes a public PR comment)."""
    markdown = render_gate_markdown(result)
    if args.markdown:
        write_text(args.markdown, markdown, "--markdown")
    if args.junit:
        write_text(args.junit, render_gate_junit(result), "--junit")
    if args.json:
        write_json(args.json, render_gate_json(result))
    if args.json != "-":
        sys.stdout.write(redact_text(markdown))
