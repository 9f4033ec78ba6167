"""The PR gate: does the head config (or run) regress against the base?

Two ways in:

- ``run_config_gate``: run the suite against base and head configs on the same target in
  rounds (a base run, then a head run), so drift over time hits both sides alike. Every run is
  stored like any other. Sequential by default (``tracker.gate.rounds``): after each round
  ``tracker.analysis.sequential`` judges every row, and the gate stops once all are decided, at
  most ``max_rounds``. Otherwise it runs a fixed number of rounds, judged once at the end.
- ``compare_stored_runs``: compare runs already in the store (``--base-run`` / ``--head-run``).

Either way the rows (``tracker.gate.rows``) are judged by the one comparison policy
(``tracker.analysis.policy``): the run is the unit, the history's runs give the noise, client-
bound runs count with their timing bound, and one false-alarm budget covers the whole gate (Holm
over the rows): the gate shows the analysis' verdicts and decides nothing itself. Exit codes:
0 pass, 1 regression, 2 usage or config error, 3 could not measure (a run failed, nothing was
compared, or a change only the client's timing error stands in the way of).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.analysis.noise import RunNoisePrior
from tracker.analysis.policy import RowEvidence
from tracker.errors import ExitCode, UsageError
from tracker.gate.config_refs import ConfigSide
from tracker.gate.quality_check import (
    ACCURACY,
    QualityComparison,
    compute_quality_comparison,
    compute_row_note,
)
from tracker.gate.rows import (
    GATE_METRICS,
    GateOptions,
    GateRow,
    compute_gate_rows,
    compute_label,
    compute_min_effect,
    compute_rows_prior,
    compute_workload_names,
    judge_gate_rows,
    row_key,
)
from tracker.inputs.config_diff import Change, compute_config_diff
from tracker.inputs.suites import LoadedSuite
from tracker.results import RunResult, RunStatus, compute_run_source
from tracker.store.run_noise import fetch_noise_runs
from tracker.store.runs import fetch_run

__all__ = [
    "DEFAULT_MAX_ROUNDS", "DEFAULT_MAX_ROUNDS_WITH_PRIOR", "GATE_METRICS", "GateDesign",
    "GateOptions", "GateOutcome", "GateResult", "GateRounds", "GateRow", "build_gate_result",
    "compare_stored_runs", "compute_label", "compute_min_effect", "compute_workload_names",
    "decide_gate", "row_key", "run_config_gate",
]


class GateOutcome(StrEnum):
    PASS = "pass"
    REGRESSION = "regression"
    NOT_MEASURED = "not_measured"


DEFAULT_MAX_ROUNDS = 6  # with the noise from the rounds alone (two at least)
DEFAULT_MAX_ROUNDS_WITH_PRIOR = 3  # with the noise of earlier base runs: one round may decide


@dataclass(frozen=True, slots=True)
class GateDesign:
    """How a config gate spends its runs: ``rounds`` of a base and a head run. A sequential gate
    stops as soon as every row is decided, with ``rounds`` the most it may run."""

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


# --- judging runs (pure) ----------------------------------------------------------------------


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


def decide_gate(rows: Sequence[GateRow], problems: Sequence[str]) -> tuple[GateOutcome, int]:
    """The outcome is a regression if the family's judgement keeps any row a regression.

    It is "could not measure" if a run failed, nothing was compared, or a row's change is within
    the client's timing error. Otherwise it is a pass (inconclusive rows pass, with their hint
    shown)."""
    if any(row.regressed for row in rows):
        return GateOutcome.REGRESSION, ExitCode.REGRESSION
    if (problems or not any(row.verdict is not None for row in rows)
            or any(row.within_timing_error for row in rows)):
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
                      evidence: Mapping[str, RowEvidence] | None = None,
                      prior: Mapping[str, RunNoisePrior] | None = None) -> GateResult:
    """The gate's answer over these runs. ``evidence`` is the sequential test's, by row key
    (otherwise each row over all runs, with the history's ``prior`` by row key)."""
    _check_one_source(base_runs, head_runs)
    suites = {(run.suite.name, run.suite.version) for run in (*base_runs, *head_runs)}
    if len(suites) > 1:
        found = ", ".join(sorted(f"{name}@{version[:12]}" for name, version in suites))
        raise UsageError(f"the runs used different suites ({found}); only like is compared with "
                         "like: pick runs of one suite version")
    alpha = 1.0 - options.confidence
    quality = compute_quality_comparison(base_runs, head_runs,
                                         options.min_effect.get(ACCURACY), options.confidence)
    rows = judge_gate_rows([*compute_gate_rows(base_runs, head_runs, options,
                                               evidence=evidence, prior=prior),
                            *compute_quality_rows(quality)], alpha, config_changes)
    problems = [*_problems(base_runs, "base"), *_problems(head_runs, "head")]
    problems += [f"{row.workload}: {row.note}" for row in rows
                 if row.verdict is None and row.metric == GATE_METRICS[0].name]
    problems += [f"{row.workload} {row.label}: within the client's timing error"
                 + (f" ({row.client_note})" if row.client_note else "") for row in rows
                 if row.within_timing_error]
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
                             evidence=played.evidence, prior=played.prior)


def compare_stored_runs(engine: Engine, base_ids: Sequence[int], head_ids: Sequence[int],
                        options: GateOptions) -> GateResult:
    """Compare stored runs: each side may list several runs (repeats of one config), and the
    noise prior comes from the other stored runs of the base's config version on its suite."""
    with Session(engine) as session:
        base_runs = [fetch_run(session, run_id) for run_id in base_ids]
        head_runs = [fetch_run(session, run_id) for run_id in head_ids]
        earlier = fetch_history_runs(session, base_runs[0], compared=(base_ids, head_ids))
    changes = compute_config_diff(base_runs[0].config_body, head_runs[0].config_body)
    labels = tuple(_runs_label(runs) for runs in (base_runs, head_runs))
    prior = compute_rows_prior(earlier, base_runs, head_runs)
    return build_gate_result(base_runs, head_runs, (labels[0], labels[1]), changes, options,
                             interleaved=False, prior=prior)


def fetch_history_runs(session: Session, run: RunResult,
                       compared: tuple[Sequence[int], Sequence[int]]) -> tuple[RunResult, ...]:
    """The stored history of ``run``'s config version on its suite version and host (the
    nightly runs, not a gate's): the noise prior of a comparison of the ``compared`` runs. One
    run a side has no spread of its own, so the history keeps the compared runs that belong to
    it (two runs of one version are two draws of its noise, and leaving them out would make an
    outlier among them look like a change). With more runs a side, their own spread is counted
    already, and the history leaves them out."""
    found = fetch_noise_runs(session, run.config.version, run.suite.version, host=run.host)
    if len(compared[0]) == 1 and len(compared[1]) == 1:
        return found
    exclude = {*compared[0], *compared[1]}
    return tuple(r for r in found if r.run_id not in exclude)


def _runs_label(runs: Sequence[RunResult]) -> str:
    configs = sorted({f"{r.config.name}@{r.config.version[:12]}" for r in runs})
    ids = ", ".join(str(r.run_id) for r in runs)
    return f"run{'s' if len(runs) > 1 else ''} {ids} ({', '.join(configs)})"
