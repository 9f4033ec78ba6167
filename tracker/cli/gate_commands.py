"""``tracker diff`` and ``tracker gate``: the glue between their arguments (tracker.cli.parsers)
and the work (tracker.gate, tracker.reports.gate_report), imported when the command runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tracker.cli.output import write_json, write_text
from tracker.errors import ExitCode, UsageError
from tracker.gate.config_refs import load_config_ref
from tracker.inputs.config_diff import compute_config_diff
from tracker.inputs.suites import load_suite
from tracker.redaction import say
from tracker.reports.diff_report import render_diff_text

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from tracker.bisection.probes import BisectResult
    from tracker.gate.config_refs import ConfigSide
    from tracker.gate.gating import GateDesign, GateOptions, GateResult


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "diff":
        return cmd_diff(args.base, args.head, args.db)
    return cmd_gate(args)


def cmd_diff(base_ref: str, head_ref: str, db: str | None) -> int:
    base, head = load_config_ref(base_ref, db), load_config_ref(head_ref, db)
    changes = compute_config_diff(base.loaded.canonical, head.loaded.canonical)
    say(render_diff_text(base.title, head.title, changes))
    return ExitCode.OK


def parse_min_effects(items: list[str]) -> dict[str, float]:
    from tracker.gate.gating import GATE_METRICS
    from tracker.gate.memory import MEMORY_METRIC
    from tracker.gate.quality_check import ACCURACY

    known = ({metric.name for metric in GATE_METRICS} | {MEMORY_METRIC.name}
             | {ACCURACY})  # accuracy's: absolute
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


def compute_options(args: argparse.Namespace) -> GateOptions:
    from tracker.gate.gating import GateOptions

    if not 0.5 < args.confidence < 1.0:
        raise UsageError(f"--confidence: must be between 0.5 and 1 (got {args.confidence})")
    return GateOptions(parse_min_effects(args.min_effect), args.confidence)


def compute_design(args: argparse.Namespace) -> GateDesign:
    """Sequential with at most --max-rounds (default: 3 where earlier base runs give the
    run-to-run noise, else 6), or a fixed --repeats N."""
    from tracker.gate.gating import DEFAULT_MAX_ROUNDS, DEFAULT_MAX_ROUNDS_WITH_PRIOR, GateDesign

    whole = not getattr(args, "quality_sample", False)
    if args.repeats is not None:
        return GateDesign(args.repeats, sequential=False, quality_whole=whole)
    if args.max_rounds is not None:
        return GateDesign(args.max_rounds, quality_whole=whole)
    return GateDesign(DEFAULT_MAX_ROUNDS, rounds_with_prior=DEFAULT_MAX_ROUNDS_WITH_PRIOR,
                      quality_whole=whole)


def _check_mode(args: argparse.Namespace) -> bool:
    """True for configs (--base/--head/--suite), False for stored runs (the flags' combinations
    were checked before this module loaded: ``tracker.cli.parsers.check_flags``).

    A report's directory must exist."""
    by_config = args.base is not None
    for target in (args.markdown, args.junit):
        if target and not Path(target).parent.is_dir():
            raise UsageError(f"{target}: directory {Path(target).parent} does not exist")
    return by_config


def cmd_gate(args: argparse.Namespace) -> int:
    from tracker.gate.gating import compare_stored_runs, run_config_gate
    from tracker.store.db import open_store, resolve_db_url

    by_config = _check_mode(args)
    options = compute_options(args)
    design = compute_design(args) if by_config else None
    if args.bisect:
        from tracker.cli.bisect_command import compute_budget

        compute_budget(args)  # a bad budget is refused before anything runs
    bisect = None
    engine = open_store(resolve_db_url(args.db))
    try:
        if design is not None:
            base = load_config_ref(args.base, args.db)
            head = load_config_ref(args.head, args.db)
            suite = load_suite(args.suite)
            check_sides_engines(base, head)
            result = run_config_gate(engine, base, head, suite, design, options,
                                     quiet=args.quiet)
            if args.bisect and result.exit_code == ExitCode.REGRESSION:
                from tracker.cli.bisect_command import run_gate_bisection

                bisect = run_gate_bisection(engine, (base, head), suite, result, args)
        else:
            result = compare_stored_runs(engine, args.base_run, args.head_run, options)
        warnings = fetch_gate_warnings(engine, result)
    finally:
        engine.dispose()
    write_reports(result, args, bisect, warnings)
    return result.exit_code


def fetch_gate_warnings(engine: Engine, result: GateResult) -> dict[int, tuple[str, ...]]:
    """The server-check warnings of the gate's runs, by run id (shown in its reports)."""
    from sqlalchemy.orm import Session

    from tracker.store.runs import fetch_run_warnings

    with Session(engine) as session:
        return fetch_run_warnings(session, [*result.base_run_ids, *result.head_run_ids])


def check_sides_engines(*sides: ConfigSide) -> None:
    """Each side's engine block against the vLLM that will run it, before the first round."""
    from tracker.targets.vllm_install import check_vllm_engine

    for side in sides:
        check_vllm_engine(side.loaded)


def write_reports(result: GateResult, args: argparse.Namespace,
                  bisect: BisectResult | None = None,
                  warnings: Mapping[int, Sequence[str]] | None = None) -> None:
    """Each report through the one redaction (the Markdown becomes a public PR comment). On a
    terminal the report is printed as text, and piped or redirected as the Markdown."""
    from tracker.reports.gate_report import (
        render_gate_json,
        render_gate_junit,
        render_gate_markdown,
        render_terminal_text,
    )

    markdown = render_gate_markdown(result, bisect, warnings)
    if args.markdown:
        write_text(args.markdown, markdown, "--markdown")
    if args.junit:
        write_text(args.junit, render_gate_junit(result), "--junit")
    if args.json:
        write_json(args.json, render_gate_json(result, bisect, warnings))
    if args.json != "-":
        shown = render_terminal_text(markdown) if sys.stdout.isatty() else markdown
        say(shown, end="")
