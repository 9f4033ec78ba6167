"""``tracker run``, ``runs``, ``show`` and ``db upgrade``: the glue between the arguments and the
work (a run's inputs are read and checked before anything heavy is loaded)."""

from __future__ import annotations

import argparse

from tracker.cli.output import reading, run_exit_code, write_json
from tracker.errors import ExitCode
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.redaction import say


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "run":
        return cmd_run(args.config, args.suite, args.db, args.json, args.quiet)
    if args.command == "runs":
        return cmd_runs(args.db, args.limit)
    if args.command == "show":
        return cmd_show(args.run_id, args.db, args.json)
    return cmd_db_upgrade(args.db)


def cmd_run(config_path: str, suite_path: str, db: str | None, json_out: str | None,
            quiet: bool) -> int:
    config, suite = load_config(config_path), load_suite(suite_path)  # bad input fails first
    from tracker.pipeline.execute import execute_suite
    from tracker.reports.run_report import render_run_json, render_run_text
    from tracker.runner.progress import ProgressPrinter
    from tracker.store.db import open_store, resolve_db_url

    engine = open_store(resolve_db_url(db))
    try:
        run = execute_suite(engine, config, suite, None if quiet else ProgressPrinter())
    finally:
        engine.dispose()
    if json_out:
        write_json(json_out, render_run_json(run))
    if json_out != "-":
        say(render_run_text(run))
    return run_exit_code(run)


def cmd_runs(db: str | None, limit: int) -> int:
    from tracker.reports.run_report import render_table
    from tracker.results import NATIVE_SOURCE
    from tracker.store.runs import fetch_runs

    with reading(db) as session:
        listings = fetch_runs(session, limit)
    if not listings:
        say("no runs yet; start with `tracker demo` or `tracker run --config ... --suite ...`")
        return ExitCode.OK
    rows = [[str(r.run_id), r.status.value + (" [sim]" if r.simulated else "")
             + ("" if r.source == NATIVE_SOURCE else f" [{r.source}]"),
             f"{r.config_name}@{r.config_version[:12]}", r.suite_name,
             r.started_at.strftime("%Y-%m-%d %H:%M:%S %Z"), str(r.workloads),
             str(r.completed), str(r.failed)] for r in listings]
    say(render_table(("run", "status", "config", "suite", "started", "workloads", "ok",
                      "failed"), rows))
    return ExitCode.OK


def cmd_show(run_id: int, db: str | None, json_out: str | None) -> int:
    from tracker.reports.run_report import render_run_json, render_run_text
    from tracker.store.runs import fetch_run

    with reading(db) as session:
        run = fetch_run(session, run_id)
    if json_out:
        write_json(json_out, render_run_json(run))
    if json_out != "-":
        say(render_run_text(run))
    return ExitCode.OK


def cmd_db_upgrade(db: str | None) -> int:
    from tracker.store.db import redact_url, resolve_db_url, upgrade_database

    url = resolve_db_url(db)
    before, after = upgrade_database(url)
    if before == after:
        say(f"{redact_url(url)}: already at revision {after}")
    else:
        say(f"{redact_url(url)}: upgraded from {before or 'empty'} to {after}")
    return ExitCode.OK
