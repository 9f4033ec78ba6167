"""Every command's arguments, in one module that imports nothing heavy: ``tracker --help``
and a bad flag answer at once, and each command loads only what it uses (``tracker.cli.main``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from tracker import __version__
from tracker.errors import UsageError
from tracker.redaction import redact_text
from tracker.scheduling.defaults import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_MISFIRE_GRACE_S,
    DEFAULT_STALE_AFTER_S,
    DEFAULT_SYNC_INTERVAL_S,
    WEBHOOK_ENV,
)

DESCRIPTION = "Continuous performance-regression tracker for LLM inference serving"
if TYPE_CHECKING:
    from _typeshed import SupportsWrite

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


MAX_ID = 2**63 - 1  # a stored id: the databases' 64-bit integers


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a bad flag answered like every other error: one ``error:`` line, exit 2.

    What it prints (that line, usage, help, version) passes the one redaction, because a bad
    value may be a key pasted in the wrong place."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message}; see `{self.prog} --help`\n")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        super()._print_message(redact_text(message), file)


def _whole(text: str, low: int, high: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})") from None
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be {what} (got {text})")
    return value


def _positive(text: str) -> int:
    return _whole(text, 1, MAX_ID, "1 or more")


def _non_negative(text: str) -> int:
    return _whole(text, 0, MAX_ID, "0 or more")


def _run_id(text: str) -> int:
    return _whole(text, 1, MAX_ID, f"a run id from 1 to {MAX_ID}")


def _port(text: str) -> int:
    return _whole(text, 0, 65535, "a TCP port from 0 to 65535 (0: any free port)")


def _number(text: str, noun: str, ok: Callable[[float], bool], expected: str) -> float:
    """A float flag: ``not NOUN: 'x'`` when it is no number, ``must be EXPECTED (got x)`` when
    ``ok`` refuses it."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"must be {expected} (got {text})")
    return value


def _seconds(text: str) -> float:
    """A finite number of seconds > 0 (nan, inf and 0 are refused)."""
    return _number(text, "a number of seconds", lambda v: math.isfinite(v) and v > 0,
                   "a finite number of seconds > 0")


def _grace_seconds(text: str) -> float:
    """A finite number of seconds >= 0."""
    return _number(text, "a number of seconds", lambda v: math.isfinite(v) and v >= 0,
                   "a finite number of seconds >= 0")


def _positive_number(text: str) -> float:
    return _number(text, "a number", lambda v: math.isfinite(v) and v > 0,
                   "a finite number > 0")


def _confidence(text: str) -> float:
    return _number(text, "a number", lambda v: 0.5 < v < 1.0,
                   "between 0.5 and 1, e.g. 0.95")


def _min_effect(text: str) -> str:
    """METRIC=FRACTION's shape (the metric's name is checked when the gate's metrics load)."""
    name, sep, fraction = text.partition("=")
    try:
        value = float(fraction)
    except ValueError:
        value = -1.0
    if not sep or not name or not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected METRIC=FRACTION with 0 <= FRACTION < 1, e.g. "
                                         f"ttft_p99_s=0.1 (got {text!r})")
    return text


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="URL",
                        help="database URL or SQLite file (default: $TRACKER_DB_URL or "
                             "./tracker.db); PostgreSQL: postgresql+psycopg://user@host/db")


def _rate(text: str) -> float:
    return _number(text, "a number of requests per second", lambda v: v > 0, "> 0")


def _workers(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of processes, 1 or more (got "
                                         f"{text})")
    return int(text)


def _add_bench(sub: Subparsers) -> None:
    bench = sub.add_parser("bench", help="benchmark any OpenAI-compatible endpoint ad hoc "
                                         "(vllm bench serve's flags; nothing is stored)")
    bench.add_argument("--base-url", required=True, metavar="URL",
                       help="the server root, e.g. http://127.0.0.1:8000 (/v1 is appended)")
    bench.add_argument("--model", help="default: the first model at /v1/models")
    bench.add_argument("--endpoint-type", choices=("chat", "completions", "messages"),
                       default="chat")
    bench.add_argument("--max-concurrency", type=_positive, metavar="N",
                       help="the most requests in flight (default: no limit)")
    bench.add_argument("--request-rate", type=_rate, default=float("inf"), metavar="R",
                       help="planned requests per second, open loop (default inf: all at once)")
    bench.add_argument("--burstiness", type=_positive_number, default=1.0, metavar="B",
                       help="gamma shape of the gaps between requests; 1 = Poisson")
    bench.add_argument("--num-prompts", type=int, metavar="N",
                       help="requests measured (default: 200; a trace: all its rows after "
                            "--warmup)")
    bench.add_argument("--dataset-name", choices=("random", "sharegpt", "custom", "mooncake"),
                       default="random",
                       help="the prompts: seeded random words (default), a ShareGPT JSON, a "
                            'JSONL of {"prompt", "output_tokens"} (custom), or a Mooncake '
                            "trace replayed at its recorded times")
    bench.add_argument("--dataset-path", metavar="FILE",
                       help="the dataset or trace file (sharegpt, custom, mooncake)")
    bench.add_argument("--random-input-len", type=_positive, default=256, metavar="TOKENS")
    bench.add_argument("--tokenizer", metavar="PATH",
                       help="a local tokenizer.json (or its directory) to make prompt lengths "
                            "exact in; default: the server's /tokenize, else words (said)")
    bench.add_argument("--random-output-len", type=_positive, default=128, metavar="TOKENS")
    bench.add_argument("--ignore-eos", action="store_true",
                       help="ask the server to generate exactly --random-output-len tokens")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--warmup", type=_non_negative, default=0, metavar="N",
                       help="requests sent first and not measured")
    bench.add_argument("--duration", type=_seconds, metavar="S",
                       help="keep starting requests for S seconds (prompts cycle)")
    bench.add_argument("--goodput", nargs="+", default=[], metavar="KEY:MS",
                       help="SLOs for goodput, e.g. --goodput ttft:500 tpot:50 (ms)")
    bench.add_argument("--api-key-env", metavar="NAME",
                       help="the environment variable holding the API key (never the key)")
    bench.add_argument("--timeout", type=_seconds, default=600.0, metavar="S",
                       help="per-request timeout in seconds")
    bench.add_argument("--json", metavar="OUT", help="write the tracker.run/1 JSON (- = stdout)")
    bench.add_argument("--save-requests", metavar="OUT.jsonl",
                       help="write every request's timings, one JSON line each")
    bench.add_argument("--workers", type=_workers, default=1, metavar="N",
                       help="load-generator processes sharing the one planned load (default 1)")
    bench.add_argument("--quiet", action="store_true", help="no progress display")


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = OneLineParser(prog="tracker", description=DESCRIPTION)
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
    runs.add_argument("--limit", type=_positive, default=20, metavar="N")

    show = sub.add_parser("show", help="show one stored run")
    show.add_argument("run_id", type=_run_id, metavar="RUN_ID")
    _add_db(show)
    show.add_argument("--json", metavar="OUT", help="write the tracker.run/1 JSON (- = stdout)")

    demo = sub.add_parser("demo", help="the tracker's story on the built-in simulator, about a "
                                       "minute: a config's versions, a change that regresses, "
                                       "its alert and its gate report (no GPU, network or keys)")
    _add_db(demo)
    demo.add_argument("--gate-report", metavar="FILE",
                      help="where to write the gate's Markdown report (default: "
                           "tracker-demo-gate.md beside a SQLite database, else here)")
    demo.add_argument("--quiet", action="store_true", help="no line per run")

    init = sub.add_parser("init", help="write a starter set of configs, suites and a "
                                       "schedules.yaml to edit into DIR")
    init.add_argument("directory", metavar="DIR", help="where to write them (created if missing; "
                                                       "an existing file is never overwritten)")

    db = sub.add_parser("db", help="database maintenance")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_sub.add_parser("upgrade", help="apply the schema migrations")
    _add_db(upgrade)

    dashboard = sub.add_parser("dashboard", help="serve the dashboard on 127.0.0.1 "
                                                 "(trends, runs, compare, configs)")
    _add_db(dashboard)
    dashboard.add_argument("--port", type=_port, default=8501, metavar="N",
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

    add_mcp_parser(sub)
    _add_bench(sub)
    add_import_parser(sub)

    sim = sub.add_parser("sim", help="the embedded OpenAI-compatible simulator")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True, metavar="ACTION")
    serve = sim_sub.add_parser("serve", help="serve a kind: sim config until Ctrl-C")
    serve.add_argument("--config", required=True, metavar="FILE")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_port, default=8000)
    add_doctor_parser(sub)
    add_schedule_parsers(sub)
    add_gate_parsers(sub)
    return parser


def add_mcp_parser(sub: Subparsers) -> None:
    mcp = sub.add_parser("mcp", help="serve the store to coding agents over the Model Context "
                                     "Protocol (stdio, or HTTP on 127.0.0.1); docs/mcp.md")
    _add_db(mcp)
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                     help="stdio (default: the agent starts this command) or streamable HTTP")
    mcp.add_argument("--host", metavar="ADDRESS",
                     help="HTTP: address to serve on (default: 127.0.0.1); any other needs "
                          "--trust-proxy-auth")
    mcp.add_argument("--port", type=_port, metavar="N", help="HTTP: port (default: 8765)")
    mcp.add_argument("--allow-writes", action="store_true",
                     help="allow the tools that queue runs and bisections and triage "
                          "regressions (default: read-only)")
    mcp.add_argument("--trust-proxy-auth", action="store_true",
                     help="HTTP: a reverse proxy in front authenticates every request and "
                          "names the user in a header (it must replace a client's)")
    mcp.add_argument("--user-header", metavar="NAME",
                     help="that header (default: X-Forwarded-User)")


def add_import_parser(sub: Subparsers) -> None:
    imported = sub.add_parser("import", help="store another tool's result file as runs (one "
                                             "per benchmark): vllm bench serve, GuideLLM, "
                                             "AIPerf, inference-perf, llm-d reports, and the "
                                             "tracker's own tracker.run/1 JSON")
    imported.add_argument("file", metavar="FILE", help="the tool's result file (JSON; AIPerf: "
                                                        "profile_export_aiperf.json or .jsonl)")
    imported.add_argument("--format", choices=("vllm", "guidellm", "aiperf", "inference-perf",
                                                   "llmd", "tracker"),
                          help="the tool that wrote it (default: recognised from its keys)")
    imported.add_argument("--config", metavar="NAME",
                          help="the serving config's name to file the runs under (its newest "
                               "stored version; a new name gets an imported placeholder); "
                               "needed for other tools' files, the tracker's JSON names its own")
    imported.add_argument("--suite", metavar="NAME",
                          help="the suite's name (default: the tracker JSON's own, else "
                               "imported-<tool>)")
    _add_db(imported)
    export = sub.add_parser("export", help="write one workload of a stored run as another "
                                           "tool's result file (vllm bench serve's JSON)")
    export.add_argument("run_id", type=_run_id, metavar="RUN")
    export.add_argument("--format", choices=("vllm", "llmd"), default="vllm",
                        help="the file's format (default: vllm)")
    export.add_argument("--workload", metavar="NAME", help="which workload (needed when the "
                                                           "run has several)")
    export.add_argument("--out", default="-", metavar="FILE", help="where (default: stdout)")
    _add_db(export)


def add_doctor_parser(sub: Subparsers) -> None:
    doctor = sub.add_parser(
        "doctor", help="preflight an OpenAI-compatible endpoint: name the cause and fix of "
                      "each failure (exit 0 only when a chat completion returns choices)")
    doctor.add_argument("--config", metavar="FILE", help="serving config with target.base_url")
    doctor.add_argument("--base-url", metavar="URL", help="API root, e.g. https://taotoken.net/api")
    doctor.add_argument("--model", metavar="ID", help="model id to ask for")
    doctor.add_argument("--api-key-env", metavar="VAR",
                        help="NAME of the environment variable holding the key")
    doctor.add_argument("--timeout", type=_seconds, default=20.0, metavar="S",
                        help="seconds per request (default: 20)")


def add_schedule_parsers(sub: Subparsers) -> None:
    _add_schedule_parser(sub, _add_db)
    scheduler = sub.add_parser("scheduler", help="fire the schedules' slots into the run queue "
                                                 "(one per database; SIGTERM/Ctrl-C stops)")
    _add_db(scheduler)
    scheduler.add_argument("--schedules", metavar="FILE",
                           help="load this schedules.yaml into the database first")
    scheduler.add_argument("--with-worker", action="store_true",
                           help="also run a worker in this process (one machine)")
    scheduler.add_argument("--misfire-grace-s", type=_grace_seconds, default=DEFAULT_MISFIRE_GRACE_S,
                           help="a slot missed by up to this long still runs, once "
                                "(default: %(default)g)")
    scheduler.add_argument("--sync-interval-s", type=_seconds, default=DEFAULT_SYNC_INTERVAL_S,
                           help="how often to re-read schedules and reap dead workers' requests "
                                "(default: %(default)g)")
    _add_worker_options(scheduler)
    worker = sub.add_parser("worker", help="run queued requests that match this host's labels")
    _add_db(worker)
    _add_worker_options(worker)
    worker.add_argument("--exit-when-empty", action="store_true",
                        help="exit once nothing this worker may take is queued or running")
    queue = sub.add_parser("queue", help="queued, running and failed run requests")
    _add_db(queue)
    queue.add_argument("--all", action="store_true", help="include done requests")
    queue.add_argument("--limit", type=_positive, default=50, metavar="N")


def _add_schedule_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                         add_db: Callable[[argparse.ArgumentParser], None]) -> None:
    schedule = sub.add_parser("schedule", help="nightly schedules: list, add, remove, run-now")
    actions = schedule.add_subparsers(dest="schedule_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="schedules with their next run times")
    add_db(listing)
    add = actions.add_parser("add", help="add or replace schedules: --file schedules.yaml, or "
                                         "one by name with --cron, --config and --suite")
    add.add_argument("name", nargs="?", metavar="NAME")
    add.add_argument("--file", metavar="FILE", help="a schedules.yaml (replaces its schedules)")
    add.add_argument("--cron", help="'minute hour day month weekday' (6 fields: seconds first)")
    add.add_argument("--timezone", default="UTC", help="IANA time zone (default: UTC)")
    add.add_argument("--config", action="append", default=[], metavar="FILE")
    add.add_argument("--suite", action="append", default=[], metavar="FILE")
    add.add_argument("--repeats", type=_positive, default=1, metavar="N")
    add.add_argument("--labels", metavar="K=V[,K=V]", help="runner labels it needs, e.g. gpu=h100")
    add.add_argument("--bisect", action="store_true",
                     help="queue a bisection when a new config version regresses (its bisect: "
                          "option; off by default)")
    add.add_argument("--bisect-max-probes", type=int, metavar="N",
                     help="the bisection's probe budget (with --bisect)")
    add.add_argument("--bisect-max-minutes", type=_positive_number, metavar="M",
                     help="the bisection's time budget (with --bisect; default: none)")
    add_db(add)
    remove = actions.add_parser("remove", help="remove a schedule")
    remove.add_argument("name", metavar="NAME")
    add_db(remove)
    now = actions.add_parser("run-now", help="queue a schedule's runs now, outside its slots")
    now.add_argument("name", metavar="NAME")
    add_db(now)


def _add_worker_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--labels", metavar="K=V[,K=V]", help="what this runner offers, e.g. "
                                                              "gpu=h100 (default: none)")
    parser.add_argument("--gpus", metavar="LIST", help="the GPU set of this worker, e.g. 0,1 "
                        "(CUDA_VISIBLE_DEVICES of the vLLM servers it launches)")
    parser.add_argument("--heartbeat-s", type=_seconds, default=DEFAULT_HEARTBEAT_S)
    parser.add_argument("--stale-after-s", type=_seconds, default=DEFAULT_STALE_AFTER_S,
                        help="a running request silent this long is taken for dead and "
                             "requeued once (default: %(default)g)")
    parser.add_argument("--poll-s", type=_seconds, default=2.0, help="idle polling interval")
    parser.add_argument("--webhook-env", default=WEBHOOK_ENV, metavar="VAR",
                        help="environment variable holding the alert webhook URL "
                             "(default: %(default)s; unset: no alerts)")
    parser.add_argument("--dashboard-url", metavar="URL",
                        help="link put in alerts; {run_id} is replaced by the run id")


def add_gate_parsers(sub: Subparsers) -> None:
    diff = sub.add_parser("diff", help="show what differs between two serving-config versions")
    diff.add_argument("base", metavar="A", help="a config file, a git ref such as "
                      "main:configs/prod.yaml, or a stored version (NAME@VERSION or 6+ hex digits)")
    diff.add_argument("head", metavar="B", help="the same kinds as A")
    _add_db(diff)

    gate = sub.add_parser("gate", help="fail a PR whose serving config regresses: run base and "
                                       "head interleaved, or compare stored runs")
    gate.add_argument("--base", metavar="REF", help="base config: file, git ref or stored version")
    gate.add_argument("--head", metavar="REF", help="head config: file, git ref or stored version")
    gate.add_argument("--suite", metavar="FILE", help="baseline suite YAML (with --base/--head)")
    rounds = gate.add_mutually_exclusive_group()
    rounds.add_argument("--max-rounds", type=_positive, metavar="M",
                        help="sequential (the default): run rounds of a base run and a head "
                             "run (ABBA order), judged after each, and stop as soon as the verdict is clear "
                             "(the first regression, or every metric's ruled out or unlikely "
                             "to show in the rounds left), at most M rounds (default: 3 when "
                             "3+ earlier runs of the base on this host give the run-to-run "
                             "noise, else 6); the report says how many it took")
    rounds.add_argument("--repeats", type=_positive, metavar="N",
                        help="fixed design instead: exactly N rounds (N runs of each config, "
                             "interleaved ABBA: base first in odd rounds, head first in "
                             "even ones), judged once at the end")
    gate.add_argument("--quality-sample", action="store_true",
                      help="ask the suite's quality.sample instead of the whole quality set "
                           "(cheaper, less power: the report states the drop it can detect)")
    gate.add_argument("--base-run", type=_run_id, action="append", metavar="RUN_ID",
                      help="a stored base run (repeat for several)")
    gate.add_argument("--head-run", type=_run_id, action="append", metavar="RUN_ID",
                      help="a stored head run (repeat for several)")
    _add_db(gate)
    gate.add_argument("--markdown", metavar="OUT", help="write the Markdown report (PR comment)")
    gate.add_argument("--junit", metavar="OUT", help="write a JUnit XML report")
    gate.add_argument("--json", metavar="OUT", help="write the JSON verdict (- = stdout)")
    gate.add_argument("--min-effect", type=_min_effect, action="append", default=[],
                      metavar="METRIC=FRACTION",
                      help="smallest relative change that counts, e.g. ttft_p99_s=0.1 "
                           "(defaults: 0.02 medians and throughput, 0.05 p99)")
    gate.add_argument("--confidence", type=_confidence, default=0.95, metavar="LEVEL")
    gate.add_argument("--quiet", action="store_true", help="no progress display")
    gate.add_argument("--bisect", action="store_true",
                      help="when the gate finds a regression, bisect it over the diff's fields "
                           "(docs/bisect.md)")
    _add_bisect_budget(gate)
    add_bisect_parser(sub)


def _add_bisect_budget(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-probes", type=_positive, metavar="N",
                        help="bisection: at most N probe configs (default: 12)")
    parser.add_argument("--max-minutes", type=_positive_number, metavar="M",
                        help="bisection: start no probe after M minutes (default: no limit)")


def add_bisect_parser(sub: Subparsers) -> None:
    bisect = sub.add_parser("bisect", help="which changed config field made the head regress: "
                                           "run the gate, then probes of subsets of the diff")
    bisect.add_argument("--base", required=True, metavar="REF",
                        help="base config: file, git ref or stored version")
    bisect.add_argument("--head", required=True, metavar="REF", help="head config: the same kinds")
    bisect.add_argument("--suite", required=True, metavar="FILE", help="baseline suite YAML")
    bisect.add_argument("--max-rounds", type=_positive, metavar="M",
                        help="rounds of the gate and of each probe, sequential (as tracker gate)")
    _add_bisect_budget(bisect)
    _add_db(bisect)
    bisect.add_argument("--markdown", metavar="OUT", help="write the Markdown report")
    bisect.add_argument("--json", metavar="OUT", help="write the JSON (- = stdout)")
    bisect.add_argument("--min-effect", type=_min_effect, action="append", default=[],
                        metavar="METRIC=FRACTION",
                        help="as tracker gate's")
    bisect.add_argument("--confidence", type=_confidence, default=0.95, metavar="LEVEL",
                        help="the gate's; the bisection spends its false-alarm budget over "
                             "the probes")
    bisect.add_argument("--quiet", action="store_true", help="no progress display")
    bisect.set_defaults(repeats=None, junit=None, bisect=True)




def check_flags(args: argparse.Namespace) -> None:
    """The rules between flags that need no command module, checked before any is imported, so
    a wrong combination is answered at once. The commands rely on them (``main`` always calls
    this before dispatching)."""
    if args.command in ("worker", "scheduler") and args.stale_after_s <= args.heartbeat_s:
        raise UsageError(f"--stale-after-s {args.stale_after_s:g} must be longer than "
                         f"--heartbeat-s {args.heartbeat_s:g} (a few beats), or live workers "
                         "are taken for dead")
    if args.command == "gate":
        _check_gate_flags(args)
    if args.command == "schedule" and args.schedule_command == "add":
        _check_schedule_add_flags(args)
    if args.command == "bench":
        _check_bench_flags(args)


def _check_bench_flags(args: argparse.Namespace) -> None:
    from tracker.inputs.prompt_sources import MAX_REQUEST_TOKENS  # pydantic's, not the load generator

    for flag, value in (("--random-input-len", args.random_input_len),
                        ("--random-output-len", args.random_output_len)):
        if value > MAX_REQUEST_TOKENS:
            raise UsageError(f"tracker bench: {flag}: must be at most {MAX_REQUEST_TOKENS:,} "
                             f"tokens (got {value}); no model reads or writes that many")


def _check_gate_flags(args: argparse.Namespace) -> None:
    by_config = any(v is not None for v in (args.base, args.head, args.suite))
    by_runs = bool(args.base_run or args.head_run)
    if by_config == by_runs:
        raise UsageError("gate: give either --base REF --head REF --suite FILE, or "
                         "--base-run ID --head-run ID (not both, not neither)")
    if by_config and None in (args.base, args.head, args.suite):
        raise UsageError("gate: --base, --head and --suite go together; give all three")
    if by_runs and not (args.base_run and args.head_run):
        raise UsageError("gate: give at least one --base-run and one --head-run")
    if not args.bisect and (args.max_probes is not None or args.max_minutes is not None):
        raise UsageError("gate: --max-probes and --max-minutes are the budget of --bisect; "
                         "add --bisect, or leave them out")
    if by_runs and args.bisect:
        raise UsageError("gate: --bisect runs probes of configs: give --base, --head and "
                         "--suite, not stored runs")
    if by_runs and (args.repeats is not None or args.max_rounds is not None):
        raise UsageError("gate: --repeats and --max-rounds run configs; stored runs "
                         "(--base-run/--head-run) are compared as they are")


def _check_schedule_add_flags(args: argparse.Namespace) -> None:
    if args.file:
        if args.name or args.cron or args.config or args.suite:
            raise UsageError("schedule add: give either --file FILE or NAME --cron ... "
                             "--config ... --suite ..., not both")
        return
    missing = [flag for flag, value in (("NAME", args.name), ("--cron", args.cron),
                                        ("--config", args.config), ("--suite", args.suite))
               if not value]
    if missing:
        raise UsageError(f"schedule add: missing {', '.join(missing)}; e.g. tracker schedule add "
                         "nightly --cron '0 2 * * *' --config configs/x.yaml --suite "
                         "baselines/chat-short.yaml (or --file schedules.yaml)")
    budgets = args.bisect_max_probes is not None or args.bisect_max_minutes is not None
    if budgets and not args.bisect:
        raise UsageError("schedule add: --bisect-max-probes and --bisect-max-minutes need "
                         "--bisect (the option is off without it)")
    if args.bisect_max_probes is not None and args.bisect_max_probes < 1:
        raise UsageError(f"schedule add: bisect.max_probes (--bisect-max-probes): must be 1 or "
                         f"more (got {args.bisect_max_probes})")
