"""Dashboard speed on a year of nightly history: each page's queries and its first render.

Run: .venv/bin/python bench/dashboard.py [--configs 20] [--suites 5] [--nights 365]
     [--sample-nights 30] [--requests 64] [--db URL] [--keep]

It fills a database (a fresh SQLite file unless --db names an empty one) with nightly runs:
configs x suites runs a night, three workloads per run, every registry metric per workload, and
per-request records for the last ``--sample-nights`` nights. Config versions change a few times
a year and some series get a step change, so the pages have something to mark. Rows go in through
SQLAlchemy Core bulk inserts against the real models, after the real migrations.

Then, for every page, it times the store queries the page makes on its default view (cold: a fresh
engine; the median of three) and the page's first render under ``streamlit.testing.v1.AppTest``
with an empty cache. A same-run reference is printed with them: ``SELECT 1`` through the same
engine, and the render of a page that draws nothing from the store. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Engine, event, insert, text
from sqlalchemy.orm import Session

from tracker.metrics import REGISTRY
from tracker.store.db import open_store, redact_url
from tracker.store.models import (
    RESULT_SCHEMA_VERSION,
    ConfigVersionModel,
    RequestRecordModel,
    RunModel,
    SuiteModel,
    WorkloadMetricModel,
    WorkloadResultModel,
)
from tracker.store.regressions import SeriesKey, save_regression

ROOT = Path(__file__).resolve().parent.parent
SUITES = ("chat-short", "batch-throughput", "long-context", "classic-load", "prefix-cache",
          "tool-calls", "summarise", "code-complete")
WORKLOADS = ("c1", "c8", "c64")
VERSION_NIGHTS = (0.0, 0.35, 0.7)  # a config changes version at these fractions of the year
CHUNK_ROWS = 20_000


def _sha(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()) \
        .hexdigest()


def _chunks(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(rows), CHUNK_ROWS):
        yield rows[start:start + CHUNK_ROWS]


class History:
    """Generates the rows; ids are assigned here so no insert needs RETURNING."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = np.random.default_rng(7)
        self.today = datetime.now(UTC).replace(hour=2, minute=0, second=0, microsecond=0)
        self.start = self.today - timedelta(days=args.nights - 1)
        self.run_id = 0
        self.workload_id = 0

    def config_rows(self) -> list[dict[str, Any]]:
        rows = []
        for c in range(self.args.configs):
            kind = "sim" if c % 5 == 4 else "vllm"
            for v, fraction in enumerate(VERSION_NIGHTS):
                body = {"name": f"cfg-{c:02d}", "target": {"kind": kind, "model": f"model-{c % 4}"},
                        "engine": {"max_num_seqs": 128 * (v + 1), "block_size": 16,
                                   "gpu_memory_utilization": round(0.8 + 0.05 * v, 2)}}
                seen = self.start + timedelta(days=int(fraction * self.args.nights))
                rows.append({"id": c * len(VERSION_NIGHTS) + v + 1, "name": body["name"],
                             "version": _sha(body), "canonical": body,
                             "source_path": f"configs/cfg-{c:02d}.yaml", "first_seen_at": seen})
        return rows

    def suite_rows(self) -> list[dict[str, Any]]:
        rows = []
        for s, name in enumerate(SUITES[:self.args.suites]):
            body = {"name": name, "seed": s, "workloads": [
                {"name": w, "concurrency": int(w[1:]), "num_requests": self.args.requests}
                for w in WORKLOADS]}
            rows.append({"id": s + 1, "name": name, "version": _sha(body), "canonical": body,
                         "prompts_digest": _sha({"p": s}), "source_path": f"baselines/{name}.yaml",
                         "first_seen_at": self.start})
        return rows

    def config_version_id(self, config: int, night: int) -> int:
        version = sum(1 for f in VERSION_NIGHTS if night >= int(f * self.args.nights)) - 1
        return config * len(VERSION_NIGHTS) + version + 1

    def nights(self) -> Iterator[tuple[int, list[dict[str, Any]], list[dict[str, Any]],
                                       list[dict[str, Any]], list[dict[str, Any]]]]:
        """Per night: runs, workload results, metrics, request records."""
        for night in range(self.args.nights):
            runs, workloads, metrics, records = [], [], [], []
            sampled = night >= self.args.nights - self.args.sample_nights
            for c in range(self.args.configs):
                for s in range(self.args.suites):
                    run = self._run(night, c, s)
                    runs.append(run)
                    if run["status"] == "failed":
                        continue
                    for position, name in enumerate(WORKLOADS):
                        workload = self._workload(run, position, name)
                        workloads.append(workload)
                        level = self._level(c, s, position, night)
                        metrics.extend(self._metrics(workload["id"], level))
                        if sampled:
                            records.extend(self._records(workload["id"], level))
            yield night, runs, workloads, metrics, records

    def _run(self, night: int, c: int, s: int) -> dict[str, Any]:
        self.run_id += 1
        started = self.start + timedelta(days=night, minutes=3 * (c * self.args.suites + s))
        roll = self.rng.random()
        status = "failed" if roll < 0.01 else "partial" if roll < 0.02 else "completed"
        return {"id": self.run_id, "config_version_id": self.config_version_id(c, night),
                "suite_id": s + 1, "status": status,
                "status_reason": None if status == "completed" else f"bench: {status} on purpose",
                "started_at": started, "ended_at": started + timedelta(minutes=2),
                "host": "bench-host", "tracker_version": "0.1.0", "simulated": c % 5 == 4,
                "environment": {"host": "bench-host", "python": "3.11", "gpu": "H200"},
                "schema_version": RESULT_SCHEMA_VERSION}

    def _workload(self, run: dict[str, Any], position: int, name: str) -> dict[str, Any]:
        self.workload_id += 1
        n = self.args.requests
        return {"id": self.workload_id, "run_id": run["id"], "position": position, "name": name,
                "concurrency": int(name[1:]), "num_requests": n, "warmup_requests": 0,
                "params": {}, "started_at": run["started_at"], "ended_at": run["ended_at"],
                "complete": True, "completed": n, "failed": 0, "duration_s": 30.0,
                "total_input_tokens": 256 * n, "total_output_tokens": 128 * n,
                "output_tokens_source": "usage", "input_tokens_source": "usage", "errors": {},
                "ttft_count": n, "tpot_count": n, "itl_count": 127 * n, "e2el_count": n}

    def _level(self, c: int, s: int, position: int, night: int) -> float:
        """A multiplier on latency: the config version's effect and a step on some series."""
        level = 1.0 + 0.1 * c / self.args.configs + 0.2 * s + 0.5 * position
        level *= 1.0 - 0.05 * (self.config_version_id(c, night) - 1 - c * len(VERSION_NIGHTS))
        if (c + s) % 3 == 0 and night >= int(0.82 * self.args.nights):
            level *= 1.15  # a regression a sixth of the way from the end
        return level

    def _metrics(self, workload_id: int, level: float) -> list[dict[str, Any]]:
        noise = 1.0 + 0.02 * self.rng.standard_normal()
        rows = []
        for name, metric in REGISTRY.items():
            base = 0.05 if name.startswith("ttft") else 0.01 if metric.unit == "s" else 100.0
            stat = 1.5 if "p99" in name else 1.25 if "p90" in name else 1.0
            value = base * stat * (level if metric.unit == "s" else 1.0 / level) * noise
            rows.append({"workload_result_id": workload_id, "metric": name, "value": value})
        return rows

    def _records(self, workload_id: int, level: float) -> list[dict[str, Any]]:
        n = self.args.requests
        ttft = self.rng.lognormal(np.log(0.05 * level), 0.3, n)
        itl = 0.01 * level
        return [{"workload_result_id": workload_id, "idx": i, "start_s": i * 0.4,
                 "ttft_s": float(ttft[i]), "e2el_s": float(ttft[i] + 127 * itl),
                 "itl_s": [itl] * 16, "output_tokens": 128, "output_tokens_source": "usage",
                 "input_tokens": 256, "input_tokens_source": "usage", "error_class": None,
                 "error": None} for i in range(n)]


def fill(engine: Engine, args: argparse.Namespace) -> dict[str, int]:
    history = History(args)
    counts = {"runs": 0, "workloads": 0, "metrics": 0, "records": 0}
    with Session(engine) as session, session.begin():
        session.execute(insert(ConfigVersionModel), history.config_rows())
        session.execute(insert(SuiteModel), history.suite_rows())
    for night, runs, workloads, metrics, records in history.nights():
        with Session(engine) as session, session.begin():
            for model, rows in ((RunModel, runs), (WorkloadResultModel, workloads),
                                (WorkloadMetricModel, metrics), (RequestRecordModel, records)):
                for chunk in _chunks(rows):
                    session.execute(insert(model), chunk)
        for key, rows in zip(counts, (runs, workloads, metrics, records), strict=True):
            counts[key] += len(rows)
        if night % 60 == 0:
            print(f"  night {night + 1}/{args.nights}", file=sys.stderr, flush=True)
    counts["regressions"] = _save_regressions(engine, history)
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            connection.execute(text("ANALYZE"))
    else:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("ANALYZE"))
    return counts


def _save_regressions(engine: Engine, history: History) -> int:
    """The records the analysis would raise for the step changes, through the store's API."""
    args = history.args
    night = int(0.82 * args.nights)
    saved = 0
    with Session(engine) as session, session.begin():
        for c in range(args.configs):
            for s in range(args.suites):
                if (c + s) % 3:
                    continue
                run_id = night * args.configs * args.suites + c * args.suites + s + 1
                for w, name in enumerate(WORKLOADS):
                    before = 0.075 * history._level(c, s, w, night - 1)
                    save_regression(session, SeriesKey(f"cfg-{c:02d}", SUITES[s], name,
                                                       "ttft_p99_s"),
                                    run_id=run_id, location_index=night, before=before,
                                    after=before * 1.15, rel_change=0.15, regressed=True,
                                    attribution="bench: a step on purpose")
                    saved += 1
    return saved


def _fast_sqlite(engine: Engine) -> None:
    """Filling only: no fsync per transaction (the bench's file is thrown away)."""
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA synchronous=OFF")


# --- measuring -----------------------------------------------------------------------------


def _median_ms(action: Callable[[], object], repeat: int = 3) -> tuple[float, float]:
    """(first call, median of ``repeat`` calls) in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return times[0], statistics.median(times)


def measure(url: str) -> list[tuple[str, float, float, float | None]]:
    from tracker.dashboard import data
    from tracker.dashboard.pages import PAGES

    os.environ["TRACKER_DB_URL"] = url
    rows: list[tuple[str, float, float, float | None]] = []
    engine = open_store(url)
    try:
        first, median = _median_ms(lambda: _select_one(engine))
        rows.append(("reference: SELECT 1", first, median, None))
    finally:
        engine.dispose()
    for page in PAGES:
        first, median = _median_ms(lambda page=page: data.query_page_defaults(url, page.key))
        render_s = _first_render_s(page.path, first=page is PAGES[0])
        rows.append((page.title, first, median, render_s))
    rows.append(_verdicts_row(url))
    blank = ROOT / "bench" / "blank_page.py"
    rows.append(("reference: blank page", 0.0, 0.0, _render_script_s(blank)))
    return rows


def _verdicts_row(url: str) -> tuple[str, float, float, float | None]:
    """Compare's analysis work (CPU, not the database): verdicts on the default pair."""
    from tracker.dashboard import data
    from tracker.dashboard.verdicts import compute_verdicts

    head = data.default_run_id(url) or 1
    comparison = data.query_comparison(url, data.query_previous_run_id(url, head) or head, head)
    first, median = _median_ms(lambda: compute_verdicts(comparison.base, comparison.head))
    return ("Compare: verdicts (CPU)", first, median, None)


def _first_render_s(path: str, *, first: bool) -> float:
    """The page's first render with an empty cache, as a new browser session would see it."""
    from streamlit.testing.v1 import AppTest

    from tracker.dashboard import data

    data.clear_caches()
    app = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=120)
    if not first:  # register the pages (navigation runs before any page), then switch
        app.run()
        data.clear_caches()
        app.switch_page(path)
    start = time.perf_counter()
    app.run()
    elapsed = time.perf_counter() - start
    if app.exception:
        raise SystemExit(f"{path}: {app.exception[0].message}")
    return elapsed


def _render_script_s(path: Path) -> float:
    from streamlit.testing.v1 import AppTest

    app = AppTest.from_file(str(path), default_timeout=60)
    start = time.perf_counter()
    app.run()
    return time.perf_counter() - start


def _select_one(engine: Engine) -> None:
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=20)
    parser.add_argument("--suites", type=int, default=5, choices=range(1, len(SUITES) + 1))
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--sample-nights", type=int, default=30)
    parser.add_argument("--requests", type=int, default=64, help="request records per workload")
    parser.add_argument("--db", help="an empty database URL (default: a temporary SQLite file)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary SQLite file")
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="tracker-bench-")
    url = args.db or f"sqlite:///{directory}/dashboard.db"
    engine = open_store(url)
    if engine.dialect.name == "sqlite":
        _fast_sqlite(engine)
    print(f"filling {redact_url(url)}: {args.configs} configs x {args.suites} suites x "
          f"{len(WORKLOADS)} workloads x {args.nights} nights", flush=True)
    start = time.perf_counter()
    try:
        counts = fill(engine, args)
    finally:
        engine.dispose()
    print(f"filled in {time.perf_counter() - start:.1f} s: "
          + ", ".join(f"{v:,} {k}" for k, v in counts.items()), flush=True)
    rows = measure(url)
    print(f"\n{'page':<24} {'queries first ms':>17} {'median of 3 ms':>15} {'first render s':>15}")
    for title, first, median, render_s in rows:
        render = "" if render_s is None else f"{render_s:.2f}"
        print(f"{title:<24} {first:>17.1f} {median:>15.1f} {render:>15}")
    if args.db is None and not args.keep:
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
    elif args.db is None:
        print(f"\nkept {url}")


if __name__ == "__main__":
    main()
