"""The scheduling commands: ``schedule list|add|remove|run-now``, ``scheduler``, ``worker``, ``queue``.

Their arguments are in ``tracker.cli.parsers``. The work, here, is imported when a command runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy.orm import Session

from tracker.cli.output import reading
from tracker.errors import ExitCode, UsageError
from tracker.redaction import say
from tracker.reports.run_report import render_table
from tracker.scheduling.alerts import load_webhook
from tracker.scheduling.locks import DatabaseLock
from tracker.scheduling.queueing import (
    enqueue_schedule,
    utc_now,
)
from tracker.scheduling.scheduler import (
    SchedulerSettings,
    TrackerScheduler,
)
from tracker.scheduling.schedules import (
    CLI_SOURCE,
    ScheduleSpec,
    build_schedule_row,
    compute_next_fire,
    load_schedules,
    parse_labels,
    parse_timezone,
)
from tracker.scheduling.signals import stop_on_signals
from tracker.scheduling.worker import Worker, WorkerSettings
from tracker.store.db import open_store, redact_url, resolve_db_url
from tracker.store.run_queue import RequestKind, RequestStatus, RunRequest, fetch_requests
from tracker.store.schedule_rows import (
    ScheduleRow,
    delete_schedule,
    fetch_schedules,
    replace_file_schedules,
    save_schedule,
)

# --- parsing -------------------------------------------------------------------------------


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "schedule":
        action = args.schedule_command
        if action == "list":
            return cmd_schedule_list(args.db)
        if action == "add":
            return cmd_schedule_add(args)
        if action == "remove":
            return cmd_schedule_remove(args.db, args.name)
        return cmd_schedule_run_now(args.db, args.name)
    if args.command == "scheduler":
        return cmd_scheduler(args)
    if args.command == "worker":
        return cmd_worker(args)
    return cmd_queue(args.db, args.all, args.limit)


# --- schedule ------------------------------------------------------------------------------


def _when(moment: datetime | None, timezone: str = "UTC") -> str:
    if moment is None:
        return "-"
    return moment.astimezone(parse_timezone(timezone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def cmd_schedule_list(db: str | None) -> int:
    with reading(db) as session:
        schedules = fetch_schedules(session)
    if not schedules:
        say("no schedules; add some with `tracker schedule add --file schedules.yaml`")
        return ExitCode.OK
    now = utc_now()
    rows = [[s.name, f"{s.cron} ({s.timezone})", _fan_out(s), _labels(s.labels),
             _bisect(s), _when(compute_next_fire(s, now), s.timezone), _when(s.last_fired_at),
             (s.last_error or "")[:60]] for s in schedules]
    say(render_table(("schedule", "cron", "runs per slot", "labels", "bisect", "next run",
                      "last fired", "last error"), rows))
    return ExitCode.OK


def _bisect(row: ScheduleRow) -> str:
    option = row.bisect
    if option is None or not option.enabled:
        return "off"
    minutes = "" if option.max_minutes is None else f", {option.max_minutes:g} min"
    return f"on ({option.max_probes} probes{minutes})"


def _fan_out(row: ScheduleRow) -> str:
    total = len(row.configs) * len(row.suites) * row.repeats
    return f"{len(row.configs)}x{len(row.suites)}x{row.repeats} = {total}"


def _labels(labels: object) -> str:
    items = dict(labels) if isinstance(labels, dict) else {}
    return ",".join(f"{k}={v}" for k, v in sorted(items.items())) or "any"


def cmd_schedule_add(args: argparse.Namespace) -> int:
    # the flags' combinations were checked before this module loaded (parsers.check_flags); the
    # file or the options are read and checked before the store is opened
    rows = load_schedules(args.file) if args.file else [_row_from_options(args)]
    engine = open_store(resolve_db_url(args.db))
    try:
        if args.file:
            source = str(Path(args.file).resolve())
            with Session(engine) as session, session.begin():
                removed = replace_file_schedules(session, source, rows, utc_now())
            names = ", ".join(r.name for r in rows) or "none"
            say(f"{args.file}: {len(rows)} schedule(s) saved ({names})"
                + (f"; removed {', '.join(removed)}" if removed else ""))
            return ExitCode.OK
        row = rows[0]
        with Session(engine) as session, session.begin():
            save_schedule(session, row, utc_now())
        say(f"schedule {row.name} saved; next run "
            f"{_when(compute_next_fire(row, utc_now()), row.timezone)}")
        return ExitCode.OK
    finally:
        engine.dispose()


def _row_from_options(args: argparse.Namespace) -> ScheduleRow:
    try:
        spec = ScheduleSpec(name=args.name, cron=args.cron, timezone=args.timezone,
                            configs=args.config, suites=args.suite, repeats=args.repeats,
                            labels=parse_labels(args.labels), bisect=_bisect_option(args))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "schedule"
        raise UsageError(f"schedule add: {where}: {first['msg']}") from None
    return build_schedule_row(spec, Path.cwd(), CLI_SOURCE)


def _bisect_option(args: argparse.Namespace) -> dict[str, object]:
    """``bisect:`` from --bisect and its budgets (validated with the schedule, as in a file)."""
    budgets = {key: value for key, value in (("max_probes", args.bisect_max_probes),
                                             ("max_minutes", args.bisect_max_minutes))
               if value is not None}
    return {"enabled": bool(args.bisect), **budgets}


def cmd_schedule_remove(db: str | None, name: str) -> int:
    engine = open_store(resolve_db_url(db))
    try:
        with Session(engine) as session, session.begin():
            found = delete_schedule(session, name)
    finally:
        engine.dispose()
    if not found:
        raise UsageError(f"schedule {name!r} not found; list them with `tracker schedule list`")
    say(f"schedule {name} removed (a running scheduler drops its job at its next sync)")
    return ExitCode.OK


def cmd_schedule_run_now(db: str | None, name: str) -> int:
    engine = open_store(resolve_db_url(db))
    try:
        ids = enqueue_schedule(engine, name, slot=False)
    finally:
        engine.dispose()
    say(f"schedule {name}: queued request(s) {', '.join(map(str, ids))}; "
        "a worker runs them (`tracker queue` shows them)")
    return ExitCode.OK


# --- scheduler, worker, queue --------------------------------------------------------------


def _emit(message: str) -> None:
    say(f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} {message}")


def _worker_settings(args: argparse.Namespace, exit_when_empty: bool) -> WorkerSettings:
    for flag in ("heartbeat_s", "stale_after_s", "poll_s"):
        if getattr(args, flag) <= 0:
            raise UsageError(f"--{flag.replace('_', '-')}: must be > 0 (got {getattr(args, flag)})")
    if args.stale_after_s <= args.heartbeat_s:
        raise UsageError(f"--stale-after-s {args.stale_after_s:g} must be longer than "
                         f"--heartbeat-s {args.heartbeat_s:g} (a few beats), or live workers "
                         "are taken for dead")
    gpus = args.gpus.replace(" ", "") if args.gpus else None
    return WorkerSettings(labels=parse_labels(args.labels), gpus=gpus,
                          heartbeat_s=args.heartbeat_s, stale_after_s=args.stale_after_s,
                          poll_s=args.poll_s, exit_when_empty=exit_when_empty,
                          webhook=load_webhook(args.webhook_env), dashboard_url=args.dashboard_url)


@contextmanager
def _one_sqlite_worker(url: str) -> Iterator[None]:
    """SQLite takes one worker per database: a lock file beside it (nothing on PostgreSQL)."""
    lock = DatabaseLock(url, "worker", "SQLite takes one worker; use PostgreSQL for several "
                        "workers or hosts")
    if not lock.is_sqlite:
        yield
        return
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def cmd_worker(args: argparse.Namespace) -> int:
    settings = _worker_settings(args, args.exit_when_empty)
    url = resolve_db_url(args.db)
    engine = open_store(url)
    try:
        with _one_sqlite_worker(url):
            worker = Worker(engine, settings, emit=_emit)
            with stop_on_signals(worker.request_stop):
                processed = worker.run()
        _emit(f"worker {worker.worker_id}: processed {processed} request(s)")
        return ExitCode.OK
    finally:
        engine.dispose()


def cmd_scheduler(args: argparse.Namespace) -> int:
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # not each job's start and end
    worker_settings = _worker_settings(args, exit_when_empty=False)
    url = resolve_db_url(args.db)
    engine = open_store(url)
    try:
        if args.schedules:
            rows = load_schedules(args.schedules)
            with Session(engine) as session, session.begin():
                replace_file_schedules(session, str(Path(args.schedules).resolve()), rows,
                                       utc_now())
        settings = SchedulerSettings(args.misfire_grace_s, args.sync_interval_s,
                                     worker_settings.stale_after_s)
        scheduler = TrackerScheduler(engine, url, settings, emit=_emit)
        scheduler.start()
        active = (f"scheduler active on {redact_url(url)} (pid {os.getpid()}); SIGTERM or "
                  "Ctrl-C stops it")
        try:
            if args.with_worker:
                with _one_sqlite_worker(url):
                    _serve(scheduler, Worker(engine, worker_settings, emit=_emit), active)
            else:
                _serve(scheduler, None, active)
        finally:
            scheduler.stop()
            _emit("scheduler stopped")
        return ExitCode.OK
    finally:
        engine.dispose()


def _serve(scheduler: TrackerScheduler, worker: Worker | None, active: str) -> None:
    """Block until SIGTERM/SIGINT, and run the worker (if any) here meanwhile.

    ``active`` is announced only once the signal handlers are in place, so a stop request that
    follows the announcement is always a clean stop.
    """
    stopped = threading.Event()

    def on_stop(name: str) -> None:
        stopped.set()
        if worker is not None:
            worker.request_stop(name)
        else:
            _emit(f"scheduler: {name}: stopping")

    with stop_on_signals(on_stop):
        _emit(active)
        if worker is not None:
            worker.run()
        else:
            while not stopped.wait(1.0):
                pass


def cmd_queue(db: str | None, include_done: bool, limit: int) -> int:
    statuses = None if include_done else [RequestStatus.QUEUED, RequestStatus.RUNNING,
                                          RequestStatus.FAILED]
    with reading(db) as session:
        requests = fetch_requests(session, statuses, limit)
    if not requests:
        say("the queue is empty" + ("" if include_done else " (--all shows done requests)"))
        return ExitCode.OK
    now = utc_now()
    rows = [_queue_row(r, now) for r in requests]
    say(render_table(("id", "status", "schedule", "slot", "config x suite", "attempt", "worker",
                      "heartbeat", "run", "error"), rows))
    return ExitCode.OK


def _queue_row(request: RunRequest, now: datetime) -> list[str]:
    beat = "-"
    if request.heartbeat_at is not None and request.status is RequestStatus.RUNNING:
        beat = f"{(now - request.heartbeat_at).total_seconds():.0f} s ago"
    if request.kind is RequestKind.BISECT:
        slot = f"bisect{'' if request.bisection_id is None else f' {request.bisection_id}'}"
    else:
        slot = _when(request.slot_at) if request.slot_at else "run-now"
    return [str(request.id), request.status.value, request.schedule_name or "-", slot,
            f"{request.config_name} x {request.suite_name}", str(request.attempts),
            request.worker_id or "-", beat, str(request.run_id or "-"),
            (request.error or "")[:70]]
