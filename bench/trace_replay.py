"""Trace replay: how late requests leave against a trace's times, and how long its prompts take.

Run: .venv/bin/python bench/trace_replay.py [--rows 2000] [--rate 200] [--build-rows 10000]

Everything is made here, seeded, in a temporary folder: a Mooncake-style JSONL trace (``timestamp``
in ms, ``input_length``, ``output_length`` of 1 to 4 tokens, ``hash_ids`` of 512-token blocks
that share system prompts and continue earlier rows) and an Azure-style CSV.

Part 1 (lateness): ``--rows`` rows at ``--rate`` req/s (Poisson gaps, rounded to the
millisecond as a Mooncake trace records them) are replayed through the tracker's own path
(``load_suite`` of a ``source: trace`` suite, ``build_plan``, ``LoadGenerator``) against the
embedded simulator in a process of its own (``python -m tracker.sim`` on an ephemeral port, with
a fast timing model, so the server is not the bottleneck). Printed: how late each request's body
left against the trace's time (p50, p99, max; goal p99 <= 2 ms), the achieved and the recorded
rate. The reference, in the same run: a bare ``asyncio.sleep``-until loop over the same times on
the same event loop, sending nothing -- the floor this machine's timers allow.

Part 2 (build): the time to build the prompts of a ``--build-rows`` trace, Mooncake and Azure
(goal < 2 s): rows parsed and prompts made (``build_trace_traffic``), then the whole suite load
(adds the prompts digest) and the request bodies (``build_request_specs``). The reference: the
same file only read and parsed with ``json.loads`` / ``csv`` (the floor of any reader).

Nothing is asserted: this prints tables and whether each goal was met.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# after the path above
from tracker.eventloop import event_loop_name, run_async  # noqa: E402
from tracker.inputs.configs import ServingConfig  # noqa: E402
from tracker.inputs.datafiles import DataFile  # noqa: E402
from tracker.inputs.suites import LoadedSuite, load_suite  # noqa: E402
from tracker.inputs.traces import build_trace_traffic  # noqa: E402
from tracker.load.bodies import build_request_specs  # noqa: E402
from tracker.load.generator import Endpoint, LoadGenerator, LoadOutcome  # noqa: E402
from tracker.load.phases import WorkloadPhases, build_plan  # noqa: E402
from tracker.sim import ThreadedSimServer  # noqa: E402

SEED = 20251201
BLOCK_TOKENS = 512
MODEL = "sim/bench"
LATENESS_GOAL_S = 0.002
BUILD_GOAL_S = 2.0
SIM_FLAGS = ["--max-num-seqs", "256", "--max-model-len", "16384", "--sim-seed", "1",
             "--sim-prefill-s-per-token", "0.000001", "--sim-decode-base-s", "0.001",
             "--sim-decode-per-seq-s", "0.0", "--sim-noise", "0.0", "--sim-run-noise", "0.0"]


# --- the traces ------------------------------------------------------------------------------

def draw_times_ms(rng: random.Random, rows: int, rate_per_s: float) -> list[int]:
    """Poisson arrivals at ``rate_per_s``, each time rounded to the millisecond."""
    now_ms, times = 0.0, []
    for _ in range(rows):
        times.append(round(now_ms))
        now_ms += rng.expovariate(rate_per_s) * 1000
    return times


def draw_mooncake_rows(rows: int, rate_per_s: float, seed: int) -> list[dict[str, Any]]:
    """Rows behind one of 8 shared system prompts (1-2 blocks); a third continue an earlier row
    (its ids, then more), the rest add 0-4 blocks of their own."""
    rng = random.Random(seed)
    systems = [[2 * s, 2 * s + 1][:1 + rng.randrange(2)] for s in range(8)]
    next_id, made = 16, list[dict[str, Any]]()
    for stamp in draw_times_ms(rng, rows, rate_per_s):
        if made and rng.random() < 1 / 3:
            ids = list(rng.choice(made[-64:])["hash_ids"])[:6]
        else:
            ids = list(rng.choice(systems))
        fresh = rng.randrange(5)
        ids += range(next_id, next_id + fresh)
        next_id += fresh
        made.append({"timestamp": stamp,
                     "input_length": (len(ids) - 1) * BLOCK_TOKENS + rng.randint(1, BLOCK_TOKENS),
                     "output_length": rng.randint(1, 4), "hash_ids": ids})
    return made


def write_mooncake(path: Path, rows: int, rate_per_s: float, seed: int) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for row in draw_mooncake_rows(rows, rate_per_s, seed):
            handle.write(json.dumps(row) + "\n")
    return path


def write_azure(path: Path, rows: int, rate_per_s: float, seed: int) -> Path:
    """The Azure LLM inference trace's columns, its date-time format, its lengths' shape."""
    rng = random.Random(seed)
    start = datetime(2023, 11, 16, 18, 15, 46)
    with path.open("w", encoding="utf-8", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
        for stamp in draw_times_ms(rng, rows, rate_per_s):
            moment = start + timedelta(milliseconds=stamp)
            out.writerow([moment.strftime("%Y-%m-%d %H:%M:%S.%f") + "0",
                          min(int(rng.lognormvariate(7.0, 0.9)) + 1, 8000), rng.randint(1, 4)])
    return path


def write_suite(folder: Path, trace: Path, fmt: str, *, rows: int, warmup: int,
                max_concurrency: int) -> Path:
    suite = folder / f"suite-{trace.stem}.yaml"
    suite.write_text(
        f"name: bench-{trace.stem}\nseed: 7\nworkloads:\n"
        f"  - name: replay\n"
        f"    prompts: {{source: trace, path: {trace.name}, format: {fmt}}}\n"
        f"    max_tokens: 4\n    ignore_eos: true\n"
        f"    num_requests: {rows - warmup}\n    warmup_requests: {warmup}\n"
        f"    max_concurrency: {max_concurrency}\n", encoding="utf-8")
    return suite


# --- part 1: lateness ------------------------------------------------------------------------

@contextmanager
def simulator_process() -> Iterator[str]:
    """``python -m tracker.sim`` in a process of its own, on an ephemeral port: its base URL."""
    process = subprocess.Popen([sys.executable, "-m", "tracker.sim", MODEL, "--port", "0",
                                *SIM_FLAGS], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if "Starting tracker-sim API server on " in line:
                yield line.rsplit(" ", 1)[1].strip()
                return
        raise RuntimeError(f"the simulator exited ({process.wait()}) before it listened")
    finally:
        process.terminate()
        process.wait(10)


@contextmanager
def simulator_thread() -> Iterator[str]:
    """The simulator on a loop of its own in a thread of this process, as the runner starts
    ``target: {kind: sim}`` (it shares this process's GIL with the load generator)."""
    settings = {k.removeprefix("--sim-").replace("-", "_"): float(v)
                for k, v in zip(SIM_FLAGS[::2], SIM_FLAGS[1::2], strict=True)
                if k.startswith("--sim-")}
    config = ServingConfig.model_validate({
        "name": "bench", "engine": {"max_num_seqs": 256, "max_model_len": 16384},
        "target": {"kind": "sim", "model": MODEL,
                   "simulator": {**settings, "seed": int(settings["seed"])}}})
    with ThreadedSimServer(config) as server:
        yield server.base_url


def replay(base_url: str, loaded: LoadedSuite) -> tuple[LoadOutcome, float | None]:
    """The outcome, and how long the loop thread waited for a CPU while the generator ran."""
    workload = loaded.suite.workloads[0]
    traffic = loaded.traffic[workload.name]
    warm, measured = build_request_specs(workload, traffic, model=MODEL, supports_ignore_eos=True)
    phase = WorkloadPhases(workload, loaded.suite.seed, traffic).next_phase()
    assert phase is not None and phase.trace
    plan = build_plan(workload, phase, warm, measured)
    waited = run_queue_wait_s()
    outcome = run_async(LoadGenerator(Endpoint(base_url), plan).run())
    return outcome, _since(waited)


def run_queue_wait_s() -> float | None:
    """How long this thread has waited for a CPU while runnable (Linux schedstat), or None."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


async def run_sleep_floor(arrivals_s: Sequence[float]) -> list[float]:
    """How late a bare sleep-until loop wakes at each planned time (never early, as the
    generator's own loop)."""
    loop, late = asyncio.get_running_loop(), []
    t0 = time.perf_counter()
    for planned in arrivals_s:
        while (delay := t0 + planned - time.perf_counter()) > 0:
            await asyncio.sleep(delay)
        late.append(time.perf_counter() - t0 - planned)
        loop.call_soon(lambda: None)  # a task would start here: one more turn of the loop
    return late


@dataclass(frozen=True, slots=True)
class Lateness:
    what: str
    late_s: list[float]
    sent_s: list[float]  # when each left, on the plan's origin
    planned_s: list[float]
    cpu_wait_s: float | None = None  # the loop thread's time runnable but without a CPU

    def row(self) -> list[str]:
        late = sorted(self.late_s)
        waited = "n/a" if self.cpu_wait_s is None else f"{self.cpu_wait_s * 1000:.0f}"
        return [self.what, f"{len(late)}", _ms(float(np.percentile(late, 50))),
                _ms(float(np.percentile(late, 99))), _ms(late[-1]),
                f"{_rate(self.sent_s):.1f}", f"{_rate(self.planned_s):.1f}", waited]


def _rate(times_s: Sequence[float]) -> float:
    return (len(times_s) - 1) / (max(times_s) - min(times_s))


def _ms(value: float) -> str:
    return f"{value * 1000:.3f}"


def lateness_of(what: str, outcome: LoadOutcome, cpu_wait_s: float | None) -> Lateness:
    records = [r for r in outcome.records if r.scheduled_start_s is not None]
    failed = sorted({r.error_class for r in records if r.error_class is not None})
    if failed:
        print(f"note: {what}: requests failed: {failed}")
    planned = [r.scheduled_start_s for r in records if r.scheduled_start_s is not None]
    health = outcome.client
    if health is not None:
        print(f"{what}: client health: send lag p99 {_ms(health.send_lag_p99_s or 0)} ms, loop "
              f"lag p99 {_ms(health.loop_lag_p99_s or 0)} ms, loop thread busy "
              f"{health.cpu_fraction or 0:.0%}, client-bound: {health.client_bound}")
    return Lateness(what, [r.start_s - p for r, p in zip(records, planned, strict=True)],
                    [r.start_s for r in records], planned, cpu_wait_s)


def _since(start: float | None) -> float | None:
    now = run_queue_wait_s()
    return None if start is None or now is None else now - start


VARIANTS = (("tracker, sim in its own process", simulator_process),
            ("tracker, sim in a thread (runner)", simulator_thread))
FLOOR = "reference: bare sleep-until loop"


def measure_lateness(folder: Path, rows: int, rate_per_s: float,
                     repeats: int) -> list[Lateness]:
    """In turns, ``repeats`` times: the replay against the simulator in its own process, then
    in a thread of this one (as the runner starts it), then the bare sleep-until loop over the
    same times (alternating, so a busy moment of this shared machine hits all three alike)."""
    trace = write_mooncake(folder / "replay.jsonl", rows + 10, rate_per_s, SEED)
    loaded = load_suite(write_suite(folder, trace, "mooncake", rows=rows + 10, warmup=10,
                                    max_concurrency=64))
    results: list[Lateness] = []
    for repeat in range(1, repeats + 1):
        for what, start in VARIANTS:
            with start() as base_url:
                results.append(lateness_of(f"{what} #{repeat}", *replay(base_url, loaded)))
        planned = results[-1].planned_s
        waited = run_queue_wait_s()
        late = run_async(run_sleep_floor(planned))
        results.append(Lateness(f"{FLOOR} #{repeat}", late,
                                [p + x for p, x in zip(planned, late, strict=True)], planned,
                                _since(waited)))
    return results


# --- part 2: building the prompts ------------------------------------------------------------

def read_only(path: Path, fmt: str) -> int:
    """The floor: every row parsed, nothing built."""
    with path.open(encoding="utf-8") as handle:
        if fmt == "mooncake":
            return sum(len(json.loads(line)["hash_ids"]) >= 0 for line in handle)
        return sum(1 for _ in csv.reader(handle)) - 1


def time_build(folder: Path, fmt: str, rows: int) -> list[tuple[str, float]]:
    """(step, seconds) for one trace of ``rows`` rows."""
    writer = write_mooncake if fmt == "mooncake" else write_azure
    trace = writer(folder / f"build-{fmt}.{'jsonl' if fmt == 'mooncake' else 'csv'}", rows,
                   200.0, SEED + 1)
    suite_path = write_suite(folder, trace, fmt, rows=rows, warmup=0, max_concurrency=64)
    steps: list[tuple[str, float]] = []
    t = time.perf_counter()
    read_only(trace, fmt)
    steps.append(("reference: read and parse only", time.perf_counter() - t))
    loaded = load_suite(suite_path)
    source = loaded.suite.workloads[0].prompts
    t = time.perf_counter()
    traffic = build_trace_traffic(DataFile(trace, "trace", "path"), source,  # type: ignore[arg-type]
                                  seed=7, name="replay", warmup=0, total=rows, max_tokens=4)
    steps.append(("rows parsed + prompts built", time.perf_counter() - t))
    t = time.perf_counter()
    loaded = load_suite(suite_path)
    steps.append(("load_suite (+ prompts digest)", time.perf_counter() - t))
    t = time.perf_counter()
    build_request_specs(loaded.suite.workloads[0], loaded.traffic["replay"], model=MODEL,
                        supports_ignore_eos=True)
    steps.append(("request bodies (JSON)", time.perf_counter() - t))
    tokens = sum(r.requested_input_tokens or 0 for r in traffic.requests)
    steps.append((f"  ({rows:,} rows, {tokens / 1e6:.1f}M input tokens)", float("nan")))
    return steps


# --- the report ------------------------------------------------------------------------------

def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))))


def report_lateness(results: list[Lateness], rate_per_s: float) -> None:
    print(f"\nPart 1: a {len(results[0].late_s):,}-row Mooncake trace at {rate_per_s:g} req/s "
          "on the simulator (lateness = sent - the trace's time, ms)")
    print("(waited for CPU: how long the client's loop thread was runnable but had no CPU)")
    print_table(["", "requests", "p50", "p99", "max", "achieved req/s", "recorded req/s",
                 "waited for CPU (ms)"],
                [r.row() for r in sorted(results, key=lambda r: r.what)])
    for what in [v for v, _ in VARIANTS] + [FLOOR]:
        p99s = sorted(float(np.percentile(r.late_s, 99)) for r in results
                      if r.what.startswith(what + " #"))
        p99 = statistics.median(p99s)
        verdict = "met" if p99 <= LATENESS_GOAL_S else "MISSED"
        print(f"{what}: median p99 over {len(p99s)} repeats {_ms(p99)} ms; goal p99 <= "
              f"{LATENESS_GOAL_S * 1000:g} ms: {verdict}")


def report_build(builds: dict[str, list[tuple[str, float]]]) -> None:
    print("\nPart 2: building a trace's prompts (s)")
    for fmt, steps in builds.items():
        print_table([fmt, "s"], [[name, "" if s != s else f"{s:.3f}"] for name, s in steps])
        built = dict(steps)["rows parsed + prompts built"]
        verdict = "met" if built < BUILD_GOAL_S else "MISSED"
        print(f"goal < {BUILD_GOAL_S:g} s for the prompts: {verdict} ({built:.2f} s)\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--build-rows", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=3, help="lateness runs of each kind")
    args = parser.parse_args(argv)
    print(f"python {platform.python_version()}, {event_loop_name()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="trace-bench-") as name:
        folder = Path(name)
        builds = {fmt: time_build(folder, fmt, args.build_rows) for fmt in ("mooncake", "azure")}
        lateness = measure_lateness(folder, args.rows, args.rate, args.repeats)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    report_lateness(lateness, args.rate)
    report_build(builds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
