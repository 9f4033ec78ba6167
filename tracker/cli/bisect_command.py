"""``tracker bisect`` and ``tracker gate --bisect``: the glue between their arguments
(tracker.cli.parsers) and the work (tracker.bisection.probes, tracker.reports.bisect_report).

``tracker bisect`` runs the gate first (its rounds are the base and head controls). A head that
does not regress is reported as such without a probe. The exit code is the gate's.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tracker.errors import UsageError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from tracker.bisection.probes import BisectBudget, BisectResult
    from tracker.gate.config_refs import ConfigSide
    from tracker.gate.gating import GateResult
    from tracker.inputs.suites import LoadedSuite


def compute_budget(args: argparse.Namespace) -> BisectBudget:
    from tracker.bisection.probes import DEFAULT_MAX_PROBES, BisectBudget

    probes = DEFAULT_MAX_PROBES if args.max_probes is None else args.max_probes
    return BisectBudget(probes, args.max_minutes)  # UsageError for a bad flag


def run_gate_bisection(engine: Engine, sides: tuple[ConfigSide, ConfigSide],
                       suite: LoadedSuite, gate: GateResult,
                       args: argparse.Namespace) -> BisectResult:
    """Bisect what ``gate`` found, with the gate's design and options."""
    from tracker.bisection.probes import run_bisection
    from tracker.cli.gate_commands import compute_design, compute_options

    budget = compute_budget(args)
    return run_bisection(engine, sides[0], sides[1], suite, gate, compute_design(args),
                         compute_options(args), budget, quiet=args.quiet)


def cmd_bisect(args: argparse.Namespace) -> int:
    from tracker.cli.gate_commands import (
        check_sides_engines,
        compute_design,
        compute_options,
        write_reports,
    )
    from tracker.gate.config_refs import load_config_ref
    from tracker.gate.gating import run_config_gate
    from tracker.inputs.suites import load_suite
    from tracker.store.db import open_store, resolve_db_url

    compute_budget(args)  # a bad budget or report path is refused before anything runs
    if args.markdown and not Path(args.markdown).parent.is_dir():
        raise UsageError(f"{args.markdown}: directory {Path(args.markdown).parent} does not "
                         "exist")
    design, options = compute_design(args), compute_options(args)
    base = load_config_ref(args.base, args.db)
    head = load_config_ref(args.head, args.db)
    suite = load_suite(args.suite)
    check_sides_engines(base, head)  # a flag the vLLM refuses fails before the first round
    engine = open_store(resolve_db_url(args.db))
    try:
        gate = run_config_gate(engine, base, head, suite, design, options, quiet=args.quiet)
        bisect = run_gate_bisection(engine, (base, head), suite, gate, args)
    finally:
        engine.dispose()
    write_reports(gate, args, bisect)
    return gate.exit_code
