"""Measure one phase of a workload, for ``tracker run`` and ``tracker bench`` alike.

The phase's load generator runs with the GPU and the server's counters sampled around it (the
server's from the end of the warm-up). Each request's received text is then counted in the
model's tokenizer for the token-count check, and the phase's records become its result. A phase
cut short by an interrupt hands what it measured to ``on_cut``, marked incomplete, before the
interrupt goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from tracker.inputs.suites import Workload
from tracker.load.generator import Endpoint, LoadGenerator, LoadPlan
from tracker.load.phases import Phase, compute_phase_result
from tracker.load.sessions import SessionGenerator, SessionPlan
from tracker.load.worker_shares import with_workers
from tracker.load.workers import WorkerPool
from tracker.results import WorkloadResult
from tracker.targets.model_tokenizer import Tokenizer
from tracker.targets.output_tokens import (
    drop_output_texts,
    run_output_token_counts,
    with_token_check,
)
from tracker.telemetry.workload import WorkloadTelemetry

Progress = Callable[[int, int], None]


def build_generator(endpoint: Endpoint, plan: LoadPlan | SessionPlan, workers: int,
                    telemetry: WorkloadTelemetry, on_progress: Progress | None
                    ) -> LoadGenerator | SessionGenerator | WorkerPool:
    """The phase's load generator. The server's counters start once its warm-up is over."""
    if workers > 1:
        return WorkerPool(endpoint, plan, workers, on_progress=on_progress,
                          on_warmed=telemetry.warmed)
    if isinstance(plan, SessionPlan):
        return SessionGenerator(endpoint, plan, on_progress=on_progress,
                                on_warmed=telemetry.warmed)
    return LoadGenerator(endpoint, plan, on_progress=on_progress, on_warmed=telemetry.warmed)


async def run_measured_phase(endpoint: Endpoint, workload: Workload, phase: Phase,
                             plan: LoadPlan | SessionPlan, *, workers: int,
                             tokenizer: Tokenizer | None,
                             telemetry: WorkloadTelemetry, on_progress: Progress | None = None,
                             on_cut: Callable[[WorkloadResult], None] | None = None
                             ) -> WorkloadResult:
    """The phase's result with its GPU and server telemetry and its token-count check.

    The result names the number of load-generator processes that ran it, which is fewer than
    ``workers`` when the phase's concurrency cannot be shared among that many."""
    generator = build_generator(endpoint, plan, workers, telemetry, on_progress)
    workers = generator.workers if isinstance(generator, WorkerPool) else 1  # the shares it ran
    await telemetry.start()
    try:
        outcome = await generator.run()
    except asyncio.CancelledError:
        gpu, server = await telemetry.stop(complete=False)
        if on_cut is not None and generator.records:  # keep the cut-short phase, incomplete
            cut = generator.outcome(complete=False)
            cut = replace(cut, records=drop_output_texts(cut.records))
            partial = with_workers(compute_phase_result(workload, phase, plan, cut), workers)
            on_cut(replace(partial, gpu=gpu, server=server))
        raise
    gpu, server = await telemetry.stop()
    counted = await run_output_token_counts(outcome.records, tokenizer)
    outcome = replace(outcome, records=counted.records)
    result = with_workers(compute_phase_result(workload, phase, plan, outcome), workers)
    return with_token_check(replace(result, gpu=gpu, server=server), counted.check)
