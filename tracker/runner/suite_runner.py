"""Run a suite against a serving config: target up, workloads in order, results to a sink.

The runner measures, and it does not know about databases. Each finished workload goes to the sink
at once, so whatever was measured survives an interrupt or a target that dies mid-run. A
workload of multi-turn sessions runs on the session generator, and each of its phases is
followed by its per-turn results (``tracker.load.phases.compute_turn_results``), and one with
LoRA adapters by its per-adapter results (``tracker.load.adapters``).

Once the target answers, and before any body is built, the suite's prompts are cut to exact
lengths in the model's tokenizer (``tracker.targets.exact_prompts``). The run's environment says
which tokenizer that was, or why the word tokenizer was used instead. The same tokenizer counts
each workload's received text afterwards, for the token-count check
(``tracker.targets.output_tokens``). Where the target contradicts the config (the server check in
``tracker.targets.resolve``), the warnings go to the run's environment and to the progress.

Each workload's server counters start after its warm-up (``WorkloadTelemetry.warmed``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from tracker.errors import TrackerError
from tracker.inputs.adapters import check_adapters_served
from tracker.inputs.configs import LoadedConfig
from tracker.inputs.suites import LoadedSuite, Workload
from tracker.load.adapters import compute_adapter_results
from tracker.load.bodies import build_request_specs, build_session_requests
from tracker.load.client_health import (
    BoundKind,
    compute_bound_kind,
    compute_workers_needed,
    count_usable_cpus,
)
from tracker.load.generator import LoadPlan
from tracker.load.phases import (
    Phase,
    WorkloadPhases,
    build_plan,
    build_session_plan,
    compute_turn_results,
)
from tracker.load.sessions import SessionPlan
from tracker.load.worker_shares import result_workers
from tracker.quality.accuracy import compute_quality_result
from tracker.quality.sets import QualitySet, compute_sample
from tracker.results import QualityResult, RunStatus, WorkloadResult
from tracker.runner.environment import collect_environment
from tracker.runner.measure import run_measured_phase
from tracker.runner.quality_client import run_quality_set
from tracker.targets.exact_prompts import adapt_suite_traffic
from tracker.targets.model_tokenizer import Tokenizer, open_tokenizer, resolve_tokenizer_path
from tracker.targets.resolve import SIM_ENGINE, TargetHandle, open_target
from tracker.telemetry import TelemetrySettings, compute_gpu_skip_reason
from tracker.telemetry.workload import WorkloadTelemetry

SIM_TOKENIZER = "words (the simulator's tokenizer)"


class RunSink(Protocol):
    def begin(self, *, started_at: datetime, simulated: bool,
              environment: dict[str, object]) -> int: ...

    def save_workload(self, position: int, result: WorkloadResult) -> None: ...

    def save_quality(self, result: QualityResult) -> None: ...

    def finish(self, status: RunStatus, reason: str | None, ended_at: datetime) -> None: ...


class QualityReuse(Protocol):
    """Where a run finds the answers already asked tonight (the store's sink)."""

    def fetch_reusable_quality(self, quality_set: QualitySet) -> QualityResult | None: ...


class Progress(Protocol):
    def workload_started(self, name: str, position: int, count: int, requests: int) -> None: ...

    def request_done(self, done: int, total: int) -> None: ...

    def workload_finished(self, result: WorkloadResult) -> None: ...

    def prompts_built(self, tokenizer: str, fallback: str | None) -> None: ...

    def server_checked(self, warnings: tuple[str, ...]) -> None: ...


@dataclass(frozen=True, slots=True)
class RunOutcome:
    run_id: int
    status: RunStatus
    reason: str | None


def compute_run_status(results: list[WorkloadResult], planned: int,
                       interrupted: bool) -> tuple[RunStatus, str | None]:
    """The run's status: completed when every workload ran and measured something, failed when
    nothing was measured."""
    measured = [r for r in results if r.summary.completed > 0]
    if not measured:
        reason = "interrupted before any request completed" if interrupted else _why_empty(results)
        return RunStatus.FAILED, reason
    if interrupted:
        return RunStatus.PARTIAL, f"interrupted after {len(results)} of {planned} workloads"
    empty = [r.name for r in results if r.summary.completed == 0]
    if empty or len(results) < planned:
        return RunStatus.PARTIAL, f"no request completed in: {', '.join(empty)}; {_why_empty(results)}"
    return RunStatus.COMPLETED, None


def _why_empty(results: list[WorkloadResult]) -> str:
    for result in results:
        failures = [r for r in result.records if r.error_class is not None]
        if result.summary.completed == 0 and failures:
            first = failures[0]
            return (f"all {len(failures)} requests of {result.name} failed; "
                    f"first: {first.error_class}: {first.error}")
    return "no workload produced a measurement"


class SuiteRunner:
    def __init__(self, config: LoadedConfig, suite: LoadedSuite, sink: RunSink,
                 progress: Progress | None = None,
                 telemetry: TelemetrySettings | None = None, *,
                 run_ordinal: int | None = None, quality_reuse: QualityReuse | None = None,
                 quality_whole: bool = False) -> None:
        self.config = config
        self.quality_reuse = quality_reuse  # None: the quality set is asked in every run
        self.quality_whole = quality_whole  # the whole set, not the suite's ``quality.sample``
        self.run_ordinal = run_ordinal  # for the embedded simulator; None: a fresh draw
        self.suite = suite
        self.sink = sink
        self.progress = progress
        self.results: list[WorkloadResult] = []
        self.traffic = suite.traffic  # what is sent: exact lengths once the target's tokenizer is known
        self.tokenizer: Tokenizer | None = None  # the model's, while the target is up
        self.simulated = config.config.simulated  # or the server says it is the simulator
        self.telemetry = _telemetry_settings(suite, telemetry)

    async def run(self) -> RunOutcome:
        target = self.config.config.target
        engine = SIM_ENGINE if target.kind == "sim" else None  # the target may say more
        environment = collect_environment(target_kind=target.kind, engine=engine,
                                          config_path=self.config.path,
                                          nvml=self.telemetry.nvml)
        environment["load_workers"] = self.suite.suite.workers  # each phase's: params.load
        started_at = datetime.now(UTC)
        run_ids: list[int] = []  # begun once the target is up (its launch facts are known)

        def begin() -> int:
            if not run_ids:
                run_ids.append(self.sink.begin(started_at=started_at, environment=environment,
                                               simulated=self.simulated))
            return run_ids[0]

        local_tokenizer = resolve_tokenizer_path(self.config)  # a missing file fails before launch
        engine_args = self.config.config.engine  # an adapter the config does not serve, too
        check_adapters_served(((w.name, w.adapters) for w in self.suite.suite.workloads),
                              engine_args.lora_modules, self.config.path)
        try:
            async with open_target(self.config, run_ordinal=self.run_ordinal) as handle, \
                    AsyncExitStack() as stack:
                self.simulated = self.simulated or handle.simulated
                environment.update(handle.environment_facts())
                if self.progress is not None:
                    self.progress.server_checked(handle.warnings)
                environment.update(await self._build_prompts(handle, local_tokenizer, stack))
                begin()
                await self._run_workloads(handle)
                await self._run_quality(handle)
        except asyncio.CancelledError:
            begin()
            self._finish(interrupted=True)
            raise
        except TrackerError as exc:
            begin()
            self.sink.finish(RunStatus.FAILED, str(exc), datetime.now(UTC))
            raise
        status, reason = self._finish(interrupted=False)
        return RunOutcome(begin(), status, reason)

    async def _build_prompts(self, handle: TargetHandle, local_tokenizer: Path | None,
                             stack: AsyncExitStack) -> dict[str, object]:
        """The suite's prompts at exact lengths in the model's tokenizer (the target's
        ``/tokenize`` or the config's tokenizer.json), else in words with the reason. It returns
        what the run's environment records about it. The tokenizer stays open on ``stack`` for
        the token-count check. The embedded simulator counts in words, so its prompts are the
        suite's own without asking it."""
        if self.config.config.target.kind == "sim" and local_tokenizer is None:
            facts: dict[str, object] = {"tokenizer": SIM_TOKENIZER}
        else:
            self.tokenizer = await stack.enter_async_context(open_tokenizer(
                handle.endpoint, self.config.config.target.model, local_tokenizer))
            exact = await adapt_suite_traffic(self.suite.traffic, self.suite.suite.workloads,
                                              self.tokenizer)
            self.traffic = exact.traffic
            facts = exact.environment_facts()
        if self.progress is not None:
            fallback = facts.get("tokenizer_fallback")
            self.progress.prompts_built(str(facts["tokenizer"]),
                                        None if fallback is None else str(fallback))
        return facts

    def _finish(self, *, interrupted: bool) -> tuple[RunStatus, str | None]:
        planned = len(self.suite.suite.workloads)
        status, reason = compute_run_status(self.results, planned, interrupted)
        self.sink.finish(status, reason, datetime.now(UTC))
        return status, reason

    async def _run_workloads(self, handle: TargetHandle) -> None:
        """Each workload's phases in order (one for a plain shape, its stages, or a sweep's
        probes)."""
        workloads = self.suite.suite.workloads
        for position, workload in enumerate(workloads):
            make_plan = self._planner(handle, workload)
            phases = WorkloadPhases(workload, self.suite.suite.seed, self.traffic[workload.name])
            while (phase := phases.next_phase()) is not None:
                plan = make_plan(phase)
                if self.progress is not None:
                    self.progress.workload_started(phase.name, position, len(workloads),
                                                   plan.planned_requests)
                result = await self._run_phase(handle, workload, phase, plan, position)
                phases.record(phase, result)
                self._keep(result)
                if isinstance(plan, SessionPlan):
                    for turns in compute_turn_results(workload, plan, result):
                        self._keep(turns)
                else:
                    for split in compute_adapter_results(workload, plan, result):
                        self._keep(split)
            for result in phases.final_results():
                self._keep(result)

    def _planner(self, handle: TargetHandle,
                 workload: Workload) -> Callable[[Phase], LoadPlan | SessionPlan]:
        """Builds each phase's plan from the workload's requests (or sessions), made once."""
        traffic = self.traffic[workload.name]
        model = self.config.config.target.model
        if traffic.sessions:
            warm, measured = build_session_requests(
                workload, traffic, model=model, supports_ignore_eos=handle.supports_ignore_eos)
            return lambda phase: build_session_plan(workload, phase, warm, measured,
                                                    think_time_s=traffic.think_time_s)
        specs = build_request_specs(workload, traffic, model=model,
                                    supports_ignore_eos=handle.supports_ignore_eos)
        return lambda phase: build_plan(workload, phase, *specs)

    def _priced(self, result: WorkloadResult) -> WorkloadResult:
        """The workload with the config's price in ``params["cost"]``, where
        ``tracker.metrics.compute_cost_metrics`` reads it (and the stored run keeps it)."""
        cost = self.config.config.cost
        if cost is None:
            return result
        return replace(result, params={**result.params, "cost": cost.as_params()})

    def _keep(self, result: WorkloadResult) -> None:
        result = self._priced(result)
        self.sink.save_workload(len(self.results), result)
        self.results.append(result)
        if self.progress is not None:
            self.progress.workload_finished(result)

    async def _run_phase(self, handle: TargetHandle, workload: Workload, phase: Phase,
                         plan: LoadPlan | SessionPlan, position: int) -> WorkloadResult:
        """One phase on the suite's workers. With ``workers: auto`` a client-bound first try is
        kept as ``<phase>@1-worker`` and the phase runs once more on more processes."""
        result = await self._run_workload(handle, workload, phase, plan, self._workers())
        retry = self._retry_workers(result)
        if retry is None:
            return result
        self._keep(replace(result, name=f"{phase.name}@{result_workers(result)}-worker"))
        if self.progress is not None:
            self.progress.workload_started(f"{phase.name} on {retry} workers", position,
                                           len(self.suite.suite.workloads),
                                           plan.planned_requests)
        return await self._run_workload(handle, workload, phase, plan, retry)

    def _workers(self) -> int:
        """How many load-generator processes run a phase first: the suite's number (auto: 1)."""
        setting = self.suite.suite.workers
        return 1 if setting == "auto" else setting

    def _retry_workers(self, first: WorkloadResult) -> int | None:
        """With ``workers: auto``, a client-bound first try runs once more on enough processes
        for the load (up to the usable CPUs), or None for no retry. A starved client is not
        retried: more processes cannot help a client the host does not give a core."""
        setting = self.suite.suite.workers
        client = first.summary.client
        if setting != "auto" or client is None or not client.client_bound:
            return None
        if compute_bound_kind(client) is BoundKind.STARVED:
            return None
        cpus = count_usable_cpus()
        needed = compute_workers_needed(client.cpu_fraction, result_workers(first))
        return min(needed, cpus) if cpus > 1 else None

    async def _run_workload(self, handle: TargetHandle, workload: Workload, phase: Phase,
                            plan: LoadPlan | SessionPlan, workers: int) -> WorkloadResult:
        telemetry = WorkloadTelemetry(handle.endpoint, self.telemetry,
                                      compute_gpu_skip_reason(self.config.config.target))
        return await run_measured_phase(
            handle.endpoint, workload, phase, plan, workers=workers, tokenizer=self.tokenizer,
            telemetry=telemetry, on_cut=self._keep_cut,
            on_progress=self.progress.request_done if self.progress is not None else None)

    def _keep_cut(self, partial: WorkloadResult) -> None:
        """A workload cut short by an interrupt, kept and marked incomplete."""
        partial = self._priced(partial)
        self.sink.save_workload(len(self.results), partial)
        self.results.append(partial)

    async def _run_quality(self, handle: TargetHandle) -> None:
        """Ask the suite's quality set (after the timed workloads, never during them): its
        sample, or the whole set. With ``when: once_per_night``, the answers are a copy of those
        a run of the same config version and suite asked today, where one did."""
        whole, block = self.suite.quality, self.suite.suite.quality
        if whole is None or block is None:
            return
        quality_set = compute_sample(whole, None if self.quality_whole else block.sample,
                                     block.seed)
        if block.when == "once_per_night" and self.quality_reuse is not None:
            reused = self.quality_reuse.fetch_reusable_quality(quality_set)
            if reused is not None:
                self.sink.save_quality(reused)
                return
        items = await run_quality_set(
            handle.endpoint, self.config.config.target.model, quality_set,
            max_tokens=block.max_tokens, concurrency=block.concurrency,
            timeout_s=block.request_timeout_s)
        self.sink.save_quality(compute_quality_result(quality_set, items))


def _telemetry_settings(suite: LoadedSuite, given: TelemetrySettings | None) -> TelemetrySettings:
    """The suite's sampling rates over the given settings (which carry the NVML module)."""
    settings = given or TelemetrySettings()
    block = suite.suite.telemetry
    if block is None:
        return settings
    return replace(settings, gpu_sample_hz=block.gpu_sample_hz,
                   server_scrape_interval_s=block.server_scrape_interval_s)
