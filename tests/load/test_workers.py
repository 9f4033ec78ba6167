"""One plan on 1 and on 2 worker processes against the simulator over HTTP: the same requests,
the same tokens, the same Poisson arrivals; and how the schedule is shared out."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from scipy import stats  # type: ignore[import-untyped]

from tests.load.test_generator import spec
from tests.load.test_sessions import sessions
from tests.scripted_server import ServerFactory, token_stream
from tests.simconfigs import FAST_SIM
from tracker.errors import ConfigError, MeasurementError
from tracker.eventloop import run_async
from tracker.inputs.configs import ServingConfig
from tracker.inputs.suites import Workload, generate_workload_traffic
from tracker.load.bodies import build_request_specs, build_session_requests
from tracker.load.generator import Endpoint, LoadGenerator, LoadOutcome, LoadPlan
from tracker.load.phases import (
    WorkloadPhases,
    build_plan,
    build_session_plan,
    compute_phase_result,
)
from tracker.load.sessions import SessionGenerator
from tracker.load.shapes import compute_arrivals
from tracker.load.worker_shares import WorkerOutcome, build_job, compute_shares, merge_outcomes
from tracker.load.workers import WorkerPool, save_host_job
from tracker.results import RequestRecord, WorkloadResult
from tracker.sim.server import ThreadedSimServer


@pytest.fixture(scope="module")
def sim_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``tracker sim serve`` in a process of its own: a simulator thread in the test's process
    would share its interpreter lock with the one-worker client and bunch its sends."""
    config = tmp_path_factory.mktemp("sim") / "fast-sim.yaml"
    config.write_text(FAST_SIM, encoding="utf-8")
    server = subprocess.Popen([sys.executable, "-m", "tracker", "sim", "serve", "--config",
                               str(config), "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        found = re.search(r"on (http://\S+) ", line)
        assert found is not None, f"the simulator did not start: {line!r}"
        yield found.group(1)
    finally:
        server.terminate()
        server.wait(timeout=10)
        if server.stdout is not None:
            server.stdout.close()


def workload(**shape: Any) -> Workload:
    return Workload.model_validate({
        "name": "w", "prompts": {"source": "synthetic", "input_tokens": 24},
        "max_tokens": 6, "ignore_eos": True, "warmup_requests": 2, **shape})


def measure(url: str, w: Workload, workers: int) -> tuple[WorkloadResult, LoadOutcome]:
    traffic = generate_workload_traffic(5, w)
    warm, measured = build_request_specs(w, traffic, model="sim/test-model",
                                         supports_ignore_eos=True)
    phase = WorkloadPhases(w, 5, traffic).next_phase()
    assert phase is not None
    plan = build_plan(w, phase, warm, measured)
    generator = (LoadGenerator(Endpoint(url), plan) if workers == 1
                 else WorkerPool(Endpoint(url), plan, workers))
    outcome = run_async(generator.run())
    return compute_phase_result(w, phase, plan, outcome), outcome


def passes_poisson_check(starts: list[float], rate_per_s: float, window_s: float = 0.05) -> bool:
    """The sends form a Poisson process of the planned rate: the mean gap within 15 %, the gaps'
    coefficient of variation near 1 (exponential gaps, as tests/load/test_shapes.py checks the
    planned schedule), and the counts in 50 ms windows neither over- nor under-dispersed (the
    index-of-dispersion test, two-sided at 1 %; windows much longer than the event loop's
    millisecond timers, whose jitter would decide a test on the gaps themselves)."""
    first = min(starts)
    gaps = [b - a for a, b in itertools.pairwise(sorted(starts))]
    mean = statistics.fmean(gaps)
    cv = statistics.pstdev(gaps) / mean
    windows = int((max(starts) - first) / window_s)
    counts = [0] * windows
    for start in starts:
        if (slot := int((start - first) / window_s)) < windows:
            counts[slot] += 1
    dispersion = statistics.variance(counts) * (windows - 1) / statistics.fmean(counts)
    tail = float(stats.chi2.cdf(dispersion, windows - 1))
    return abs(mean * rate_per_s - 1) < 0.15 and abs(cv - 1) < 0.2 and 0.005 < tail < 0.995


def test_closed_loop_on_two_workers_sends_what_one_sends(sim_url: str) -> None:
    w = workload(concurrency=4, num_requests=24)
    one, _ = measure(sim_url, w, 1)
    two, outcome = measure(sim_url, w, 2)
    for result in (one, two):
        assert result.summary.completed == 24 and result.summary.failed == 0
        assert [r.index for r in result.records] == list(range(24))
    assert two.summary.total_output_tokens == one.summary.total_output_tokens == 24 * 6
    assert two.summary.total_input_tokens == one.summary.total_input_tokens
    assert outcome.client is not None and outcome.client.cpu_fraction is not None
    assert len({r.start_s for r in two.records}) == 24 and min(r.start_s for r in two.records) \
        >= 0  # one clock origin for both processes: nothing sent before it


CLEAN_ATTEMPTS = 3


def measure_clean(url: str, w: Workload, workers: int) -> tuple[WorkloadResult, LoadOutcome]:
    """A run the client-health check accepts: a run it marks client-bound (on a loaded host a
    worker process can be descheduled for most of a second: sends late by 0.8 s were seen, and
    flagged) measured the host, not the schedule, and the tracker makes no timing claim on it,
    so it is measured again, ``CLEAN_ATTEMPTS`` times at most; never one it did not flag."""
    reasons: list[str] = []
    for _ in range(CLEAN_ATTEMPTS):
        result, outcome = measure(url, w, workers)
        if not result.client_bound:
            return result, outcome
        client = result.summary.client
        reasons.append(str(client.reason if client is not None else None))
    raise AssertionError(f"{workers} worker(s): every run was client-bound: {reasons}")


def test_open_loop_on_two_workers_keeps_the_one_poisson_schedule(sim_url: str) -> None:
    rate = 100.0
    w = workload(request_rate=rate, num_requests=200)
    one, _ = measure_clean(sim_url, w, 1)
    two, outcome = measure_clean(sim_url, w, 2)
    for result in (one, two):
        assert result.summary.completed == 200
        assert passes_poisson_check([r.start_s for r in result.records], rate)
        late = [r.start_s - r.scheduled_start_s for r in result.records
                if r.scheduled_start_s is not None]
        assert len(late) == 200 and min(late) >= 0 and statistics.median(late) < 0.005
    assert [r.scheduled_start_s for r in two.records] == \
        [r.scheduled_start_s for r in one.records]  # planned once, dealt out
    assert two.summary.total_output_tokens == one.summary.total_output_tokens == 200 * 6
    assert two.summary.total_input_tokens == one.summary.total_input_tokens
    assert outcome.client is not None and outcome.client.send_lag_p99_s is not None


def test_the_poisson_check_fails_regular_and_bursty_schedules() -> None:
    assert passes_poisson_check(list(compute_arrivals(100.0, 1.0, 200, seed=3)), 100.0)
    for burstiness in (4.0, 0.3):  # gamma gaps, more regular and burstier than exponential
        assert not passes_poisson_check(list(compute_arrivals(100.0, burstiness, 200, seed=3)),
                                        100.0)
    assert not passes_poisson_check([i * 0.01 for i in range(200)], 100.0)


def test_concurrency_is_split_and_requests_follow_the_split() -> None:
    shares = compute_shares(5, 2, [0, 1])
    assert [(s.concurrency, s.cpu) for s in shares] == [(3, 0), (2, 1)]
    closed = [list(s.indices(10, open_loop=False)) for s in shares]
    assert closed == [[0, 1, 2, 5, 6, 7], [3, 4, 8, 9]]
    opened = [list(s.indices(6, open_loop=True)) for s in shares]
    assert opened == [[0, 2, 4], [1, 3, 5]]
    assert len(compute_shares(1, 4)) == 1  # never more workers than requests in flight


def test_a_worker_that_cannot_reach_the_server_records_failures() -> None:
    w = workload(concurrency=2, num_requests=4, warmup_requests=0)
    result, _ = measure("http://127.0.0.1:9", w, 2)
    assert result.summary.completed == 0 and result.summary.failed == 4
    assert {r.error_class for r in result.records} == {"connection_refused"}


def measure_sessions(url: str, w: Workload, workers: int) -> WorkloadResult:
    traffic = sessions(5, turns=3, history="recorded")
    warm, measured = build_session_requests(w, traffic, model="sim/test-model",
                                            supports_ignore_eos=True)
    phase = WorkloadPhases(w, 5, traffic).next_phase()
    assert phase is not None
    plan = build_session_plan(w, phase, warm, measured, think_time_s=0.0)
    generator = (SessionGenerator(Endpoint(url), plan) if workers == 1
                 else WorkerPool(Endpoint(url), plan, workers))
    return compute_phase_result(w, phase, plan, run_async(generator.run()))


@pytest.mark.parametrize("shape", [{"concurrency": 3}, {"request_rate": 50.0}])
def test_sessions_on_two_workers_keep_their_turns_in_order(sim_url: str,
                                                           shape: dict[str, Any]) -> None:
    w = Workload.model_validate({"name": "chat", "prompts": {"source": "fixed", "text": "x"},
                                 "max_tokens": 4, "ignore_eos": True, "num_requests": 5,
                                 **shape})
    one, two = measure_sessions(sim_url, w, 1), measure_sessions(sim_url, w, 2)
    for result in (one, two):
        assert result.summary.completed == 15 and result.summary.failed == 0
        for session in range(5):
            turns = [r for r in result.records if r.session == session]
            assert [r.turn for r in turns] == [1, 2, 3]
            assert all(a.start_s + (a.e2el_s or 0) <= b.start_s
                       for a, b in itertools.pairwise(turns))  # one after another
    assert [(r.index, r.session, r.turn) for r in two.records] == \
        [(r.index, r.session, r.turn) for r in one.records]
    assert two.summary.total_input_tokens == one.summary.total_input_tokens
    assert two.summary.total_output_tokens == one.summary.total_output_tokens == 15 * 4


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


@pytest.fixture
def two_hosts() -> Iterator[list[tuple[str, str, str]]]:
    """Two network namespaces, each joined to this one by a veth pair: (namespace, the
    simulator's address as seen from it, this side's interface). Deleted afterwards."""
    if shutil.which("ip") is None or os.geteuid() != 0:
        pytest.skip("network namespaces need root and iproute2's ip")
    tag, net = f"tk{os.getpid() % 100000}", os.getpid() % 250
    made: list[str] = []
    hosts = []
    try:
        for i, side in enumerate("ab"):
            ns, here, there = f"{tag}{side}", f"{tag}{side}r", f"{tag}{side}n"
            try:
                _ip("netns", "add", ns)
            except subprocess.CalledProcessError as exc:
                pytest.skip(f"ip netns add {ns}: {exc.stderr.strip()}")
            made.append(ns)
            _ip("link", "add", here, "type", "veth", "peer", "name", there)
            _ip("link", "set", there, "netns", ns)
            _ip("addr", "add", f"10.231.{net}.{4 * i + 1}/30", "dev", here)
            _ip("link", "set", here, "up")
            _ip("-n", ns, "addr", "add", f"10.231.{net}.{4 * i + 2}/30", "dev", there)
            _ip("-n", ns, "link", "set", there, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            hosts.append((ns, f"10.231.{net}.{4 * i + 1}", here))
        yield hosts
    finally:
        for ns in made:  # deleting a namespace deletes its veth pair
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)


def _received_bytes(interface: str) -> int:
    return int(Path(f"/sys/class/net/{interface}/statistics/rx_bytes").read_text())


def test_two_load_hosts_in_network_namespaces_drive_one_simulator(
    two_hosts: list[tuple[str, str, str]], tmp_path: Path
) -> None:
    """docs/multihost.md built small: each namespace is a load host with its share of one
    planned open loop; their raw outcomes are merged into one result."""
    config = ServingConfig.model_validate(yaml.safe_load(FAST_SIM))
    w = workload(request_rate=100.0, num_requests=60, warmup_requests=0)
    traffic = generate_workload_traffic(5, w)
    warm, measured = build_request_specs(w, traffic, model="sim/test-model",
                                         supports_ignore_eos=True)
    phase = WorkloadPhases(w, 5, traffic).next_phase()
    assert phase is not None
    plan = build_plan(w, phase, warm, measured)
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    script = ("import sys; from tracker.load.workers import run_host_share; "
              "run_host_share(sys.argv[1], float(sys.argv[2]), sys.argv[3])")
    with ThreadedSimServer(config, host="0.0.0.0") as server:  # on both veths
        port = urllib.parse.urlsplit(server.base_url).port
        before = [_received_bytes(here) for _, _, here in two_hosts]
        t0 = time.perf_counter() + 2.0  # one clock: namespaces do not separate CLOCK_MONOTONIC
        started_at = datetime.now(UTC)
        hosts = []
        for share, (ns, address, _) in zip(compute_shares(plan.concurrency, 2), two_hosts,
                                           strict=True):
            job, out = tmp_path / f"{ns}.job", tmp_path / f"{ns}.out"
            save_host_job(build_job(Endpoint(f"http://{address}:{port}"), plan, share), str(job))
            hosts.append((subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c",
                                            script, str(job), str(t0), str(out)], env=env), out))
        for process, _ in hosts:
            assert process.wait(timeout=60) == 0
        after = [_received_bytes(here) for _, _, here in two_hosts]
    outcomes: list[WorkerOutcome] = [pickle.loads(out.read_bytes()) for _, out in hosts]
    assert [r.index % 2 for r in outcomes[1].records] == [1] * 30  # round-robin shares
    merged = merge_outcomes(outcomes, plan, t0=t0, now=time.perf_counter(),
                            started_at=started_at, ended_at=datetime.now(UTC), complete=True)
    assert [r.index for r in merged.records] == list(range(60))
    assert all(r.ok for r in merged.records)
    assert [r.scheduled_start_s for r in merged.records] == list(plan.arrivals_s or ())
    assert sum(r.output_tokens or 0 for r in merged.records) == 60 * 6
    assert all(b - a > 30 * 200 for a, b in zip(before, after, strict=True))  # over each veth


async def test_an_interrupted_pool_keeps_what_each_worker_measured(
    scripted: ServerFactory,
) -> None:
    server = await scripted(lambda i, b: token_stream(2, ttft_s=0.05, itl_s=0.0))
    plan = LoadPlan("/v1/chat/completions", [], [spec()] * 200, concurrency=4)
    pool = WorkerPool(Endpoint(server.url), plan, 2)
    task = asyncio.get_running_loop().create_task(pool.run())
    while sum(pool._done) < 8:  # both workers are sending (their progress has come back)
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    outcome = pool.outcome(complete=False)
    assert 8 <= len(outcome.records) < 200 and not outcome.complete
    assert all(r.ok for r in outcome.records)
    assert {r.index % 4 < 2 for r in outcome.records} == {True, False}  # from both workers
    assert not multiprocessing.active_children()  # every worker process was reaped


async def test_a_workers_error_reaches_the_user_as_one_process_would_raise_it() -> None:
    plan = LoadPlan("/v1/chat/completions", [], [spec()] * 4, concurrency=2)
    with pytest.raises(ConfigError, match=r"base URL 'ftp://127.0.0.1:9'"):
        await LoadGenerator(Endpoint("ftp://127.0.0.1:9"), plan).run()
    with pytest.raises(ConfigError, match=r"base URL 'ftp://127.0.0.1:9'"):
        await WorkerPool(Endpoint("ftp://127.0.0.1:9"), plan, 2).run()
    assert not multiprocessing.active_children()


async def test_a_worker_that_dies_is_a_measurement_error_naming_it() -> None:
    plan = LoadPlan("/v1/chat/completions", [], [spec()] * 4, concurrency=2)
    pool = WorkerPool(Endpoint("http://127.0.0.1:9"), plan, 2)
    channels = pool._start_workers()
    channels[1].process.kill()
    with pytest.raises(MeasurementError, match=r"load worker 1 ended without a result \(exit "
                                               r"code -9\)"):
        await pool._run(channels)
    for channel in channels:
        channel.send("stop")
        channel.process.join(timeout=10)


def record(index: int, start_s: float, e2el_s: float) -> RequestRecord:
    return RequestRecord(index=index, start_s=start_s, ttft_s=0.01, e2el_s=e2el_s, itl_s=(),
                         output_tokens=1, output_tokens_source=None, input_tokens=1,
                         input_tokens_source=None)


def test_the_merge_pools_the_workers_figures_into_one_verdict() -> None:
    plan = LoadPlan("/v1/chat/completions", [], [spec()] * 4, concurrency=4,
                    arrivals_s=(0.0, 0.1, 0.2, 0.3))
    calm = WorkerOutcome((record(0, 0.0, 0.5), record(2, 0.2, 0.2)), True, 0.5,
                         (0.001,) * 50, (0.001, 0.002), 0)
    late = WorkerOutcome((record(3, 0.3, 0.9), record(1, 0.1, 0.1)), True, 0.97,
                         (0.001,) * 50, (0.030, 0.040), 0)
    at = datetime.now(UTC)
    merged = merge_outcomes([calm, late], plan, t0=0.0, now=2.0, started_at=at, ended_at=at,
                            complete=True, cores=2)
    assert [r.index for r in merged.records] == [0, 1, 2, 3]
    assert merged.duration_s == pytest.approx(1.2)  # the last answer's end, from the one t0
    client = merged.client
    assert client is not None and client.client_bound and client.cpu_fraction == 0.97
    assert client.send_lag_max_s == 0.040 and client.reason is not None
    assert "2 worker processes were used: at least 3 would have been needed" in client.reason
    assert "more than the 2 CPUs" in client.reason
    alone = merge_outcomes([calm], plan, t0=0.0, now=2.0, started_at=at, ended_at=at,
                           complete=False)
    assert alone.client is not None and not alone.client.client_bound
    assert alone.duration_s == 2.0 and not alone.complete  # cut short: up to now
