"""The work behind each CLI command; parsing lives in tracker.cli.main."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from tracker.cli.progress import ProgressPrinter
from tracker.errors import ConfigError, UsageError
from tracker.inputs.configs import load_config
from tracker.inputs.shipped import DEMO_CONFIG, shipped_configs, shipped_suites
from tracker.inputs.suites import load_suite
from tracker.jobs.execute import execute_run, execute_suite
from tracker.redaction import redact_data, redact_text
from tracker.reports.run_report import render_run_json, render_run_text, render_table
from tracker.results import RunResult, RunStatus
from tracker.store.db import open_store, redact_url, resolve_db_url, upgrade_database
from tracker.store.runs import fetch_run, fetch_runs

EXIT_OK = 0
EXIT_NOT_MEASURED = 3


def write_json(target: str, data: dict[str, Any], flag: str = "--json") -> None:
    """The JSON (every string redacted) to ``target``, or stdout for ``-``."""
    write_text(target, json.dumps(redact_data(data), indent=2, ensure_ascii=False) + "\n", flag)


def write_text(target: str, text: str, flag: str) -> None:
    """A report or result file, redacted, written whole or not at all (``-``: stdout)."""
    text = redact_text(text)
    if target == "-":
        sys.stdout.write(text)
        return
    path = Path(target)
    if not path.parent.is_dir():
        raise UsageError(f"{flag} {target}: directory {path.parent} does not exist; create it "
                         "or choose another path")
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, delete=False,
                                     prefix=f".{path.name}.", suffix=".tmp") as handle:
        handle.write(text)
    os.replace(handle.name, path)


def _exit_code(run: RunResult) -> int:
    return EXIT_OK if run.status is RunStatus.COMPLETED else EXIT_NOT_MEASURED


def cmd_run(config: str, suite: str, db: str | None, json_out: str | None, quiet: bool) -> int:
    url = resolve_db_url(db)
    run = execute_run(config, suite, url, None if quiet else ProgressPrinter())
    if json_out:
        write_json(json_out, render_run_json(run))
    if json_out != "-":
        print(render_run_text(run))
    return _exit_code(run)


@contextmanager
def reading(db: str | None) -> Iterator[Session]:
    """A read-only session on the store named by ``--db`` (or its defaults)."""
    engine = open_store(resolve_db_url(db))
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()


def cmd_runs(db: str | None, limit: int) -> int:
    with reading(db) as session:
        listings = fetch_runs(session, limit)
    if not listings:
        print("no runs yet; start with `tracker demo` or `tracker run --config ... --suite ...`")
        return EXIT_OK
    rows = [[str(r.run_id), r.status.value + (" [sim]" if r.simulated else ""),
             f"{r.config_name}@{r.config_version[:12]}", r.suite_name,
             r.started_at.strftime("%Y-%m-%d %H:%M:%S %Z"), str(r.workloads),
             str(r.completed), str(r.failed)] for r in listings]
    print(render_table(("run", "status", "config", "suite", "started", "workloads", "ok",
                        "failed"), rows))
    return EXIT_OK


def cmd_show(run_id: int, db: str | None, json_out: str | None) -> int:
    with reading(db) as session:
        run = fetch_run(session, run_id)
    if json_out:
        write_json(json_out, render_run_json(run))
    if json_out != "-":
        print(render_run_text(run))
    return EXIT_OK


def cmd_db_upgrade(db: str | None) -> int:
    url = resolve_db_url(db)
    before, after = upgrade_database(url)
    if before == after:
        print(f"{redact_url(url)}: already at revision {after}")
    else:
        print(f"{redact_url(url)}: upgraded from {before or 'empty'} to {after}")
    return EXIT_OK


def shipped_files() -> tuple[Path, list[Path]]:
    config = shipped_configs() / DEMO_CONFIG
    suites = shipped_suites()
    if not config.exists() or not suites:
        raise ConfigError(f"{config.parent}: the shipped configs and baselines are missing; "
                          "reinstall the tracker")
    return config, suites


def cmd_demo(db: str | None, quiet: bool) -> int:
    config_path, suite_paths = shipped_files()
    url = resolve_db_url(db)
    config = load_config(config_path)
    suites = [load_suite(p) for p in suite_paths]
    engine = open_store(url)
    runs: list[RunResult] = []
    try:
        for index, suite in enumerate(suites):
            label = f"{suite.suite.name} ({index + 1}/{len(suites)}) "
            progress = None if quiet else ProgressPrinter(label=label)
            runs.append(execute_suite(engine, config, suite, progress))
    finally:
        engine.dispose()
    for run in runs:
        print(render_run_text(run) + "\n")
    print(f"stored {len(runs)} simulated runs in {redact_url(url)}; list them with "
          "`tracker runs`, open one with `tracker show RUN_ID`")
    return max(_exit_code(run) for run in runs)


def cmd_dashboard(db: str | None, port: int, host: str, trust_proxy_auth: bool,
                  user_header: str | None) -> int:
    from tracker.dashboard.launch import run_dashboard  # streamlit loads only for this command

    run_dashboard(resolve_db_url(db), port, host=host, trust_proxy_auth=trust_proxy_auth,
                  user_header=user_header)


def cmd_bench(args: argparse.Namespace) -> int:
    from tracker.cli.bench_command import (
        BenchArgs,
        bench_json,
        execute_bench,
        render_bench_text,
        save_requests,
    )

    bench = BenchArgs(
        base_url=args.base_url, model=args.model, endpoint_type=args.endpoint_type,
        max_concurrency=args.max_concurrency, request_rate=args.request_rate,
        burstiness=args.burstiness, num_prompts=args.num_prompts,
        random_input_len=args.random_input_len, random_output_len=args.random_output_len,
        ignore_eos=args.ignore_eos, seed=args.seed, warmup=args.warmup,
        duration_s=args.duration, goodput=tuple(args.goodput), api_key_env=args.api_key_env,
        request_timeout_s=args.timeout)
    model, result = execute_bench(bench, quiet=args.quiet or args.json == "-")
    if args.json:
        write_json(args.json, bench_json(bench, model, result))
    if args.save_requests:
        save_requests(args.save_requests, result)
    if args.json != "-":
        print(render_bench_text(model, result))
    return EXIT_OK if result.summary.completed else EXIT_NOT_MEASURED


def cmd_sim_serve(config_path: str, host: str, port: int) -> int:
    from tracker.sim.server import serve_forever

    loaded = load_config(config_path)
    if loaded.config.target.kind != "sim":
        raise ConfigError(f"{config_path}: target.kind: the simulator serves only kind 'sim' "
                          f"configs (got {loaded.config.target.kind!r})")

    def ready(base_url: str) -> None:
        print(f"simulator for {loaded.config.name} ({loaded.config.target.model}) on {base_url} "
              "(OpenAI-compatible; Ctrl-C stops)", flush=True)

    serve_forever(loaded.config, host, port, on_ready=ready)
    return EXIT_OK
