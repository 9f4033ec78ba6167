"""``tracker demo``: the tracker's story on the built-in simulator (no GPU, no network, no keys).

The work is ``tracker.demo.story`` (the tuning walk, then the change that regresses, each run
watched as a worker does). This glue prints each night, raises the alert a worker would post,
runs the PR gate over the stored runs of the good and the bad version, writes its Markdown
report, and says where to look. It exits 0 when the story was told: the regression was caught
and the gate found it (a regression is the story here, not a failure). It exits 3 when it could
not be.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tracker.errors import ExitCode, MeasurementError, UsageError
from tracker.redaction import say

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from tracker.demo.story import DemoHistory, DemoVersion
    from tracker.gate.gating import GateResult
    from tracker.results import RunResult
    from tracker.scheduling.alerts import RegressionAlert
    from tracker.store.regressions import RegressionRecord

GATE_REPORT_NAME = "tracker-demo-gate.md"
DASHBOARD_PAGE = "http://127.0.0.1:8501"  # `tracker dashboard`'s default address


def find_work_tree(folder: Path) -> Path | None:
    """The git work tree ``folder`` is in (a ``.git`` there or in a parent), or None."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def find_demo_data_db(db: str | None, folder: Path, environ: Mapping[str, str]) -> Path | None:
    """Where the demo keeps its history when run inside a git work tree, or None.

    Given ``--db`` or ``$TRACKER_DB_URL``, the demo uses that database, and elsewhere the
    tracker's usual ``./tracker.db``. Inside a git work tree (this repository's checkout, or a
    user's own project) it writes nothing there: its database, rebuilt on each run, and its gate
    report go to ``$XDG_DATA_HOME/tracker/demo/`` (``~/.local/share`` when that is unset).
    """
    from tracker.store.db import DB_URL_ENV

    if db is not None or environ.get(DB_URL_ENV) or find_work_tree(folder) is None:
        return None
    data = Path(environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "tracker" / "demo" / "tracker.db"


def default_report_path(url: str) -> Path:
    """Beside a SQLite database file, or in the current directory for any other database."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() == "sqlite" and database and database != ":memory:":
        return Path(database).parent / GATE_REPORT_NAME
    return Path(GATE_REPORT_NAME)


def _report_path(url: str, given: str | None) -> Path:
    path = Path(given) if given else default_report_path(url)
    if not path.parent.is_dir():
        raise UsageError(f"--gate-report {path}: directory {path.parent} does not exist; create "
                         "it or choose another path")
    return path


def _db_flag(db: str | None, url: str) -> str:
    """`` --db …`` to open the same database (the password hidden), or none for the default one."""
    from tracker.store.db import redact_url

    if db is None:
        return ""
    return f" --db {db if '://' not in db else redact_url(url)}"


def render_record(record: RegressionRecord) -> str:
    direction = ("unknown" if record.regressed is None
                 else "regression" if record.regressed else "improvement")
    change = "" if record.rel_change is None else f" {record.rel_change:+.1%}"
    if change and record.interval is not None:
        change += f" [{record.interval[0]:+.1%}, {record.interval[1]:+.1%}]"
    return (f"change point in {record.series.metric} ({record.series.workload}){change} "
            f"({direction}) from run #{record.run_id}; attributed to: {record.attribution}")


def render_night(version: DemoVersion, run: RunResult, found: list[RegressionRecord]) -> str:
    summary = run.workloads[0].summary
    ttft = "-" if summary.ttft is None else f"{summary.ttft.p99_s * 1000:7.1f} ms"
    throughput = summary.output_throughput_tokens_per_s
    rate = "-" if throughput is None else f"{throughput:6.0f} tokens/s"
    lines = [f"{version.label:<24} run #{run.run_id:<4} TTFT p99 {ttft} · output {rate}"]
    return "\n".join([*lines, *(f"    {render_record(record)}" for record in found)])


def compute_alerts(history: DemoHistory) -> list[RegressionAlert]:
    """The alerts a worker posts for the caught regressions (one per metric)."""
    from tracker.metrics import REGISTRY
    from tracker.scheduling.alerts import RegressionAlert

    config = history.bad.runs[0].config
    alerts = []
    for record in history.caught:
        diff = tuple(part.strip() for part in (record.attribution or "").split(";")
                     if part.strip())
        metric = REGISTRY.get(record.series.metric)
        alerts.append(RegressionAlert(
            run_id=record.run_id or 0, config=f"{config.name}@{config.version[:12]}",
            suite=record.series.suite_name, metric=record.series.metric,
            rel_change=record.rel_change, interval=record.interval, before=record.before,
            after=record.after,
            unit="" if metric is None else metric.unit, workload=record.series.workload,
            config_diff=diff))
    return alerts


def run_gate(engine: Engine, history: DemoHistory) -> GateResult:
    """``tracker gate --base-run … --head-run …``: the bad version's runs against the good's."""
    from tracker.gate.gating import GateOptions, compare_stored_runs

    return compare_stored_runs(engine, history.good.run_ids, history.bad.run_ids, GateOptions())


def headline(history: DemoHistory) -> RegressionRecord:
    """The TTFT p99 regression the demo opens Trends on (else the first caught)."""
    from tracker.demo.story import HEADLINE_METRIC

    caught = history.caught
    return next((r for r in caught if r.series.metric == HEADLINE_METRIC), caught[0])


def _span(ids: tuple[int, ...]) -> str:
    return f"{ids[0]}-{ids[-1]}" if len(ids) > 1 else str(ids[0])


def render_story(history: DemoHistory, gate: GateResult, report: Path, url: str,
                 db_flag: str) -> str:
    """What the demo stored, and where to look."""
    from tracker.store.db import redact_url

    record = headline(history)
    good, bad = history.good, history.bad
    walk = " → ".join(f"{v.version.label} ({len(v.runs)} runs)" for v in history.versions)
    return "\n".join([
        f"The story, in {redact_url(url)}: {len(history.runs)} simulated runs of "
        f"{bad.runs[0].config.name} on {bad.runs[0].suite.name}",
        f"  versions    {walk}",
        f"  regression  #{record.id}: {render_record(record)}",
        f"  gate        {gate.outcome.value}: runs {_span(good.run_ids)} ({good.version.label}) "
        f"vs {_span(bad.run_ids)} ({bad.version.label}); report {report}",
        "Where to look:",
        f"  tracker dashboard{db_flag}",
        "    Overview: the open regressions · Trends: a diamond at each new config version, a red "
        "cross at the change point",
        f"    Compare: {DASHBOARD_PAGE}/compare?base={good.run_ids[-1]}&head={bad.run_ids[0]} "
        "(the Config diff tab)",
        f"  tracker show {bad.run_ids[0]}{db_flag}",
        f"  the gate report: {report}",
    ])


def cmd_demo(db: str | None, quiet: bool, gate_report: str | None = None) -> int:
    from tracker.cli.output import write_text
    from tracker.demo.story import build_history, load_demo
    from tracker.gate.gating import GateOutcome
    from tracker.reports.gate_report import render_gate_markdown
    from tracker.scheduling.alerts import render_alert_text
    from tracker.store.db import open_store, redact_url, resolve_db_url

    own = find_demo_data_db(db, Path.cwd(), os.environ)
    if own is not None:  # the demo's own file, outside the work tree: a fresh story each run
        own.parent.mkdir(parents=True, exist_ok=True)
        own.unlink(missing_ok=True)
        db = str(own)
    url = resolve_db_url(db)
    report = _report_path(url, gate_report)
    story = load_demo()
    engine = open_store(url)
    try:
        say(f"tracker demo: {story.config_name} through {len(story.walk) + 1} versions on the "
            f"simulator, into {redact_url(url)}")
        listener = None if quiet else (lambda v, r, f: say(render_night(v, r, f)))
        history = build_history(engine, story, listener)
        gate = run_gate(engine, history)
    finally:
        engine.dispose()
    write_text(str(report), render_gate_markdown(gate), "--gate-report")
    say("\nThe alerts a worker posts to $TRACKER_ALERT_WEBHOOK_URL:")
    for alert in compute_alerts(history):
        say("  " + render_alert_text(alert).replace("\n", "\n  "))
    say("\n" + render_story(history, gate, report, url, _db_flag(db, url)))
    if gate.outcome is not GateOutcome.REGRESSION:
        raise MeasurementError(f"demo: the gate of {history.bad.version.label} against "
                               f"{history.good.version.label} found {gate.outcome.value}, not the "
                               f"regression the watch caught; see {report}")
    return ExitCode.OK
