"""``tracker import FILE``: another tool's result file into the store, one run per benchmark.

The tracker's own ``tracker.run/1`` JSON goes in as the one run it describes (every workload,
its config's and suite's names, its simulated flag).

The file is read and mapped first (``tracker.ingest``): a bad file fails before the store is
opened. A file already imported (same sha256) adds nothing.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tracker.errors import ExitCode, UsageError
from tracker.ingest import ImportedRun, load_imported
from tracker.inputs.configs import NAME_MAX_CHARS, NAME_PATTERN
from tracker.redaction import say
from tracker.results import RunStatus

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def check_name(flag: str, name: str) -> str:
    """A config's or suite's name as the configs spell theirs (the store's 200 characters)."""
    if len(name) > NAME_MAX_CHARS or not re.fullmatch(NAME_PATTERN, name):
        shown = repr(name) if len(name) <= 60 else f"{name[:40]!r}... ({len(name)} characters)"
        raise UsageError(f"{flag} {shown}: a name is 1 to {NAME_MAX_CHARS} letters, digits, "
                         "'.', '_' or '-', starting with a letter or digit; e.g. --config "
                         "llama-8b (the serving config's name in its YAML)")
    return name


def resolve_names(file: str, config: str | None, suite: str | None,
                  runs: Sequence[ImportedRun]) -> tuple[str, str]:
    """The config's and suite's names: the flags', else the file's own (the tracker's JSON
    names them), else (suite only) ``imported-<tool>``. No config name is a usage error."""
    first = runs[0]
    if config is None and first.config_name is None:
        raise UsageError(f"{file}: a {first.tool} result file does not say which serving config "
                         "it measured: pass --config NAME (the config's name in its YAML, e.g. "
                         "--config llama-8b) to file the runs under")
    config_name = check_name("--config", config) if config is not None \
        else check_name(f"{file}: config.name", str(first.config_name))
    if suite is not None:
        return config_name, check_name("--suite", suite)
    if first.suite_name is not None:
        return config_name, check_name(f"{file}: suite.name", first.suite_name)
    return config_name, f"imported-{first.tool}"


def cmd_import(args: argparse.Namespace) -> int:
    if args.config is not None:
        check_name("--config", args.config)
    if args.suite is not None:
        check_name("--suite", args.suite)
    runs = load_imported(args.file, args.format)
    if not runs:
        say(f"{args.file}: no benchmark in the file; nothing imported")
        return ExitCode.OK
    config, suite = resolve_names(args.file, args.config, args.suite, runs)
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
                say(f"{args.file}: already imported (sha256 {runs[0].sha256[:12]}, run "
                    f"{', '.join(map(str, already))}); nothing added")
                return ExitCode.OK
            config_id = save_import_config(session, config, tool)
            suite_id = save_import_suite(session, suite, tool,
                                         [run.workload.name for run in runs])
            if tool == "tracker":  # one run of several workloads, as it was measured
                ids = [save_whole_run(session, runs, config_id, suite_id)] * len(runs)
            else:
                ids = [save_imported_run(session, run, config_id, suite_id) for run in runs]
    finally:
        engine.dispose()
    for run_id, run in zip(ids, runs, strict=True):
        say(render_imported_line(run_id, run))
    return ExitCode.OK


def save_whole_run(session: Session, runs: Sequence[ImportedRun], config_id: int,
                   suite_id: int) -> int:
    """Store the workloads of one tracker run (its own JSON) as one run, simulated or not as
    the original was, and return its id."""
    import tracker
    from tracker.store.runs import begin_run, finish_run, save_workload

    first = runs[0]
    run_id = begin_run(session, config_version_id=config_id, suite_id=suite_id,
                       started_at=min(run.started_at for run in runs), host=first.host,
                       tracker_version=tracker.__version__, simulated=first.simulated,
                       environment=first.environment)
    for position, run in enumerate(runs):
        save_workload(session, run_id, position, run.workload)
    workloads = [run.workload for run in runs]
    status, reason = RunStatus.COMPLETED, None
    if not any(w.summary.completed for w in workloads):
        status, reason = RunStatus.FAILED, "no request completed in the file"
    elif not all(w.complete for w in workloads):
        status, reason = RunStatus.PARTIAL, "a workload was cut short in the original run"
    finish_run(session, run_id, status, max(run.ended_at for run in runs), reason)
    return run_id


def render_imported_line(run_id: int, run: ImportedRun) -> str:
    summary = run.workload.summary
    version = f" {run.tool_version}" if run.tool_version else ""
    line = (f"run {run_id}: imported from {run.tool}{version} (benchmark {run.benchmark}, "
            f"sha256 {run.sha256[:12]}): workload {run.workload.name}, {summary.completed} ok, "
            f"{summary.failed} failed")
    return "\n".join([line, *(f"  note: {note}" for note in run.notes)])
