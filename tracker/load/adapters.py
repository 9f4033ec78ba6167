"""LoRA adapters on the load generator: each request's ``model`` names its adapter, and each
phase's records are split by adapter into results of their own (no I/O).

A workload with ``adapters`` (``tracker.inputs.adapters``) sends request ``i`` of its plan
(warm-up first) with ``model`` = the plan's adapter ``i``, as vLLM expects a LoRA request.
After the phase, ``<phase>/adapter-<name>`` holds the phase's records for that adapter (a
measured request ``j`` repeats spec ``j mod n`` of the ``n`` measured specs, and with it its
adapter), summarised over the phase's whole duration, so an adapter's throughput is its share
of the phase and its latencies are its own requests'. Like a multi-turn workload's per-turn
results, a split has no server telemetry of its own.
"""

from __future__ import annotations

from dataclasses import replace

from tracker.inputs.adapters import compute_adapter_plan, compute_adapter_result_name
from tracker.inputs.suites import Workload
from tracker.load.generator import LoadPlan
from tracker.load.phases import compute_slo
from tracker.load.summary import compute_workload_summary
from tracker.results import RequestRecord, WorkloadResult


def compute_adapter_results(workload: Workload, plan: LoadPlan,
                            result: WorkloadResult) -> list[WorkloadResult]:
    """``<phase>/adapter-<name>`` for each adapter the phase's measured requests asked for, in
    name order, or [] for a workload without adapters."""
    if workload.adapters is None or not plan.measured:
        return []
    measured = len(plan.measured)
    models = compute_adapter_plan(workload.adapters, workload.warmup_requests + measured)
    adapter_of = models[workload.warmup_requests:]
    out = []
    for adapter in sorted(set(adapter_of)):
        records = tuple(r for r in result.records if adapter_of[r.index % measured] == adapter)
        planned = sum(1 for i in range(plan.planned_requests)
                      if adapter_of[i % measured] == adapter)
        out.append(_split(workload, result, adapter, records, planned))
    return out


def _split(workload: Workload, result: WorkloadResult, adapter: str,
           records: tuple[RequestRecord, ...], planned: int) -> WorkloadResult:
    summary = compute_workload_summary(records, result.summary.duration_s,
                                       slo=compute_slo(workload), client=result.summary.client)
    params = {**result.params, "adapter": {"of": result.name, "name": adapter}}
    return replace(result, name=compute_adapter_result_name(result.name, adapter),
                   num_requests=planned, warmup_requests=0, params=params, records=records,
                   summary=summary, gpu=None, server=None)
