"""Command line: parse, dispatch, and the one place that turns errors into exit codes.

Exit codes: 0 pass, 1 regression found, 2 usage or config error, 3 could not measure,
130 interrupted (what was measured is kept, marked partial), 70 internal error (a bug).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from tracker import __version__
from tracker.cli import doctor_command
from tracker.cli import gate_commands as gate_command
from tracker.cli import run_commands as commands
from tracker.cli import schedule_commands as scheduling_commands
from tracker.errors import TrackerError
from tracker.redaction import redacted_output

EXIT_INTERNAL = 70


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="URL",
                        help="database URL or SQLite file (default: $TRACKER_DB_URL or "
                             "./tracker.db); PostgreSQL: postgresql+psycopg://user@host/db")


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of requests per second: {text!r}") \
            from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (got {text})")
    return value


def _add_bench(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser("bench", help="benchmark any OpenAI-compatible endpoint ad hoc "
                                         "(vllm bench serve's flags; nothing is stored)")
    bench.add_argument("--base-url", required=True, metavar="URL",
                       help="the server root, e.g. http://127.0.0.1:8000 (/v1 is appended)")
    bench.add_argument("--model", help="default: the first model at /v1/models")
    bench.add_argument("--endpoint-type", choices=("chat", "completions", "messages"),
                       default="chat")
    bench.add_argument("--max-concurrency", type=int, metavar="N",
                       help="the most requests in flight (default: no limit)")
    bench.add_argument("--request-rate", type=_rate, default=float("inf"), metavar="R",
                       help="planned requests per second, open loop (default inf: all at once)")
    bench.add_argument("--burstiness", type=float, default=1.0, metavar="B",
                       help="gamma shape of the gaps between requests; 1 = Poisson")
    bench.add_argument("--num-prompts", type=int, default=200, metavar="N")
    bench.add_argument("--random-input-len", type=int, default=256, metavar="TOKENS")
    bench.add_argument("--random-output-len", type=int, default=128, metavar="TOKENS")
    bench.add_argument("--ignore-eos", action="store_true",
                       help="ask the server to generate exactly --random-output-len tokens")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--warmup", type=int, default=0, metavar="N",
                       help="requests sent first and not measured")
    bench.add_argument("--duration", type=float, metavar="S",
                       help="keep starting requests for S seconds (prompts cycle)")
    bench.add_argument("--goodput", nargs="+", default=[], metavar="KEY:MS",
                       help="SLOs for goodput, e.g. --goodput ttft:500 tpot:50 (ms)")
    bench.add_argument("--api-key-env", metavar="NAME",
                       help="the environment variable holding the API key (never the key)")
    bench.add_argument("--timeout", type=float, default=600.0, metavar="S",
                       help="per-request timeout in seconds")
    bench.add_argument("--json", metavar="OUT", help="write the tracker.run/1 JSON (- = stdout)")
    bench.add_argument("--save-requests", metavar="OUT.jsonl",
                       help="write every request's timings, one JSON line each")
    bench.add_argument("--quiet", action="store_true", help="no progress display")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracker", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"tracker {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a suite against a serving config and store the results")
    run.add_argument("--config", required=True, metavar="FILE", help="serving config YAML")
    run.add_argument("--suite", required=True, metavar="FILE", help="baseline suite YAML")
    _add_db(run)
    run.add_argument("--json", metavar="OUT", help="also write the tracker.run/1 JSON (- = stdout)")
    run.add_argument("--quiet", action="store_true", help="no progress display")

    runs = sub.add_parser("runs", help="list the latest runs")
    _add_db(runs)
    runs.add_argument("--limit", type=int, default=20, metavar="N")

    show = sub.add_parser("show", help="show one stored run")
    show.add_argument("run_id", type=int, metavar="RUN_ID")
    _add_db(show)
    show.add_argument("--json", metavar="OUT", help="write the tracker.run/1 JSON (- = stdout)")

    demo = sub.add_parser("demo", help="run the shipped suites on the built-in simulator "
                                       "(no GPU, no network, no keys)")
    _add_db(demo)
    demo.add_argument("--quiet", action="store_true", help="no progress display")

    db = sub.add_parser("db", help="database maintenance")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_sub.add_parser("upgrade", help="apply the schema migrations")
    _add_db(upgrade)

    dashboard = sub.add_parser("dashboard", help="serve the dashboard on 127.0.0.1 "
                                                 "(trends, runs, compare, configs)")
    _add_db(dashboard)
    dashboard.add_argument("--port", type=int, default=8501, metavar="N",
                           help="port to serve on (default: 8501)")
    dashboard.add_argument("--host", default="127.0.0.1", metavar="ADDRESS",
                           help="address to serve on (default: 127.0.0.1); any other needs "
                                "Streamlit's login ([auth] in .streamlit/secrets.toml) or "
                                "--trust-proxy-auth")
    dashboard.add_argument("--trust-proxy-auth", action="store_true",
                           help="a reverse proxy in front authenticates every request and "
                                "names the user in a header (it must replace a client's)")
    dashboard.add_argument("--user-header", metavar="NAME",
                           help="that header (default: X-Forwarded-User)")

    _add_bench(sub)

    sim = sub.add_parser("sim", help="the embedded OpenAI-compatible simulator")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True, metavar="ACTION")
    serve = sim_sub.add_parser("serve", help="serve a kind: sim config until Ctrl-C")
    serve.add_argument("--config", required=True, metavar="FILE")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    doctor_command.add_parser(sub)
    scheduling_commands.add_parsers(sub, _add_db)
    gate_command.add_parsers(sub, _add_db)
    return parser


def dispatch(args: argparse.Namespace) -> int:
    if args.command == "run":
        return commands.cmd_run(args.config, args.suite, args.db, args.json, args.quiet)
    if args.command == "runs":
        return commands.cmd_runs(args.db, args.limit)
    if args.command == "show":
        return commands.cmd_show(args.run_id, args.db, args.json)
    if args.command == "demo":
        return commands.cmd_demo(args.db, args.quiet)
    if args.command == "db":
        return commands.cmd_db_upgrade(args.db)
    if args.command == "dashboard":
        return commands.cmd_dashboard(args.db, args.port, args.host, args.trust_proxy_auth,
                                      args.user_header)
    if args.command == "bench":
        return commands.cmd_bench(args)
    if args.command == "sim":
        return commands.cmd_sim_serve(args.config, args.host, args.port)
    if args.command == doctor_command.COMMAND:
        return doctor_command.cmd_doctor(args)
    if args.command in scheduling_commands.COMMANDS:
        return scheduling_commands.dispatch(args)
    if args.command in gate_command.COMMANDS:
        return gate_command.dispatch(args)
    raise AssertionError(f"unhandled command {args.command}")


def main(argv: list[str] | None = None) -> int:
    with redacted_output():  # nothing secret is printed or logged, whatever the command does
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return dispatch(args)
    except TrackerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the job boundary: a bug, reported in one line
        if os.environ.get("TRACKER_DEBUG"):
            traceback.print_exc()
        print(f"error: internal error: {type(exc).__name__}: {exc} (set TRACKER_DEBUG=1 for the "
              "traceback and please report it)", file=sys.stderr)
        return EXIT_INTERNAL
