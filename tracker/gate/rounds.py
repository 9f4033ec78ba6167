"""A config gate's rounds: one run of each side, judged after each round.

The order within a round alternates (ABBA: base then head in odd rounds, head then base in even
ones, ``round_order``), so whatever favours a round's first or second run (a host that warms up or
slows down over a round, a cache one run leaves for the next) and a linear drift over the gate
fall on both sides alike instead of always on the head.

Sequential (the default): after every round ``tracker.analysis.sequential`` sees that round's
pair of runs for every workload and metric, and the gate stops as soon as every row is decided
(regressed, or a regression of the minimum effect ruled out), at most ``design.rounds``, or
once a workload's GPU memory peak regressed exactly (``tracker.gate.memory``: the same bytes on
every run of each side, so one round is certain). A round whose run failed ends the gate at once
(it could not measure). Fixed: exactly ``design.rounds`` rounds, judged once at the end by
``compare_samples``.

A run whose client was client-bound (the load generator fell behind: overloaded, or starved
by the host's other processes) still counts: it carries its lag as a timing bound
(``tracker.analysis.timing``), and the verdicts hold for any value within it.

The gate does not stop at its first regression while a row with a large observed change is
undecided (``tracker.analysis.sequential``): the report explains the headline change. A GPU
memory regression that is exact (the same bytes on every run of each side) ends the gate early,
unless a changed field asks for it (``gpu_memory_utilization``: shown "as configured").

The run-to-run noise: where the store holds at least ``MIN_PRIOR_RUNS`` earlier completed runs
of the base config version with the suite version on this host (the last ``NOISE_RUNS``), each
row's prior is the variance of their log statistic (``compute_run_noise_prior``), so a clear
case can be decided after one round. Otherwise the rounds alone give the noise.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.analysis.noise import MIN_PRIOR_RUNS, RunNoisePrior
from tracker.analysis.policy import RowEvidence, RunSample
from tracker.analysis.sequential import RoundSamples, SequentialGate, SequentialRow
from tracker.gate.config_refs import ConfigSide
from tracker.gate.gating import GateDesign, GateRounds
from tracker.gate.memory import MEMORY_METRIC, find_exact_memory_regression
from tracker.gate.rows import (
    GATE_METRICS,
    GateOptions,
    compute_as_configured,
    compute_min_effect,
    compute_rows_prior,
    compute_run_sample,
    compute_workload_names,
    row_key,
)
from tracker.gate.rows import compute_noise_prior as compute_rows_noise_prior
from tracker.inputs.config_diff import compute_config_diff
from tracker.inputs.prompts import derive_seed
from tracker.inputs.suites import LoadedSuite
from tracker.metrics import compute_samples
from tracker.pipeline.execute import execute_suite
from tracker.results import RunOrigin, RunResult, RunStatus
from tracker.runner.progress import ProgressPrinter
from tracker.store.run_noise import fetch_noise_runs


@dataclass(frozen=True, slots=True)
class PlayedRounds:
    base_runs: tuple[RunResult, ...]
    head_runs: tuple[RunResult, ...]
    rounds: GateRounds
    evidence: Mapping[str, RowEvidence] | None  # the sequential test's, by row key; None: fixed
    prior: Mapping[str, RunNoisePrior] | None = None  # the history's noise, by row key


def run_rounds(engine: Engine, base: ConfigSide, head: ConfigSide, suite: LoadedSuite,
               design: GateDesign, options: GateOptions, *, quiet: bool = True,
               ordinal_seed: int | None = None,
               origin: RunOrigin = RunOrigin.GATE) -> PlayedRounds:
    """Base and head in ABBA rounds (sequential: until decided). Every run is stored marked
    with ``origin``, so it stays out of the configs' nightly series."""
    base_runs: list[RunResult] = []
    head_runs: list[RunResult] = []
    gate: SequentialGate | None = None
    reason = f"fixed design: {design.rounds} rounds"
    earlier = fetch_earlier_runs(engine, base, suite)
    memory_configured = compute_as_configured(MEMORY_METRIC.name, compute_config_diff(
        base.loaded.canonical, head.loaded.canonical)) is not None
    if design.rounds_with_prior is not None and len(earlier) >= MIN_PRIOR_RUNS:
        design = replace(design, rounds=design.rounds_with_prior)  # the noise is known already
    noise_runs: int | None = None
    for number in range(1, design.rounds + 1):
        pair = _run_round(engine, (base, head), suite, (number, design), quiet,
                          ordinal_seed=ordinal_seed, origin=origin)
        base_runs.append(pair[0])
        head_runs.append(pair[1])
        if not design.sequential:
            continue
        if any(run.status is not RunStatus.COMPLETED for run in pair):
            reason = f"stopped after round {number} of {design.rounds}: a run did not complete"
            break
        samples = compute_round_samples(*pair)
        if gate is None:
            rows = compute_sequential_rows(pair, options)
            prior = compute_noise_prior(earlier, rows)
            noise_runs = max((p.runs for p in prior.values()), default=None)
            gate = SequentialGate(rows, alpha=1.0 - options.confidence,
                                  max_rounds=design.rounds, prior=prior)
        state = gate.observe(samples)
        reason = state.stop_reason
        if state.decided:
            break
        memory = None if memory_configured or state.holding else find_exact_memory_regression(
            base_runs, head_runs, options.min_effect.get(MEMORY_METRIC.name, 0.0))
        if memory is not None:  # certain already: the same bytes on every run of each side
            reason = (f"decided after {number} of {design.rounds} rounds: {memory}'s GPU memory "
                      "peak regressed (bit-constant on both sides, compared exactly)")
            break
    evidence = None if gate is None else {row.key: row.evidence for row in gate.state().rows
                                          if row.evidence is not None}
    if design.sequential and gate is None:
        evidence = {}
    fixed_prior = (None if design.sequential
                   else compute_rows_prior(earlier, base_runs, head_runs))
    if fixed_prior is not None:
        noise_runs = max((p.runs for p in fixed_prior.values()), default=None)
    rounds = GateRounds(len(base_runs), design.rounds, design.sequential, reason, noise_runs)
    return PlayedRounds(tuple(base_runs), tuple(head_runs), rounds, evidence, fixed_prior)


def fetch_earlier_runs(engine: Engine, base: ConfigSide,
                       suite: LoadedSuite) -> tuple[RunResult, ...]:
    """The base config version's last completed runs of this suite version on this host."""
    with Session(engine) as session:
        return fetch_noise_runs(session, base.loaded.version, suite.version,
                                host=socket.gethostname())


def compute_noise_prior(earlier: Sequence[RunResult],
                        rows: Sequence[SequentialRow]) -> dict[str, RunNoisePrior]:
    """Each sequential row's prior from the earlier runs that measured its workload. A row
    with fewer than three such runs has none."""
    wanted = {row.key for row in rows}
    names = dict.fromkeys(w.name for run in earlier for w in run.workloads)
    keys = [(name, metric) for name in names for metric in GATE_METRICS
            if row_key(name, metric) in wanted]
    return compute_rows_noise_prior(earlier, keys)


def _run_round(engine: Engine, sides: tuple[ConfigSide, ConfigSide], suite: LoadedSuite,
               at: tuple[int, GateDesign], quiet: bool, *, ordinal_seed: int | None,
               origin: RunOrigin) -> tuple[RunResult, RunResult]:
    number, design = at
    runs: dict[str, RunResult] = {}
    for side in round_order(number):
        config = sides[0] if side == "base" else sides[1]
        most = f"≤{design.rounds}" if design.sequential else str(design.rounds)
        progress = None if quiet else ProgressPrinter(label=f"{side} {number}/{most} ")
        ordinal = (None if ordinal_seed is None
                   else derive_seed(ordinal_seed, "gate-round", side, number) % 2**31)
        runs[side] = execute_suite(engine, config.loaded, suite, progress, run_ordinal=ordinal,
                                   quality_whole=design.quality_whole, origin=origin)
    return runs["base"], runs["head"]


def round_order(number: int) -> tuple[str, str]:
    """The sides of round ``number`` (from 1) in the order they run: ABBA, base first in odd
    rounds, head first in even ones."""
    return ("base", "head") if number % 2 else ("head", "base")


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
    """One round's runs per row key: (base run's, head run's), each with the bound its client's
    timing error puts on it. A workload that either run lacks is left out of this round."""
    samples: dict[str, tuple[RunSample, RunSample]] = {}
    heads = {workload.name: workload for workload in head.workloads}
    for workload in base.workloads:
        other = heads.get(workload.name)
        if other is None:
            continue
        for metric in GATE_METRICS:
            pair = compute_run_sample(metric, workload), compute_run_sample(metric, other)
            if pair[0] is not None and pair[1] is not None:
                samples[row_key(workload.name, metric)] = (pair[0], pair[1])
    return samples
