"""The gate's rows: one per workload and gate metric, judged by the one comparison policy.

Every run counts, client-bound ones too: a run whose client fell behind carries its lag as a
timing bound (``tracker.analysis.timing``), and the policy judges with it, so a busy host makes
an interval wider, never a hole in the evidence. A row's note says which runs were client-bound
and whether the client was overloaded (more workers help) or starved (the host's other processes
took the cores: pin the server and the client apart).

A change a config field asks for by design (``Metric.configured_by``: GPU memory following
``gpu_memory_utilization``) is shown "as configured", judged on its own, and never fails the
gate by itself. The rest are one family: one false-alarm budget (``judge_gate_rows``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from tracker.analysis import Verdict
from tracker.analysis.compare import DEFAULT_MIN_EFFECT
from tracker.analysis.constant_measures import compare_exact, runs_repeat_exactly
from tracker.analysis.noise import RunNoisePrior, compute_run_noise_prior
from tracker.analysis.policy import RowEvidence, RunSample, compare_runs, judge_rows
from tracker.analysis.timing import compute_timing_bound
from tracker.gate.memory import MEMORY_LABEL, MEMORY_METRIC, judge_memory
from tracker.inputs.config_diff import Change
from tracker.load.client_health import BoundKind, compute_bound_kind
from tracker.metrics import COMPARED_METRICS, REGISTRY, Metric, compute_samples
from tracker.results import RunResult, WorkloadResult

# The dashboard's Compare judges the same, and the server's prefix-cache hit rate and
# speculative decoding's acceptance where its counters were scraped (a metric neither side
# measured is no row at all: a server that does not speculate has no acceptance rows)
SPEC_DECODE_METRICS: tuple[Metric, ...] = (REGISTRY["spec_decode_acceptance_rate"],
                                           REGISTRY["spec_decode_mean_acceptance_length"])
# a sweep's capacity at the SLO (docs/frontier.md): one value per run, on the workload's own
# result (its probes carry the requests)
CAPACITY_METRIC = REGISTRY["capacity_at_slo_req_per_s"]
GATE_METRICS: tuple[Metric, ...] = (*COMPARED_METRICS, REGISTRY["prefix_cache_hit_rate"],
                                    *SPEC_DECODE_METRICS, CAPACITY_METRIC)


@dataclass(frozen=True, slots=True)
class GateOptions:
    min_effect: Mapping[str, float] = field(default_factory=dict)  # metric name -> fraction
    confidence: float = 0.95


@dataclass(frozen=True, slots=True)
class GateRow:
    workload: str
    metric: str  # registry name
    label: str
    unit: str
    verdict: Verdict | None  # None: not measured on one side
    note: str | None = None  # why it was not measured, or which runs were client-bound
    regressed: bool = False  # a regression for the whole gate (the family), not only alone
    adjusted_p_value: float | None = None  # Holm-adjusted over the gate's rows
    evidence: RowEvidence | None = None  # what the policy judges (None: a verdict of its own)
    as_configured: str | None = None  # the config change that asks for this change by design
    within_timing_error: bool = False  # only the client's timing error stood in the way
    client_note: str | None = None  # which runs were client-bound, and what would have helped


def compute_label(metric: Metric) -> str:
    """``TTFT median``, ``request throughput``: the metric as the report's rows name it."""
    if metric.latency is not None:
        return f"{metric.latency.upper()} {metric.statistic}"
    return metric.name.removesuffix("_per_s").removesuffix("_tokens").replace("_", " ")


def row_key(workload: str, metric: Metric) -> str:
    """How a row is named to the sequential test: ``chat/ttft_median_s``."""
    return f"{workload}/{metric.name}"


def compute_min_effect(metric: Metric, options: GateOptions) -> float:
    if metric.name in options.min_effect:
        return options.min_effect[metric.name]
    return DEFAULT_MIN_EFFECT[metric.statistic]


def compute_workload_names(base_runs: Sequence[RunResult],
                           head_runs: Sequence[RunResult]) -> list[str]:
    """The workloads of either side, in suite order."""
    names = [w.name for w in base_runs[0].workloads] if base_runs else []
    names += [w.name for run in head_runs for w in run.workloads if w.name not in names]
    return names


def compute_run_sample(metric: Metric, workload: WorkloadResult) -> RunSample | None:
    """A run's values of ``metric`` with the bound its client's timing error puts on them,
    or None when the run did not measure it."""
    values = compute_samples(metric, workload)
    if not values:
        return None
    timing = compute_timing_bound(metric, workload)
    return RunSample(tuple(values), timing, timing.lag_s)


def _workload(run: RunResult, name: str) -> WorkloadResult | None:
    return next((w for w in run.workloads if w.name == name), None)


def compute_gate_rows(base_runs: Sequence[RunResult], head_runs: Sequence[RunResult],
                      options: GateOptions, *,
                      evidence: Mapping[str, RowEvidence] | None = None,
                      prior: Mapping[str, RunNoisePrior] | None = None) -> list[GateRow]:
    """One row per workload (in suite order) and gate metric that either side measured, not
    yet judged: its evidence over all runs (with the history's ``prior`` by row key), or the
    sequential test's (``evidence``, by row key). The GPU memory row comes with them."""
    rows: list[GateRow] = []
    for name in compute_workload_names(base_runs, head_runs):
        base = [w for w in (_workload(run, name) for run in base_runs) if w is not None]
        head = [w for w in (_workload(run, name) for run in head_runs) if w is not None]
        note = compute_client_note(base, head)
        for metric in GATE_METRICS:
            row = _row(name, metric, (base, head), options, evidence, prior or {})
            if row is not None:
                rows.append(replace(row, client_note=note))
        memory = compute_memory_row(name, base, head, options)
        if memory is not None:
            rows.append(memory)
    return rows


def _row(name: str, metric: Metric, sides: tuple[Sequence[WorkloadResult],
                                                  Sequence[WorkloadResult]],
         options: GateOptions, evidence: Mapping[str, RowEvidence] | None,
         prior: Mapping[str, RunNoisePrior]) -> GateRow | None:
    label = compute_label(metric)
    runs = [[s for s in (compute_run_sample(metric, w) for w in side) if s is not None]
            for side in sides]
    if metric.latency is None and sides[0] and sides[1] and not runs[0] and not runs[1]:
        return None  # neither side measures it (a server without its counters): no row
    if metric.latency is not None and all(_is_sweep_result(w) for side in sides for w in side):
        return None  # a sweep's capacity result holds no requests: its probes are judged
    if metric is CAPACITY_METRIC and not runs[0] and not runs[1]:
        return None  # a probe, or a workload without a sweep: no capacity on either side
    if not runs[0] or not runs[1]:
        side = "base" if not runs[0] else "head"
        return GateRow(name, metric.name, label, metric.unit, None,
                       f"not measured in the {side} run(s)")
    key = row_key(name, metric)
    unchanged = compute_unchanged(runs[0], runs[1], metric)
    if unchanged is not None:  # one value on every run of both sides (a 0 % hit rate, say)
        return GateRow(name, metric.name, label, metric.unit, unchanged)
    if evidence is not None:
        found = evidence.get(key)
        if found is None:
            return GateRow(name, metric.name, label, metric.unit, None,
                           "not measured in the first round, so not judged")
    else:
        found = compare_runs(runs[0], runs[1], metric, key=key,
                             min_effect=compute_min_effect(metric, options),
                             prior=prior.get(key))
    return GateRow(name, metric.name, label, metric.unit, None, evidence=found)


def _is_sweep_result(workload: WorkloadResult) -> bool:
    """The result a sweep adds after its probes (``tracker.load.phases``): capacity, no records."""
    return "sweep_result" in workload.params and not workload.records


def compute_unchanged(base: Sequence[RunSample], head: Sequence[RunSample],
                      metric: Metric) -> Verdict | None:
    """The exact "no change" of a measure that read one and the same value in every run of both
    sides (a prefix-cache hit rate of 0 on fresh servers fed distinct prompts), which a ratio
    cannot judge, or None otherwise."""
    readings = [[list(s.values) for s in side] for side in (base, head)]
    if not all(runs_repeat_exactly(side) for side in readings) \
            or readings[0][0][0] != readings[1][0][0]:
        return None
    return compare_exact(readings[0], readings[1], metric)


def compute_memory_row(name: str, base: Sequence[WorkloadResult], head: Sequence[WorkloadResult],
                       options: GateOptions) -> GateRow | None:
    """The workload's GPU memory peak (``tracker.gate.memory``), or None when neither side
    measured it."""
    metric = MEMORY_METRIC
    judged = judge_memory(base, head, confidence=options.confidence,
                          min_effect=compute_min_effect(metric, options),
                          tolerance=options.min_effect.get(metric.name, 0.0))
    if judged is None:
        return None
    return GateRow(name, metric.name, MEMORY_LABEL, metric.unit, judged.verdict, judged.note)


def compute_client_note(base: Sequence[WorkloadResult],
                        head: Sequence[WorkloadResult]) -> str | None:
    """"2 of 6 head runs client-bound (starved: …)" when some runs' client fell behind: they are
    judged with their timing bound, and the note says what would have helped."""
    parts: list[str] = []
    kinds: set[BoundKind] = set()
    for side, workloads in (("base", base), ("head", head)):
        bound = [w for w in workloads if w.client_bound and w.summary.client is not None]
        if bound:
            parts.append(f"{len(bound)} of {len(workloads)} {side} runs")
            kinds |= {k for k in (compute_bound_kind(w.summary.client) for w in bound
                                  if w.summary.client is not None) if k is not None}
    if not parts:
        return None
    return f"{' and '.join(parts)} client-bound ({compute_bound_advice(kinds)})"


def compute_bound_advice(kinds: set[BoundKind]) -> str:
    """What the client-bound runs' causes call for."""
    starved = ("starved: the host's other processes (an engine's CPU threads, other jobs) took "
               "the cores; pin the server and the client to separate cores")
    overloaded = "overloaded: more load-generator workers (--workers) or less load"
    if kinds == {BoundKind.STARVED}:
        return starved
    if kinds == {BoundKind.OVERLOADED}:
        return overloaded
    return f"{starved}; or {overloaded}"


def compute_noise_prior(earlier: Sequence[RunResult],
                        keys: Sequence[tuple[str, Metric]]) -> dict[str, RunNoisePrior]:
    """Each row's prior (by ``row_key``) from the history's runs that measured its workload,
    client-bound ones too: a night on a busy host is part of how much a run of this version
    varies there (an in-process simulator, or an engine sharing the cores, slows with the
    client), so leaving them out would make the next busy run look like a change. A row with
    fewer than three such runs has none."""
    prior: dict[str, RunNoisePrior] = {}
    for name, metric in keys:
        runs = [values for values in (compute_samples(metric, w) for run in earlier
                                      for w in run.workloads if w.name == name) if values]
        found = compute_run_noise_prior(runs, metric.statistic)
        if found is not None:
            prior[row_key(name, metric)] = found
    return prior


def compute_rows_prior(earlier: Sequence[RunResult], base_runs: Sequence[RunResult],
                       head_runs: Sequence[RunResult]) -> dict[str, RunNoisePrior]:
    """Each gate row's prior (by ``row_key``) from the history's runs."""
    keys = [(name, metric) for name in compute_workload_names(base_runs, head_runs)
            for metric in GATE_METRICS]
    return compute_noise_prior(earlier, keys)


# --- the family ------------------------------------------------------------------------------


def compute_as_configured(metric_name: str, changes: Sequence[Change]) -> str | None:
    """The config changes that ask for a change of this metric by design, as the report says
    them ("engine.gpu_memory_utilization: 0.9 → 0.92"), or None when no such field changed."""
    metric = REGISTRY.get(metric_name)
    if metric is None:
        return None
    asked = [change.render() for change in changes if change.path in metric.configured_by]
    return "; ".join(asked) if asked else None


def judge_gate_rows(rows: Sequence[GateRow], alpha: float,
                    changes: Sequence[Change] = ()) -> list[GateRow]:
    """The rows judged: one false-alarm budget ``alpha`` for the gate's family (the policy's
    Holm), except the rows a config change asks for by design, each judged alone and never a
    regression of the gate."""
    marked = [replace(row, as_configured=compute_as_configured(row.metric, changes))
              for row in rows]
    family = [i for i, row in enumerate(marked)
              if row.as_configured is None and _item(row) is not None]
    judged = dict(zip(family, judge_rows([_item(marked[i]) for i in family], alpha),  # type: ignore[misc]
                      strict=True))
    out: list[GateRow] = []
    for i, row in enumerate(marked):
        item = _item(row)
        if item is None:
            out.append(row)
            continue
        found = judged.get(i) or judge_rows([item], alpha)[0]
        regressed = found.regressed and row.as_configured is None
        out.append(replace(row, verdict=found.verdict, regressed=regressed,
                           adjusted_p_value=found.adjusted_p_value,
                           within_timing_error=found.within_timing_error
                           and row.as_configured is None))
    return out


def _item(row: GateRow) -> RowEvidence | Verdict | None:
    return row.evidence if row.evidence is not None else row.verdict
