"""A config gate's rounds: a base run, then a head run, judged after each round.

Sequential (the default): after every round ``tracker.analysis.sequential`` sees that round's
pair of runs for every workload and metric, and the gate stops as soon as every row is decided
(regressed, or a regression of the minimum effect ruled out), at most ``design.rounds``; a
round whose run failed ends the gate at once (it could not measure). Fixed: exactly
``design.rounds`` rounds, judged once at the end by ``compare_samples``.

A round in which one side of a workload was client-bound (the load generator, not the server,
set the pace) is left out of that workload's rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import Engine

from tracker.analysis import Verdict
from tracker.analysis.sequential import RoundSamples, SequentialGate, SequentialRow
from tracker.gate.config_refs import ConfigSide
from tracker.gate.gating import (
    GATE_METRICS,
    GateDesign,
    GateOptions,
    GateRounds,
    compute_min_effect,
    compute_workload_names,
    row_key,
)
from tracker.inputs.prompts import derive_seed
from tracker.inputs.suites import LoadedSuite
from tracker.jobs.execute import execute_suite
from tracker.metrics import compute_samples
from tracker.results import RunResult, RunStatus
from tracker.runner.progress import ProgressPrinter


@dataclass(frozen=True, slots=True)
class PlayedRounds:
    base_runs: tuple[RunResult, ...]
    head_runs: tuple[RunResult, ...]
    rounds: GateRounds
    verdicts: Mapping[str, Verdict] | None  # the sequential test's, by row key; None: fixed


def run_rounds(engine: Engine, base: ConfigSide, head: ConfigSide, suite: LoadedSuite,
               design: GateDesign, options: GateOptions, *, quiet: bool = True,
               ordinal_seed: int | None = None) -> PlayedRounds:
    base_runs: list[RunResult] = []
    head_runs: list[RunResult] = []
    gate: SequentialGate | None = None
    reason = f"fixed design: {design.rounds} rounds"
    for number in range(1, design.rounds + 1):
        pair = _run_round(engine, (base, head), suite, (number, design), quiet, ordinal_seed)
        base_runs.append(pair[0])
        head_runs.append(pair[1])
        if not design.sequential:
            continue
        if any(run.status is not RunStatus.COMPLETED for run in pair):
            reason = f"stopped after round {number} of {design.rounds}: a run did not complete"
            break
        samples = compute_round_samples(*pair)
        if gate is None:
            gate = SequentialGate(compute_sequential_rows(pair, options),
                                  alpha=1.0 - options.confidence, max_rounds=design.rounds)
        state = gate.observe(samples)
        reason = state.stop_reason
        if state.decided:
            break
    verdicts = None if gate is None else {row.key: row.verdict for row in gate.state().rows}
    if design.sequential and gate is None:
        verdicts = {}
    rounds = GateRounds(len(base_runs), design.rounds, design.sequential, reason)
    return PlayedRounds(tuple(base_runs), tuple(head_runs), rounds, verdicts)


def _run_round(engine: Engine, sides: tuple[ConfigSide, ConfigSide], suite: LoadedSuite,
               at: tuple[int, GateDesign], quiet: bool,
               ordinal_seed: int | None) -> tuple[RunResult, RunResult]:
    number, design = at
    runs: list[RunResult] = []
    for side, config in zip(("base", "head"), sides, strict=True):
        most = f"≤{design.rounds}" if design.sequential else str(design.rounds)
        progress = None if quiet else ProgressPrinter(label=f"{side} {number}/{most} ")
        ordinal = (None if ordinal_seed is None
                   else derive_seed(ordinal_seed, "gate-round", side, number) % 2**31)
        runs.append(execute_suite(engine, config.loaded, suite, progress,
                                  run_ordinal=ordinal))
    return runs[0], runs[1]


def compute_sequential_rows(pair: tuple[RunResult, RunResult],
                            options: GateOptions) -> list[SequentialRow]:
    """The family: every workload and gate metric that either run of the first round measured."""
    rows: list[SequentialRow] = []
    for name in compute_workload_names([pair[0]], [pair[1]]):
        workloads = [w for run in pair for w in run.workloads if w.name == name]
        for metric in GATE_METRICS:
            if any(compute_samples(metric, workload) for workload in workloads):
                rows.append(SequentialRow(row_key(name, metric), metric.statistic,
                                          metric.lower_is_better,
                                          compute_min_effect(metric, options)))
    return rows


def compute_round_samples(base: RunResult, head: RunResult) -> RoundSamples:
    """One round's values per row key: (base run's, head run's); a workload that either run
    lacks, or that was client-bound in either, is left out of this round."""
    samples: dict[str, tuple[list[float], list[float]]] = {}
    heads = {workload.name: workload for workload in head.workloads}
    for workload in base.workloads:
        other = heads.get(workload.name)
        if other is None or workload.client_bound or other.client_bound:
            continue
        for metric in GATE_METRICS:
            samples[row_key(workload.name, metric)] = (compute_samples(metric, workload),
                                                       compute_samples(metric, other))
    return samples
