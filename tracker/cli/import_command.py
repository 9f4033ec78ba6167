"""``tracker import FILE``: another tool's result file into the store, one run per benchmark.

The file is read and mapped first (``tracker.imports``): a bad file fails before the store is
opened. A file already imported (same sha256) adds nothing.
"""

from __future__ import annotations

import argparse
import re

from tracker.errors import ExitCode, UsageError
from tracker.imports import ImportedRun, load_imported
from tracker.inputs.configs import NAME_MAX_CHARS, NAME_PATTERN


def check_name(flag: str, name: str) -> str:
    """A config's or suite's name as the configs spell theirs (the store's 200 characters)."""
    if len(name) > NAME_MAX_CHARS or not re.fullmatch(NAME_PATTERN, name):
        shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"
        raise UsageError(f"{flag} {shown}: a name is 1 to {NAME_MAX_CHARS} letters, digits, "
                         "'.', '_' or '-', starting with a letter or digit; e.g. --config "
                         "llama-8b (the serving config's name in its YAML)")
    return name


def cmd_import(args: argparse.Namespace) -> int:
    check_name("--config", args.config)
    if args.suite is not None:
        check_name("--suite", args.suite)
    runs = load_imported(args.file, args.format)
    if not runs:
        print(f"{args.file}: no benchmark in the file; nothing imported")
        return ExitCode.OK
    from sqlalchemy.orm import Session

    from tracker.store.db import open_store, resolve_db_url
    from tracker.store.imported_runs import (
        fetch_imported_run_ids,
        save_import_config,
        save_import_suite,
        save_imported_run,
    )

    tool = runs[0].tool
    engine = open_store(resolve_db_url(args.db))
    try:
        with Session(engine) as session, session.begin():
            already = fetch_imported_run_ids(session, runs[0].sha256)
            if already:
                print(f"{args.file}: already imported (sha256 {runs[0].sha256[:12]}, run "
                      f"{', '.join(map(str, already))}); nothing added")
                return ExitCode.OK
            config_id = save_import_config(session, args.config, tool)
            suite_id = save_import_suite(session, args.suite or f"imported-{tool}", tool,
                                         [run.workload.name for run in runs])
            ids = [save_imported_run(session, run, config_id, suite_id) for run in runs]
    finally:
        engine.dispose()
    for run_id, run in zip(ids, runs, strict=True):
        print(render_imported_line(run_id, run))
    return ExitCode.OK


def render_imported_line(run_id: int, run: ImportedRun) -> str:
    summary = run.workload.summary
    version = f" {run.tool_version}" if run.tool_version else ""
    line = (f"run {run_id}: imported from {run.tool}{version} (benchmark {run.benchmark}, "
            f"sha256 {run.sha256[:12]}): workload {run.workload.name}, {summary.completed} ok, "
            f"{summary.failed} failed")
    return "\n".join([line, *(f"  note: {note}" for note in run.notes)])
