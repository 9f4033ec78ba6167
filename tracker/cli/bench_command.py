"""``tracker bench``: an ad-hoc benchmark of any OpenAI-compatible endpoint, nothing stored.

The flags are ``vllm bench serve``'s where one exists. Prompts (``--dataset-name``) are the
tracker's seeded random words (``random``: ``--random-input-len`` words, one token each for current
BPE tokenizers), a seeded sample of a ShareGPT JSON (``sharegpt``) or of a JSONL of ``{"prompt",
"output_tokens"}`` (``custom``), each asking for its recorded answer's length (else
``--random-output-len``), or a Mooncake trace (``mooncake``) replayed at its recorded times
(``--max-concurrency`` may cap it, and no other shape applies). The load shape otherwise:

- ``--request-rate R`` (default ``inf``): open loop, gamma-distributed gaps of mean 1/R with shape
  ``--burstiness`` (1 = Poisson). ``inf`` starts every request at once. ``--max-concurrency``
  caps the requests in flight (waiting for a slot counts in the scheduled latency).
- ``--duration S``: keep starting requests for S seconds, cycling through the prompts. With an
  infinite rate this is a closed loop of ``--max-concurrency`` workers.

``--workers N`` sends the one planned load from N processes (tracker.load.workers).
The measurement is the suites' own (tracker.load.generator, tracker.load.summary), so the numbers
and the ``--json`` (``tracker.run/1``, one workload) mean exactly what a stored run's do: the
server's ``/metrics`` from the end of the warm-up to the last request, the token counts checked
against the model's tokenizer's count of the text received, and the target's kind from its
``/version`` (``vllm``, ``sim`` for the tracker's simulator, else ``openai``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import aiohttp
from pydantic import ValidationError

from tracker.cli.output import write_json
from tracker.errors import ExitCode, MeasurementError, UsageError
from tracker.eventloop import run_async
from tracker.inputs.prompt_sources import DatasetPrompts, SyntheticPrompts, TracePrompts
from tracker.inputs.suites import PromptSource, Slos, Suite, Workload, build_loaded_suite
from tracker.inputs.traffic import WorkloadTraffic, describe_fallback
from tracker.load.bodies import build_request_specs
from tracker.load.generator import Endpoint
from tracker.load.phases import WorkloadPhases, build_plan
from tracker.load.slo import parse_goodput
from tracker.redaction import CONVENTIONAL_ENV_NAME, register_secret, say
from tracker.reports.bench_report import render_bench_text
from tracker.reports.load_report import render_request_json
from tracker.reports.run_report import render_run_json
from tracker.results import RunResult, RunStatus, VersionRef, WorkloadResult
from tracker.runner.environment import collect_environment
from tracker.runner.measure import run_measured_phase
from tracker.targets.exact_prompts import adapt_suite_traffic
from tracker.targets.model_tokenizer import Tokenizer, find_tokenizer_file, open_tokenizer
from tracker.targets.server_check import ServerFacts, run_server_facts
from tracker.telemetry import TelemetrySettings, compute_host_gpu_skip_reason
from tracker.telemetry.workload import WorkloadTelemetry

NAME = "bench"
DEFAULT_NUM_PROMPTS = 200  # --num-prompts when it is not given (a trace: its every row)


@dataclass(frozen=True, slots=True)
class BenchArgs:
    base_url: str
    model: str | None = None
    endpoint_type: str = "chat"
    max_concurrency: int | None = None
    request_rate: float = math.inf
    burstiness: float = 1.0
    num_prompts: int | None = None  # None: DEFAULT_NUM_PROMPTS, or a trace's every row
    random_input_len: int = 256
    random_output_len: int = 128
    ignore_eos: bool = False
    seed: int = 0
    warmup: int = 0
    duration_s: float | None = None
    goodput: Sequence[str] = ()
    api_key_env: str | None = None
    request_timeout_s: float = 600.0
    dataset_name: str = "random"  # random, sharegpt, custom, mooncake
    dataset_path: str | None = None
    tokenizer: str | None = None  # a local tokenizer.json (or its directory)
    workers: int = 1  # load-generator processes (tracker.load.workers)


def build_prompts(args: BenchArgs) -> PromptSource:
    """``--dataset-name`` and ``--dataset-path`` as a prompt source (vLLM's dataset names)."""
    if args.dataset_name == "random":
        if args.dataset_path is not None:
            raise UsageError("--dataset-path applies to --dataset-name sharegpt, custom or "
                             "mooncake; the random dataset is generated (drop --dataset-path)")
        return SyntheticPrompts(source="synthetic", input_tokens=args.random_input_len)
    if args.dataset_path is None:
        raise UsageError(f"--dataset-name {args.dataset_name} needs --dataset-path FILE")
    path = Path(args.dataset_path)
    if not path.is_file():
        raise UsageError(f"--dataset-path {args.dataset_path}: no such file; check the path")
    if args.dataset_name == "mooncake":
        return TracePrompts(source="trace", path=str(path.resolve()), format="mooncake")
    return DatasetPrompts(source="dataset", path=str(path.resolve()),
                          format="sharegpt" if args.dataset_name == "sharegpt" else "jsonl")


def _shape(args: BenchArgs) -> dict[str, Any]:
    if args.dataset_name == "mooncake":
        given = [flag for flag, unset in (("--request-rate", math.isinf(args.request_rate)),
                                          ("--burstiness", args.burstiness == 1.0),
                                          ("--duration", args.duration_s is None)) if not unset]
        if given:
            raise UsageError(f"--dataset-name mooncake replays the trace's own times: drop "
                             f"{', '.join(given)} (--max-concurrency caps the requests in "
                             "flight)")
        return {"max_concurrency": args.max_concurrency}
    if args.duration_s is not None and math.isinf(args.request_rate) \
            and args.max_concurrency is None:
        raise UsageError("--duration with --request-rate inf needs --max-concurrency (the "
                         "number of requests kept in flight); or give a finite --request-rate")
    if args.duration_s is not None and math.isinf(args.request_rate):
        return {"concurrency": args.max_concurrency}
    return {"request_rate": args.request_rate, "burstiness": args.burstiness,
            "max_concurrency": args.max_concurrency}


def build_workload(args: BenchArgs) -> Workload:
    """The arguments as a suite workload, validated like one. Bad values are usage errors."""
    slo = parse_goodput(args.goodput) if args.goodput else None
    shape = _shape(args)
    try:
        prompts = build_prompts(args)
        num_requests = resolve_num_prompts(args, prompts)
        return Workload(
            name=NAME,
            prompts=prompts,
            endpoint_type=args.endpoint_type,
            max_tokens=args.random_output_len, ignore_eos=args.ignore_eos,
            num_requests=num_requests, warmup_requests=args.warmup,
            request_timeout_s=args.request_timeout_s,
            slos=None if slo is None else Slos(**slo.as_ms()),
            **shape,
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "arguments"
        got = repr(first.get("input"))
        got = got if len(got) <= 60 else got[:57] + "..."
        message = str(first["msg"]).removeprefix("Value error, ")
        flag = f"{_FLAGS[where]} ({where})" if where in _FLAGS else where
        raise UsageError(f"tracker bench: {flag}: {message} (got {got})") from None


def resolve_num_prompts(args: BenchArgs, prompts: PromptSource) -> int:
    """The number of requests to measure: ``--num-prompts``, or when it is not given, every row
    of a trace after the warm-up (the whole trace replayed), else ``DEFAULT_NUM_PROMPTS``.

    More than a trace holds is an error."""
    if not isinstance(prompts, TracePrompts):
        return DEFAULT_NUM_PROMPTS if args.num_prompts is None else args.num_prompts
    rows = count_trace_rows(prompts, str(args.dataset_path))
    warmup = f" after --warmup {args.warmup}" if args.warmup else ""
    if args.num_prompts is None:
        if rows - args.warmup < 1:
            raise UsageError(f"--dataset-path {args.dataset_path}: the trace holds {rows} rows, "
                             f"none left to measure{warmup}; lower --warmup")
        return rows - args.warmup
    if args.num_prompts + args.warmup > rows:
        most = f" (at most {rows - args.warmup})" if rows > args.warmup else ""
        raise UsageError(f"--num-prompts {args.num_prompts}: the trace {args.dataset_path} holds "
                         f"{rows} rows, too few to measure {args.num_prompts}{warmup}; lower "
                         f"--num-prompts{most}, or leave it out to replay the whole trace")
    return args.num_prompts


def count_trace_rows(prompts: TracePrompts, flag_value: str) -> int:
    """The trace's rows (each checked as the replay checks it)."""
    from tracker.inputs.datafiles import DataFile
    from tracker.inputs.traces import read_trace

    file = DataFile(Path(prompts.path), "trace", f"--dataset-path {flag_value}")
    return sum(1 for _ in read_trace(file, prompts))


_FLAGS = {"input_tokens": "--random-input-len", "max_tokens": "--random-output-len",
          "num_requests": "--num-prompts", "warmup_requests": "--warmup",
          "request_timeout_s": "--timeout", "request_rate": "--request-rate",
          "max_concurrency": "--max-concurrency", "burstiness": "--burstiness"}


def _headers(args: BenchArgs) -> dict[str, str]:
    """The key's header. The key (whatever its shape) is hidden in every text redacted from
    now on, as ``tracker run``'s is (tracker.targets.resolve)."""
    if args.api_key_env is None:
        return {}
    value = os.environ.get(args.api_key_env, "").strip()
    register_secret(value)
    if not value:
        if not CONVENTIONAL_ENV_NAME.fullmatch(args.api_key_env):
            register_secret(args.api_key_env)  # a key pasted where its variable's name belongs
        raise UsageError(f"--api-key-env {args.api_key_env}: the variable is not set; export "
                         f"it first (export {args.api_key_env}=<your key>)")
    return {"Authorization": f"Bearer {value}"}


async def fetch_first_model(endpoint: Endpoint) -> str:
    """The first model the server lists at /v1/models (when --model is not given)."""
    try:
        async with aiohttp.ClientSession(trust_env=True) as session, session.get(
                endpoint.url("/v1/models"), headers=endpoint.headers,
                timeout=aiohttp.ClientTimeout(total=30)) as response:
            data = await response.json(content_type=None)
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
        raise MeasurementError(f"{endpoint.base_url}/v1/models: could not list the models "
                               f"({type(exc).__name__}: {exc}); pass --model") from None
    models = data.get("data") if isinstance(data, dict) else None
    if not models or not isinstance(models[0], dict) or "id" not in models[0]:
        raise MeasurementError(f"{endpoint.base_url}/v1/models: no model listed; pass --model")
    return str(models[0]["id"])


@dataclass(frozen=True, slots=True)
class BenchOutcome:
    model: str
    result: WorkloadResult
    prompt_facts: Mapping[str, object]  # which tokenizer the prompt lengths are exact in
    server: ServerFacts | None = None  # what the server said about itself (None: not asked)

    @property
    def target_kind(self) -> str:
        """``vllm`` or ``sim`` where the server's /version says so, else ``openai``."""
        if self.server is None or self.server.engine is None:
            return "openai"
        return "sim" if self.server.simulated else "vllm" if self.server.routes_by_model \
            else "openai"


def check_bench_model(facts: ServerFacts, model: str, base_url: str) -> None:
    """A ``--model`` a vLLM (or the simulator) does not serve: a usage error naming the ones
    it does, before any request."""
    if facts.models is None or not facts.routes_by_model \
            or any(m.name == model for m in facts.models):
        return
    listed = ", ".join(m.name for m in facts.models[:8]) or "no model"
    raise UsageError(f"--model {model}: the server at {base_url} ({facts.engine}) does not serve "
                     f"it; its /v1/models lists: {listed}. Pass one of those (or leave --model "
                     "out for the first)")


def _local_tokenizer(args: BenchArgs) -> Path | None:
    if args.tokenizer is None:
        return None
    path = find_tokenizer_file(args.tokenizer)
    if not path.is_file():
        raise UsageError(f"--tokenizer {args.tokenizer}: no file at {path}; name the model's "
                         "tokenizer.json or its directory")
    return path


async def run_bench(args: BenchArgs, progress: TextIO | None = None) -> BenchOutcome:
    """The measured workload, its prompts at exact lengths in the model's tokenizer (the
    server's /tokenize or --tokenizer) where one is found, else in words.

    The outcome holds the server's counters over it (after the warm-up) and its token counts
    checked against the tokenizer."""
    workload = build_workload(args)
    endpoint = Endpoint(args.base_url, _headers(args))
    suite = build_loaded_suite(Suite(name=NAME, seed=args.seed, workloads=[workload]), "-")
    local = _local_tokenizer(args)
    model = args.model or await fetch_first_model(endpoint)  # bad input fails before this
    facts = await run_server_facts(endpoint)
    check_bench_model(facts, model, args.base_url)
    async with open_tokenizer(endpoint, model, local) as tokenizer:
        exact = await adapt_suite_traffic(suite.traffic, suite.suite.workloads, tokenizer)
        if progress is not None and exact.fallback is not None:
            say(describe_fallback(exact.tokenizer, exact.fallback), stream=progress)
        result = await _run_workload(args, workload, endpoint, exact.traffic[NAME], model,
                                     tokenizer, progress)
    workers = int((result.params.get("load") or {}).get("workers", 1))
    return BenchOutcome(model, result, {**exact.environment_facts(), "load_workers": workers},
                        facts)


async def _run_workload(args: BenchArgs, workload: Workload, endpoint: Endpoint,
                        traffic: WorkloadTraffic, model: str, tokenizer: Tokenizer,
                        progress: TextIO | None) -> WorkloadResult:
    """The one phase, measured as ``tracker run`` measures one (``run_measured_phase``). The
    GPUs are sampled where the server runs on this host."""
    warmup, measured = build_request_specs(workload, traffic, model=model,
                                           supports_ignore_eos=args.ignore_eos)
    phase = WorkloadPhases(workload, args.seed, traffic).next_phase()
    assert phase is not None
    plan = build_plan(workload, phase, warmup, measured, duration_s=args.duration_s)

    def on_progress(done: int, total: int) -> None:
        if progress is not None and (done == total or done % 50 == 0):
            say(f"\r{done}/{total} requests", stream=progress, end="")

    telemetry = WorkloadTelemetry(endpoint, TelemetrySettings(),
                                  compute_host_gpu_skip_reason(args.base_url))
    result = await run_measured_phase(endpoint, workload, phase, plan, workers=args.workers,
                                      tokenizer=tokenizer, telemetry=telemetry,
                                      on_progress=on_progress)
    if progress is not None:
        say("", stream=progress)
    return result


def build_run(args: BenchArgs, model: str, result: WorkloadResult,
              prompt_facts: Mapping[str, object] | None = None, *,
              target_kind: str = "openai", engine: str | None = None) -> RunResult:
    """The ad-hoc run in the ``tracker.run/1`` shape (run_id 0: nothing is stored)."""
    body = {"base_url": args.base_url, "model": model, "endpoint_type": args.endpoint_type}
    version = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    status = RunStatus.COMPLETED if result.summary.completed else RunStatus.FAILED
    environment = collect_environment(target_kind=target_kind, engine=engine)
    environment.update(prompt_facts or {})
    return RunResult(
        run_id=0, status=status, simulated=target_kind == "sim",
        config=VersionRef("adhoc", version),
        suite=VersionRef(NAME, hashlib.sha256(json.dumps(dict(result.params), sort_keys=True,
                                                         default=str).encode()).hexdigest()),
        started_at=result.started_at, ended_at=result.ended_at, host=str(environment["host"]),
        tracker_version=str(environment["tracker_version"]), environment=environment,
        workloads=(result,),
        status_reason=None if result.summary.completed else "no request completed",
        config_body=body)


def save_requests(path: str, result: WorkloadResult) -> None:
    """One JSON line per request, in milliseconds, failures included (with the requested input
    length beside the server's)."""
    target = Path(path)
    if not target.parent.is_dir():
        raise UsageError(f"--save-requests {path}: directory {target.parent} does not exist")
    with target.open("w", encoding="utf-8") as handle:
        for record in result.records:
            handle.write(json.dumps(render_request_json(record)) + "\n")


def execute_bench(args: BenchArgs, quiet: bool = False) -> BenchOutcome:
    try:
        return run_async(run_bench(args, None if quiet else sys.stderr))
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None


def bench_json(args: BenchArgs, outcome: BenchOutcome) -> dict[str, Any]:
    engine = None if outcome.server is None else outcome.server.engine
    data = render_run_json(build_run(args, outcome.model, outcome.result, outcome.prompt_facts,
                                     target_kind=outcome.target_kind, engine=engine))
    data["run_id"] = None  # ad hoc: not stored
    return data


def cmd_bench(args: argparse.Namespace) -> int:
    bench = BenchArgs(
        base_url=args.base_url, model=args.model, endpoint_type=args.endpoint_type,
        max_concurrency=args.max_concurrency, request_rate=args.request_rate,
        burstiness=args.burstiness, num_prompts=args.num_prompts,
        random_input_len=args.random_input_len, random_output_len=args.random_output_len,
        ignore_eos=args.ignore_eos, seed=args.seed, warmup=args.warmup,
        duration_s=args.duration, goodput=tuple(args.goodput), api_key_env=args.api_key_env,
        request_timeout_s=args.timeout, dataset_name=args.dataset_name,
        dataset_path=args.dataset_path, tokenizer=args.tokenizer, workers=args.workers)
    outcome = execute_bench(bench, quiet=args.quiet or args.json == "-")
    model, result = outcome.model, outcome.result
    if args.json:
        write_json(args.json, bench_json(bench, outcome))
    if args.save_requests:
        save_requests(args.save_requests, result)
    if args.json != "-":
        say(render_bench_text(model, result))
    return ExitCode.OK if result.summary.completed else ExitCode.NOT_MEASURED
