"""The PR gate: does the head config (or run) regress against the base?

Two ways in:

- ``run_config_gate``: run the suite against base and head configs on the same target in
  rounds (a base run, then a head run), so drift over time hits both sides alike; every run is
  stored like any other. Sequential by default (``tracker.gate.rounds``): after each round
  ``tracker.analysis.sequential`` judges every row, and the gate stops once all are decided, at
  most ``max_rounds``; or a fixed number of rounds, judged once at the end.
- ``compare_stored_runs``: compare runs already in the store (``--base-run`` / ``--head-run``).

A fixed design (and stored runs) is ``tracker.analysis.compare_samples`` per workload and
metric. Either way ``judge_family`` spends one false-alarm budget on the whole gate (Holm over
the rows): the gate shows the analysis' verdicts and decides nothing itself. Exit codes: 0 pass,
1 regression, 2 usage or config error, 3 could not measure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.analysis import Verdict, compare_samples, judge_family
from tracker.analysis.compare import DEFAULT_MIN_EFFECT
from tracker.errors import ExitCode, UsageError
from tracker.gate.config_refs import ConfigSide
from tracker.gate.memory import MEMORY_LABEL, MEMORY_METRIC, judge_memory
from tracker.gate.quality_check import (
    ACCURACY,
    QualityComparison,
    compute_quality_comparison,
    compute_row_note,
)
from tracker.inputs.config_diff import Change, compute_config_diff
from tracker.inputs.suites import LoadedSuite
from tracker.metrics import (
    COMPARED_METRICS,
    REGISTRY,
    Metric,
    compute_samples,
)
from tracker.results import RunResult, RunStatus, WorkloadResult, compute_run_source
from tracker.store.runs import fetch_run


class GateOutcome(StrEnum):
    PASS = "pass"
    REGRESSION = "regression"
    NOT_MEASURED = "not_measured"


# The dashboard's Compare judges the same, and the server's prefix-cache hit rate where its
# counters were scraped (a metric neither side measured is no row at all)
GATE_METRICS: tuple[Metric, ...] = (*COMPARED_METRICS, REGISTRY["prefix_cache_hit_rate"])
DEFAULT_MAX_ROUNDS = 6  # with the noise from the rounds alone (two at least)
DEFAULT_MAX_ROUNDS_WITH_PRIOR = 3  # with the noise of earlier base runs: one round may decide


def compute_label(metric: Metric) -> str:
    """``TTFT median``, ``request throughput``: the metric as the report's rows name it."""
    if metric.latency is not None:
        return f"{metric.latency.upper()} {metric.statistic}"
    return metric.name.removesuffix("_per_s").removesuffix("_tokens").replace("_", " ")


def row_key(workload: str, metric: Metric) -> str:
    """How a row is named to the sequential test: ``chat/ttft_median_s``."""
    return f"{workload}/{metric.name}"


@dataclass(frozen=True, slots=True)
class GateOptions:
    min_effect: Mapping[str, float] = field(default_factory=dict)  # metric name -> fraction
    confidence: float = 0.95
    seed: int = 0


@dataclass(frozen=True, slots=True)
class GateDesign:
    """How a config gate spends its runs: ``rounds`` of a base and a head run; sequential: stop
    as soon as every row is decided, with ``rounds`` the most it may run."""

    rounds: int
    sequential: bool = True
    rounds_with_prior: int | None = None  # the cap instead, when earlier base runs give a prior
    quality_whole: bool = True  # the whole quality set (False: the suite's quality.sample)

    def __post_init__(self) -> None:
        if self.rounds < 1:
            flag = "--max-rounds" if self.sequential else "--repeats"
            raise UsageError(f"{flag}: must be >= 1 (got {self.rounds})")


@dataclass(frozen=True, slots=True)
class GateRounds:
    """How many rounds a config gate ran, and why it stopped there."""

    rounds: int
    max_rounds: int
    sequential: bool
    stop_reason: str  # "decided after 3 of 8 rounds", "max rounds reached (8)", ...
    noise_runs: int | None = None  # earlier base runs behind the noise prior; None: rounds alone


@dataclass(frozen=True, slots=True)
class GateRow:
    workload: str
    metric: str  # registry name
    label: str
    unit: str
    verdict: Verdict | None  # None: not measured on one side
    note: str | None = None  # why it was not measured, or which runs were left out
    regressed: bool = False  # a regression for the whole gate (``judge_family``), not only alone
    adjusted_p_value: float | None = None  # Holm-adjusted over the gate's rows


@dataclass(frozen=True, slots=True)
class GateResult:
    outcome: GateOutcome
    exit_code: int
    base_label: str
    head_label: str
    suite: str  # name@version
    base_run_ids: tuple[int, ...]
    head_run_ids: tuple[int, ...]
    simulated: bool
    config_changes: tuple[Change, ...]
    rows: tuple[GateRow, ...]
    problems: tuple[str, ...]  # runs or workloads that could not be measured
    interleaved: bool
    rounds: GateRounds | None = None  # a config gate's rounds; None: stored runs
    family_alpha: float = 0.05  # the one false-alarm budget of the whole gate
    quality: QualityComparison | None = None  # the paired quality check; None: no quality set


# --- comparing runs (pure) -------------------------------------------------------------------


def _workload(run: RunResult, name: str) -> WorkloadResult | None:
    return next((w for w in run.workloads if w.name == name), None)


def _samples(metric: Metric, workloads: Sequence[WorkloadResult]) -> list[list[float]]:
    runs = (compute_samples(metric, workload) for workload in workloads)
    return [run for run in runs if run]


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


def compute_gate_rows(base_runs: Sequence[RunResult], head_runs: Sequence[RunResult],
                      options: GateOptions,
                      verdicts: Mapping[str, Verdict] | None = None) -> list[GateRow]:
    """One row per workload (in suite order) and gate metric that either side measured. The
    verdicts are ``compare_samples``' over all runs, or the sequential test's (``verdicts``,
    by ``row_key``)."""
    rows: list[GateRow] = []
    for name in compute_workload_names(base_runs, head_runs):
        base = [w for w in (_workload(run, name) for run in base_runs) if w is not None]
        head = [w for w in (_workload(run, name) for run in head_runs) if w is not None]
        for metric in GATE_METRICS:
            row = _row(name, metric, base, head, options, verdicts)
            if row is not None:
                rows.append(row)
        memory = compute_memory_row(name, base, head, options)
        if memory is not None:
            rows.append(memory)
    return rows


def compute_memory_row(name: str, base: Sequence[WorkloadResult], head: Sequence[WorkloadResult],
                       options: GateOptions) -> GateRow | None:
    """The workload's GPU memory peak (``tracker.gate.memory``); None: neither side measured."""
    metric = MEMORY_METRIC
    judged = judge_memory(base, head, confidence=options.confidence,
                          min_effect=compute_min_effect(metric, options),
                          tolerance=options.min_effect.get(metric.name, 0.0), seed=options.seed)
    if judged is None:
        return None
    return GateRow(name, metric.name, MEMORY_LABEL, metric.unit, judged.verdict, judged.note)


def _row(name: str, metric: Metric, base: Sequence[WorkloadResult],
         head: Sequence[WorkloadResult], options: GateOptions,
         verdicts: Mapping[str, Verdict] | None) -> GateRow | None:
    label = compute_label(metric)
    if metric.latency is None and base and head and not _samples(metric, [*base, *head]):
        return None  # neither side measures it (a server without its counters): no row
    bound = _client_bound_note(base, head)
    if bound is not None:
        return GateRow(name, metric.name, label, metric.unit, None, bound)
    left_out = _left_out_note(base, head)
    base, head = _measured(base), _measured(head)
    base_samples, head_samples = _samples(metric, base), _samples(metric, head)
    if not base_samples or not head_samples:
        side = "base" if not base_samples else "head"
        return GateRow(name, metric.name, label, metric.unit, None,
                       f"not measured in the {side} run(s)")
    if verdicts is not None:
        verdict = verdicts.get(row_key(name, metric))
        if verdict is None:
            return GateRow(name, metric.name, label, metric.unit, None,
                           "not measured in the first round, so not judged")
    else:
        verdict = compare_samples(base_samples, head_samples, metric,
                                  min_effect=compute_min_effect(metric, options),
                                  confidence=options.confidence, seed=options.seed)
    return GateRow(name, metric.name, label, metric.unit, verdict, left_out)


def _measured(workloads: Sequence[WorkloadResult]) -> list[WorkloadResult]:
    """The runs of a workload that measured the server (a client-bound one measured the client)."""
    return [w for w in workloads if not w.client_bound]


def _client_bound_note(base: Sequence[WorkloadResult],
                       head: Sequence[WorkloadResult]) -> str | None:
    """Why a side cannot be compared: every one of its runs was client-bound (the load generator,
    not the server, set the pace). A side with some measured runs is compared on those."""
    for side, workloads in (("base", base), ("head", head)):
        if workloads and not _measured(workloads):
            client = workloads[0].summary.client
            why = f" ({client.reason})" if client is not None and client.reason else ""
            return (f"client-bound in the {side} run(s){why}: the load generator, not the "
                    "server, set the pace; rerun with fewer streams or a lower rate")
    return None


def _left_out_note(base: Sequence[WorkloadResult],
                   head: Sequence[WorkloadResult]) -> str | None:
    """"1 of 6 head runs left out (client-bound)" when a side lost some of its runs."""
    parts = [f"{len(workloads) - len(_measured(workloads))} of {len(workloads)} {side} runs"
             for side, workloads in (("base", base), ("head", head))
             if len(_measured(workloads)) < len(workloads)]
    return f"{' and '.join(parts)} left out (client-bound)" if parts else None


def _problems(runs: Sequence[RunResult], side: str) -> list[str]:
    problems: list[str] = []
    for run in runs:
        if run.status is not RunStatus.COMPLETED:
            reason = f": {run.status_reason}" if run.status_reason else ""
            problems.append(f"{side} run {run.run_id} is {run.status.value}{reason}")
    return problems


def compute_quality_rows(quality: QualityComparison | None) -> list[GateRow]:
    """The accuracy row of the paired quality check (``tracker.gate.quality_check``)."""
    if quality is None:
        return []
    verdict = None if quality.paired is None else quality.paired.verdict
    return [GateRow(f"quality: {quality.set_name}", ACCURACY, ACCURACY, "fraction", verdict,
                    compute_row_note(quality))]


def judge_rows(rows: Sequence[GateRow], alpha: float) -> list[GateRow]:
    """The rows with the family's judgement: one false-alarm budget ``alpha`` for the gate."""
    judged = [i for i, row in enumerate(rows) if row.verdict is not None]
    judgement = judge_family([row.verdict for row in rows if row.verdict is not None], alpha)
    regressions = {judged[k] for k in judgement.regressions}
    adjusted = dict(zip(judged, judgement.adjusted_p_values, strict=True))
    return [replace(row, regressed=i in regressions, adjusted_p_value=adjusted.get(i))
            for i, row in enumerate(rows)]


def decide_gate(rows: Sequence[GateRow], problems: Sequence[str]) -> tuple[GateOutcome, int]:
    """Regression if the family's judgement keeps any row a regression; could not measure if a
    run failed or nothing was compared; otherwise pass (inconclusive rows pass, with their hint
    shown)."""
    if any(row.regressed for row in rows):
        return GateOutcome.REGRESSION, ExitCode.REGRESSION
    if problems or not any(row.verdict is not None for row in rows):
        return GateOutcome.NOT_MEASURED, ExitCode.NOT_MEASURED
    return GateOutcome.PASS, ExitCode.OK


def _check_one_source(base_runs: Sequence[RunResult], head_runs: Sequence[RunResult]) -> None:
    """Runs measured by different tools define their metrics differently (docs/import.md):
    never judged as like for like."""
    sources = {f"run {r.run_id}": compute_run_source(r.environment)
               for r in (*base_runs, *head_runs)}
    if len(set(sources.values())) > 1:
        found = ", ".join(f"{run}: {source}" for run, source in sources.items())
        raise UsageError(f"the runs come from different tools ({found}); their definitions "
                         "differ (docs/import.md), so they are not compared as like for like: "
                         "pick runs of one source")


def build_gate_result(base_runs: Sequence[RunResult], head_runs: Sequence[RunResult],
                      labels: tuple[str, str], config_changes: Sequence[Change],
                      options: GateOptions, *, interleaved: bool,
                      rounds: GateRounds | None = None,
                      verdicts: Mapping[str, Verdict] | None = None) -> GateResult:
    """The gate's answer over these runs; ``verdicts``: the sequential test's, by row key."""
    _check_one_source(base_runs, head_runs)
    suites = {(run.suite.name, run.suite.version) for run in (*base_runs, *head_runs)}
    if len(suites) > 1:
        found = ", ".join(sorted(f"{name}@{version[:12]}" for name, version in suites))
        raise UsageError(f"the runs used different suites ({found}); only like is compared with "
                         "like: pick runs of one suite version")
    alpha = 1.0 - options.confidence
    quality = compute_quality_comparison(base_runs, head_runs,
                                         options.min_effect.get(ACCURACY), options.confidence)
    rows = judge_rows([*compute_gate_rows(base_runs, head_runs, options, verdicts),
                       *compute_quality_rows(quality)], alpha)
    problems = [*_problems(base_runs, "base"), *_problems(head_runs, "head")]
    problems += [f"{row.workload}: {row.note}" for row in rows
                 if row.verdict is None and row.metric == GATE_METRICS[0].name]
    outcome, code = decide_gate(rows, problems)
    name, version = next(iter(suites))
    return GateResult(
        outcome=outcome, exit_code=code, base_label=labels[0], head_label=labels[1],
        suite=f"{name}@{version[:12]}", base_run_ids=tuple(r.run_id for r in base_runs),
        head_run_ids=tuple(r.run_id for r in head_runs),
        simulated=any(r.simulated for r in (*base_runs, *head_runs)),
        config_changes=tuple(config_changes), rows=tuple(rows), problems=tuple(problems),
        interleaved=interleaved, rounds=rounds, family_alpha=alpha, quality=quality,
    )


# --- the two ways in -------------------------------------------------------------------------


def run_config_gate(engine: Engine, base: ConfigSide, head: ConfigSide, suite: LoadedSuite,
                    design: GateDesign, options: GateOptions, *, quiet: bool = True,
                    ordinal_seed: int | None = None) -> GateResult:
    """Run base and head in rounds (base, head, base, head, ...) and judge them: sequentially
    (stop once decided) or after a fixed number of rounds. ``ordinal_seed`` numbers the
    embedded simulator's runs, so its run-to-run draws repeat (None: fresh draws)."""
    from tracker.gate.rounds import run_rounds

    played = run_rounds(engine, base, head, suite, design, options, quiet=quiet,
                        ordinal_seed=ordinal_seed)
    changes = compute_config_diff(base.loaded.canonical, head.loaded.canonical)
    return build_gate_result(played.base_runs, played.head_runs, (base.title, head.title),
                             changes, options, interleaved=True, rounds=played.rounds,
                             verdicts=played.verdicts)


def compare_stored_runs(engine: Engine, base_ids: Sequence[int], head_ids: Sequence[int],
                        options: GateOptions) -> GateResult:
    """Compare stored runs: each side may list several runs (repeats of one config)."""
    with Session(engine) as session:
        base_runs = [fetch_run(session, run_id) for run_id in base_ids]
        head_runs = [fetch_run(session, run_id) for run_id in head_ids]
    changes = compute_config_diff(base_runs[0].config_body, head_runs[0].config_body)
    labels = tuple(_runs_label(runs) for runs in (base_runs, head_runs))
    return build_gate_result(base_runs, head_runs, (labels[0], labels[1]), changes, options,
                             interleaved=False)


def _runs_label(runs: Sequence[RunResult]) -> str:
    configs = sorted({f"{r.config.name}@{r.config.version[:12]}" for r in runs})
    ids = ", ".join(str(r.run_id) for r in runs)
    return f"run{'s' if len(runs) > 1 else ''} {ids} ({', '.join(configs)})"
