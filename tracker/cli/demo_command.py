"""``tracker demo``: the shipped suites on the built-in simulator (no GPU, no network, no keys)."""

from __future__ import annotations

from pathlib import Path

from tracker.cli.output import run_exit_code
from tracker.errors import ConfigError
from tracker.inputs.configs import load_config
from tracker.inputs.shipped import DEMO_CONFIG, shipped_configs, shipped_suites
from tracker.inputs.suites import load_suite


def shipped_files() -> tuple[Path, list[Path]]:
    config = shipped_configs() / DEMO_CONFIG
    suites = shipped_suites()
    if not config.exists() or not suites:
        raise ConfigError(f"{config.parent}: the shipped configs and baselines are missing; "
                          "reinstall the tracker")
    return config, suites


def cmd_demo(db: str | None, quiet: bool) -> int:
    from tracker.jobs.execute import execute_suite
    from tracker.reports.run_report import render_run_text
    from tracker.results import RunResult
    from tracker.runner.progress import ProgressPrinter
    from tracker.store.db import open_store, redact_url, resolve_db_url

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
    return max(run_exit_code(run) for run in runs)
