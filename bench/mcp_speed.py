"""`tracker mcp` on a year of nightly history: how long each tool call takes an agent.

Run: .venv/bin/python bench/mcp_speed.py [--configs 20] [--suites 5] [--nights 365]
     [--sample-nights 30] [--requests 64] [--queued 36500] [--repeat 5] [--db URL] [--keep]

It fills a database as bench/dashboard.py does (configs x suites runs a night, three workloads a
run, every registry metric, request records for the last nights, config versions changing twice
a year, step regressions with their records), and queues as many run requests as there are runs
(a year of a scheduler's queue, for ``get_request``). Then it starts ``tracker mcp`` on stdio, as
an agent's client does, and times each tool call through the SDK's client: the first call and the
median of ``--repeat``, with a same-run reference: the protocol's ping (no store, no tool).
Printed, never asserted; figures and their history in bench/mcp_speed.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPDeprecationWarning, StdioServerParameters
from sqlalchemy import Engine, func, insert, select
from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.dashboard import SUITES, WORKLOADS, _fast_sqlite, fill  # noqa: E402
from tracker.store.db import open_store, redact_url  # noqa: E402
from tracker.store.models_regressions import RegressionModel  # noqa: E402
from tracker.store.models_scheduling import RunRequestModel  # noqa: E402
from tracker.store.runs import fetch_config_versions  # noqa: E402

Call = Callable[[Client], Awaitable[object]]
CHUNK = 5_000


def queue_a_year(engine: Engine, count: int) -> None:
    """``count`` run requests, as a year of scheduled slots leaves them: all done but the
    newest, still queued (what an agent polls while it waits)."""
    now = datetime.now(UTC)
    body = {"name": "cfg-00", "target": {"kind": "sim", "model": "m"}}
    suite = {"name": SUITES[0], "workloads": [{"name": w} for w in WORKLOADS]}
    rows = [{"schedule_name": "nightly", "slot_at": now, "position": i, "config_name": "cfg-00",
             "config_path": "configs/cfg-00.yaml", "config_body": body,
             "suite_name": SUITES[0], "suite_path": f"baselines/{SUITES[0]}.yaml",
             "suite_body": suite, "labels": {"gpu": "h200"}, "status": "done", "attempts": 1,
             "worker_id": "bench:1", "gpus": "0", "enqueued_at": now, "claimed_at": now,
             "heartbeat_at": now, "finished_at": now, "run_id": None, "error": None,
             "kind": "run", "job": None, "job_key": None, "bisection_id": None}
            for i in range(count)]
    rows[-1] |= {"status": "queued", "attempts": 0, "worker_id": None, "claimed_at": None,
                 "heartbeat_at": None, "finished_at": None}
    with Session(engine) as session, session.begin():
        for start in range(0, len(rows), CHUNK):
            session.execute(insert(RunRequestModel), rows[start:start + CHUNK])


def calls(engine: Engine) -> list[tuple[str, Call]]:
    """The tool calls an agent makes, with arguments the filled store answers."""
    with Session(engine) as session:
        versions = [row.version[:12] for row in fetch_config_versions(session, "cfg-00")]
        regression = session.scalar(select(func.max(RegressionModel.id)))
        newest_request = session.scalar(select(func.max(RunRequestModel.id)))
    series = {"config": "cfg-00", "suite": SUITES[0], "metric": "ttft_p99_s"}

    def tool(name: str, arguments: dict[str, Any]) -> Call:
        async def call(client: Client) -> object:
            result = await client.call_tool(name, arguments)
            if result.is_error:
                raise SystemExit(f"{name} {arguments}: {result.content}")
            return result
        return call

    return [
        ("reference: ping", lambda client: client.send_ping()),
        ("list_regressions (20)", tool("list_regressions", {})),
        ("list_regressions (50)", tool("list_regressions", {"limit": 50})),
        ("get_regression", tool("get_regression", {"regression_id": regression})),
        ("get_series (3 workloads)", tool("get_series", series)),
        ("get_series (1 workload)", tool("get_series", {**series, "workload": WORKLOADS[0]})),
        ("get_run", tool("get_run", {"run_id": 1})),
        ("compare_runs (1 vs 1)", tool("compare_runs", {"base_run_ids": [1],
                                                        "head_run_ids": [101]})),
        ("compare_versions (10 vs 10)", tool("compare_versions", {
            "config": "cfg-00", "base_version": versions[-2], "head_version": versions[-1],
            "suite": SUITES[0]})),
        ("config_versions", tool("config_versions", {"config": "cfg-00"})),
        ("config_diff", tool("config_diff", {"config": "cfg-00", "base_version": versions[0],
                                             "head_version": versions[-1]})),
        ("get_request (queued)", tool("get_request", {"request_id": newest_request})),
        ("get_request (done)", tool("get_request", {"request_id": newest_request - 1})),
    ]


async def measure(url: str, named: list[tuple[str, Call]], repeat: int
                  ) -> tuple[float, list[tuple[str, float, float]]]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "tracker", "mcp", "--db", url], cwd=str(ROOT))
    start = time.perf_counter()
    rows = []
    # the handshake era (what agents' clients speak today), whose ping is the reference
    async with Client(params, mode="legacy", read_timeout_seconds=600) as client:
        connect_s = time.perf_counter() - start
        for title, call in named:
            times = []
            for _ in range(repeat):
                began = time.perf_counter()
                await call(client)
                times.append((time.perf_counter() - began) * 1000)
            rows.append((title, times[0], statistics.median(times)))
    return connect_s, rows


def fill_store(engine: Engine, url: str, args: argparse.Namespace) -> None:
    if engine.dialect.name == "sqlite":
        _fast_sqlite(engine)
    print(f"filling {redact_url(url)}: {args.configs} configs x {args.suites} suites x "
          f"{len(WORKLOADS)} workloads x {args.nights} nights", flush=True)
    started = time.perf_counter()
    counts = fill(engine, args)
    queued = args.queued if args.queued is not None else counts["runs"]
    queue_a_year(engine, queued)
    print(f"filled in {time.perf_counter() - started:.1f} s: "
          + ", ".join(f"{v:,} {k}" for k, v in counts.items()) + f", {queued:,} run requests",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--configs", type=int, default=20)
    parser.add_argument("--suites", type=int, default=5, choices=range(1, len(SUITES) + 1))
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--sample-nights", type=int, default=30)
    parser.add_argument("--requests", type=int, default=64, help="request records per workload")
    parser.add_argument("--queued", type=int, help="run requests on the queue (default: one "
                                                   "per run)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", help="an empty database URL (default: a temporary SQLite file)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary SQLite file")
    parser.add_argument("--filled", metavar="URL", help="measure a store an earlier --keep "
                                                        "filled, without filling one")
    args = parser.parse_args()
    url = args.filled or args.db or \
        f"sqlite:///{tempfile.mkdtemp(prefix='tracker-bench-')}/mcp.db"
    engine = open_store(url)
    try:
        if args.filled is None:
            fill_store(engine, url, args)
        named = calls(engine)
    finally:
        engine.dispose()
    # the reference, ping, is a handshake-era method (what agents' clients speak today)
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    connect_s, rows = anyio.run(measure, url, named, args.repeat)
    print(f"\n`tracker mcp` on stdio answered its first request {connect_s:.1f} s after start")
    print(f"\n{'tool call':<30} {'first ms':>10} {f'median of {args.repeat} ms':>16}")
    for title, first, median in rows:
        print(f"{title:<30} {first:>10.1f} {median:>16.1f}")
    if args.filled is not None:
        return
    if args.db is None and not args.keep:
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
    elif args.db is None:
        print(f"\nkept {url}")


if __name__ == "__main__":
    main()
