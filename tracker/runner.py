"""Run a suite against a serving config: target up, workloads in order, results to a sink.

The runner measures; it does not know about databases. Each finished workload goes to the sink
at once, so whatever was measured survives an interrupt or a target that dies mid-run.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import tracker
from tracker.config import LoadedConfig
from tracker.environment import collect_environment
from tracker.errors import TrackerError
from tracker.loadgen import LoadGenerator, LoadOutcome, LoadPlan
from tracker.payloads import ENDPOINT_PATHS, build_request_specs
from tracker.results import RunStatus, WorkloadResult
from tracker.suites import LoadedSuite, Workload
from tracker.summary import compute_workload_summary
from tracker.targets import TargetHandle, open_target


class RunSink(Protocol):
    def begin(self, *, started_at: datetime, simulated: bool,
              environment: dict[str, object]) -> int: ...

    def save_workload(self, position: int, result: WorkloadResult) -> None: ...

    def finish(self, status: RunStatus, reason: str | None, ended_at: datetime) -> None: ...


class Progress(Protocol):
    def workload_started(self, name: str, position: int, count: int, requests: int) -> None: ...

    def request_done(self, done: int, total: int) -> None: ...

    def workload_finished(self, result: WorkloadResult) -> None: ...


@dataclass(frozen=True, slots=True)
class RunOutcome:
    run_id: int
    status: RunStatus
    reason: str | None


def compute_run_status(results: list[WorkloadResult], planned: int,
                       interrupted: bool) -> tuple[RunStatus, str | None]:
    """completed: every workload ran and measured something; failed: nothing was measured."""
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


def _workload_result(workload: Workload, outcome: LoadOutcome) -> WorkloadResult:
    return WorkloadResult(
        name=workload.name,
        concurrency=workload.concurrency,
        num_requests=workload.num_requests,
        warmup_requests=workload.warmup_requests,
        params=workload.model_dump(mode="json"),
        started_at=outcome.started_at,
        ended_at=outcome.ended_at,
        records=outcome.records,
        summary=compute_workload_summary(outcome.records, outcome.duration_s),
        complete=outcome.complete,
    )


class SuiteRunner:
    def __init__(self, config: LoadedConfig, suite: LoadedSuite, sink: RunSink,
                 progress: Progress | None = None) -> None:
        self.config = config
        self.suite = suite
        self.sink = sink
        self.progress = progress
        self.results: list[WorkloadResult] = []

    async def run(self) -> RunOutcome:
        target = self.config.config.target
        engine = f"tracker-sim {tracker.__version__}" if target.kind == "sim" else None
        environment = collect_environment(target_kind=target.kind, engine=engine)
        run_id = self.sink.begin(started_at=datetime.now(UTC),
                                 simulated=self.config.config.simulated, environment=environment)
        try:
            async with open_target(self.config) as handle:
                await self._run_workloads(handle)
        except asyncio.CancelledError:
            self._finish(interrupted=True)
            raise
        except TrackerError as exc:
            self.sink.finish(RunStatus.FAILED, str(exc), datetime.now(UTC))
            raise
        status, reason = self._finish(interrupted=False)
        return RunOutcome(run_id, status, reason)

    def _finish(self, *, interrupted: bool) -> tuple[RunStatus, str | None]:
        planned = len(self.suite.suite.workloads)
        status, reason = compute_run_status(self.results, planned, interrupted)
        self.sink.finish(status, reason, datetime.now(UTC))
        return status, reason

    async def _run_workloads(self, handle: TargetHandle) -> None:
        workloads = self.suite.suite.workloads
        for position, workload in enumerate(workloads):
            if self.progress is not None:
                self.progress.workload_started(workload.name, position, len(workloads),
                                               workload.num_requests)
            result = await self._run_workload(handle, workload)
            self.sink.save_workload(position, result)
            self.results.append(result)
            if self.progress is not None:
                self.progress.workload_finished(result)

    async def _run_workload(self, handle: TargetHandle, workload: Workload) -> WorkloadResult:
        warmup, measured = build_request_specs(
            workload, self.suite.prompts[workload.name], model=self.config.config.target.model,
            supports_ignore_eos=handle.supports_ignore_eos)
        plan = LoadPlan(ENDPOINT_PATHS[workload.endpoint_type], warmup, measured,
                        workload.concurrency, workload.request_timeout_s)
        on_progress = self.progress.request_done if self.progress is not None else None
        generator = LoadGenerator(handle.endpoint, plan, on_progress=on_progress)
        try:
            outcome = await generator.run()
        except asyncio.CancelledError:
            if generator.records:  # keep the cut-short workload, marked incomplete
                partial = _workload_result(workload, generator.outcome(complete=False))
                self.sink.save_workload(len(self.results), partial)
                self.results.append(partial)
            raise
        return _workload_result(workload, outcome)
