"""Store speed: saving and reading one large workload, against a raw-driver reference.

Run: .venv/bin/python bench/store.py [--records 10000] [--itl 128] [--repeats 5] [--postgres URL]

For each backend it times the tracker's ``save_workload`` and ``fetch_run`` on a workload of
``--records`` requests with ``--itl`` inter-chunk gaps each, and, in the same run, a reference:
the same rows written with the bare driver's ``executemany`` into a plain table (the practical
limit for this row shape). The ratio says what the ORM layer costs. "unredacted" is the same save
with the store's boundary hook (every value written is redacted and made storable,
tracker.store.storable) removed: the difference is what the boundary costs. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, event, text
from sqlalchemy.orm import Session

from tracker.inputs.configs import ServingConfig, Target, build_loaded_config
from tracker.inputs.suites import FixedPrompt, Suite, Workload, build_loaded_suite
from tracker.load.summary import compute_workload_summary
from tracker.results import RequestRecord, RunStatus, TokenSource, WorkloadResult
from tracker.store import db
from tracker.store.db import open_store, redact_url
from tracker.store.runs import (
    begin_run,
    fetch_run,
    finish_run,
    save_config_version,
    save_suite,
    save_workload,
)

REFERENCE_SQL = ("INSERT INTO ref (idx, start_s, ttft_s, e2el_s, itl_s, output_tokens, "
                 "input_tokens) VALUES (?, ?, ?, ?, ?, ?, ?)")


def make_workload(records: int, itl: int) -> WorkloadResult:
    rows = tuple(
        RequestRecord(i, i * 0.01, 0.1, 0.1 + itl * 0.02, (0.02,) * itl, itl + 1,
                      TokenSource.USAGE, 128, TokenSource.USAGE)
        for i in range(records))
    now = datetime.now(UTC)
    return WorkloadResult("bench", 64, records, 0, {}, now, now, rows,
                          compute_workload_summary(rows, 10.0))


def time_tracker(url: str, workload: WorkloadResult, *, redact: bool = True
                 ) -> tuple[float, float]:
    engine = open_store(url)
    if not redact:  # what the one redaction of every stored text costs, measured by its absence
        event.remove(engine, "before_cursor_execute", db._storable_parameters)
    try:
        config = build_loaded_config(ServingConfig(name="bench", target=Target(kind="sim",
                                                                                model="m")), "-")
        suite = build_loaded_suite(Suite(name="bench", workloads=[Workload(
            name="w", prompts=FixedPrompt(source="fixed", text="x"), max_tokens=1,
            concurrency=1, num_requests=1)]), "-")
        with Session(engine) as session, session.begin():
            run_id = begin_run(session, config_version_id=save_config_version(session, config),
                               suite_id=save_suite(session, suite), started_at=datetime.now(UTC),
                               host="bench", tracker_version="bench", simulated=True,
                               environment={})
        start = time.perf_counter()
        with Session(engine) as session, session.begin():
            save_workload(session, run_id, 0, workload)
            finish_run(session, run_id, RunStatus.COMPLETED, datetime.now(UTC), None)
        saved = time.perf_counter() - start
        start = time.perf_counter()
        with Session(engine) as session:
            fetched = fetch_run(session, run_id)
        read = time.perf_counter() - start
        assert len(fetched.workloads[0].records) == len(workload.records)
        return saved, read
    finally:
        engine.dispose()


def reference_rows(workload: WorkloadResult) -> list[tuple[object, ...]]:
    return [(r.index, r.start_s, r.ttft_s, r.e2el_s, json.dumps(r.itl_s), r.output_tokens,
             r.input_tokens) for r in workload.records]


def time_sqlite_reference(path: Path, workload: WorkloadResult) -> float:
    connection = sqlite3.connect(path)
    try:
        connection.execute("CREATE TABLE ref (idx INT, start_s REAL, ttft_s REAL, e2el_s REAL, "
                           "itl_s TEXT, output_tokens INT, input_tokens INT)")
        start = time.perf_counter()
        with connection:
            connection.executemany(REFERENCE_SQL, reference_rows(workload))
        return time.perf_counter() - start
    finally:
        connection.close()


def time_postgres_reference(url: str, workload: WorkloadResult) -> float:
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("CREATE TEMP TABLE ref (idx INT, start_s FLOAT8, ttft_s FLOAT8,"
                                    " e2el_s FLOAT8, itl_s JSON, output_tokens INT, "
                                    "input_tokens INT)"))
            raw = connection.connection.driver_connection
            assert raw is not None
            start = time.perf_counter()
            with raw.cursor() as cursor:
                cursor.executemany(REFERENCE_SQL.replace("?", "%s"), reference_rows(workload))
            return time.perf_counter() - start
    finally:
        engine.dispose()


def fresh_postgres(admin_url: str) -> str:
    name = f"tracker_bench_{os.getpid()}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return admin_url.rsplit("/", 1)[0] + "/" + name


def drop_postgres(admin_url: str, url: str) -> None:
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)'))
    engine.dispose()


def measure(url_for: Callable[[], str], workload: WorkloadResult,
            repeats: int) -> tuple[float, float, float]:
    """Medians of ``repeats`` saves with and without the redaction hook, taken in turns (this
    machine is shared: a slow moment lands on both), and of the fetch."""
    saved: list[float] = []
    bare: list[float] = []
    read: list[float] = []
    for repeat in range(repeats):  # which goes first alternates: a growing table is fair to both
        for redact in (False, True) if repeat % 2 == 0 else (True, False):
            seconds, fetched = time_tracker(url_for(), workload, redact=redact)
            (saved if redact else bare).append(seconds)
            if redact:
                read.append(fetched)
    return statistics.median(saved), statistics.median(bare), statistics.median(read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--itl", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get(
        "TRACKER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"))
    args = parser.parse_args()
    workload = make_workload(args.records, args.itl)
    rows: list[tuple[str, float, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        def sqlite_url(name: str) -> str:
            return f"sqlite:///{tmp}/{name}-{next(counter)}.db"

        counter = itertools.count()
        saved, bare, read = measure(lambda: sqlite_url("t"), workload, args.repeats)
        reference = statistics.median(time_sqlite_reference(Path(tmp) / f"ref{i}.db", workload)
                                      for i in range(args.repeats))
        rows.append(("sqlite", saved, bare, reference, read))
    try:
        url = fresh_postgres(args.postgres)
        try:
            saved, bare, read = measure(lambda: url, workload, args.repeats)
            reference = statistics.median(time_postgres_reference(url, workload)
                                          for _ in range(args.repeats))
            rows.append(("postgresql", saved, bare, reference, read))
        finally:
            drop_postgres(args.postgres, url)
    except Exception as exc:  # a bench reports what it could not measure and goes on
        print(f"postgresql: not measured ({redact_url(args.postgres)}: {type(exc).__name__})")
    print(f"median of {args.repeats} alternating repeats")
    print(f"{args.records} records x {args.itl} ITL values")
    print(f"{'backend':<12}{'save s':>9}{'unredacted':>12}{'raw ref s':>11}{'ratio':>8}"
          f"{'fetch s':>9}")
    for name, saved, bare, reference, read in rows:
        print(f"{name:<12}{saved:>9.3f}{bare:>12.3f}{reference:>11.3f}{saved / reference:>8.2f}"
              f"{read:>9.3f}")


if __name__ == "__main__":
    main()
