"""A bisection's probes: the base config with some of the head's fields, run against the base.

``build_probe_config`` applies the head's values of the named diff paths to the base's canonical
body (a path the head leaves unset is removed) and validates the result like any config, so a
combination the schema refuses is a ``ConfigError`` naming the fields. A probe is named
``NAME.probe``: its runs are stored like any run, but they are not the nightly series of the
base's name (``tracker.pipeline.watch``), where a probe's regression would read as a change point.
``ProbeRunner`` runs a probe in the gate's rounds (``tracker.gate.rounds``: base control and
probe interleaved ABBA, judged sequentially) and reads the analysis' verdict of the failing row.
A config refused, a target that fails to start or a run that does not complete make the probe
unresolved, recorded with the reason, and the search goes on around it. It also enforces the
budget. ``run_bisection`` runs the search for a gate's result and stores it.

Each probe is judged at ``1 - alpha / max_probes`` confidence (Bonferroni over the search): a
bisection asks the analysis up to ``max_probes`` questions, and one false alarm would send the
search down the wrong half, so the bisection as a whole keeps the gate's false-alarm budget.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tracker.analysis import Outcome, Verdict
from tracker.analysis.noise import resolves_statistic
from tracker.bisection.plan import (
    BisectOutcome,
    BudgetSpent,
    Culprit,
    Probe,
    ProbeJudgement,
    ProbeOutcome,
    search_culprits,
)
from tracker.errors import ConfigError, MeasurementError, RunInterrupted, UsageError
from tracker.gate.config_refs import ConfigSide
from tracker.gate.gating import (
    GateDesign,
    GateOptions,
    GateOutcome,
    GateResult,
    GateRow,
    build_gate_result,
)
from tracker.gate.rounds import run_rounds
from tracker.inputs.config_diff import Change, compute_config_diff, flatten_paths
from tracker.inputs.configs import LoadedConfig, ServingConfig, build_loaded_config
from tracker.inputs.suites import LoadedSuite
from tracker.inputs.yamlfile import validate_model
from tracker.redaction import redact_text
from tracker.results import RunOrigin, RunResult
from tracker.store.bisections import StoredBisection, save_bisection

DEFAULT_MAX_PROBES = 12
PROBE_SUFFIX = ".probe"  # a probe config's name: the base's with this suffix
_ABSENT = object()


@dataclass(frozen=True, slots=True)
class BisectBudget:
    max_probes: int = DEFAULT_MAX_PROBES
    max_minutes: float | None = None  # None: no limit on time

    def __post_init__(self) -> None:
        if self.max_probes < 1:
            raise UsageError(f"--max-probes: must be >= 1 (got {self.max_probes})")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise UsageError(f"--max-minutes: must be > 0 (got {self.max_minutes})")


def compute_probe_options(options: GateOptions, budget: BisectBudget) -> GateOptions:
    """The gate's options at the probes' confidence: its false-alarm budget over every probe."""
    alpha = (1.0 - options.confidence) / budget.max_probes
    return replace(options, confidence=1.0 - alpha)


def _apply(body: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node = body
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            if value is _ABSENT:
                return
            child = node[part] = {}
        node = child
    if value is _ABSENT:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = copy.deepcopy(value)


def build_probe_config(base: LoadedConfig, head: LoadedConfig, fields: Sequence[str],
                       label: str) -> LoadedConfig:
    """The base with the head's value of each of ``fields``, raising ``ConfigError`` if refused."""
    body = copy.deepcopy(dict(base.canonical))
    values = flatten_paths(head.canonical)
    for path in fields:
        _apply(body, path, values.get(path, _ABSENT))
    if not str(body["name"]).endswith(PROBE_SUFFIX):  # not a point of the base's nightly series
        body["name"] = f"{body['name']}{PROBE_SUFFIX}"
    config = validate_model(ServingConfig, body, Path(label), {})
    return build_loaded_config(config, label)


def _as_given(loaded: LoadedConfig) -> LoadedConfig:
    return loaded


@dataclass(frozen=True, slots=True)
class BisectionOrigin:
    """What a bisection is stored under when its sides were renamed to run it (the nightly
    bisection runs ``NAME.probe`` sides, out of the series): the series' name and versions."""

    config_name: str
    base_version: str
    head_version: str


@dataclass
class ProbeRunner:
    """Runs probes for ``tracker.bisection.plan.search_culprits`` (its ``Judge``)."""

    engine: Engine
    base: ConfigSide
    head: ConfigSide
    suite: LoadedSuite
    design: GateDesign
    options: GateOptions  # at the probes' confidence (``compute_probe_options``)
    row: tuple[str, str]  # (workload, metric) of the gate's failing row
    budget: BisectBudget
    quiet: bool = True
    place: Callable[[LoadedConfig], LoadedConfig] = _as_given  # e.g. a worker's GPUs
    stopping: Callable[[], bool] = lambda: False  # asked to stop: no further probe starts
    clock: Callable[[], float] = time.monotonic
    runs: list[tuple[int | None, str, int]] = field(default_factory=list)  # probe, role, run
    judged: list[Probe] = field(default_factory=list)  # every probe judged, in order
    started_s: float | None = None

    def __call__(self, fields: tuple[str, ...], number: int) -> ProbeJudgement:
        judgement = self._judge(fields, number)
        self.judged.append(Probe(number, fields, judgement))
        return judgement

    def _judge(self, fields: tuple[str, ...], number: int) -> ProbeJudgement:
        self._check_budget(number)
        label = f"probe {number}"
        try:
            loaded = self.place(build_probe_config(self.base.loaded, self.head.loaded, fields,
                                                   label))
        except ConfigError as exc:
            return ProbeJudgement(ProbeOutcome.INVALID, redact_text(str(exc)))
        try:
            played = run_rounds(self.engine, self.base, ConfigSide(label, loaded), self.suite,
                                self.design, self.options, quiet=self.quiet,
                                origin=RunOrigin.BISECT)
        except (ConfigError, MeasurementError) as exc:  # the target refused to start
            return ProbeJudgement(ProbeOutcome.FAILED, redact_text(str(exc)))
        self._record(number, played.base_runs, played.head_runs)
        result = build_gate_result(played.base_runs, played.head_runs, (self.base.title, label),
                                   (), self.options, interleaved=True, rounds=played.rounds,
                                   evidence=played.evidence, prior=played.prior)
        judgement = judge_probe_row(result.rows, self.row, result.problems)
        return replace(judgement, control_run_ids=result.base_run_ids,
                       probe_run_ids=result.head_run_ids)

    def _check_budget(self, number: int) -> None:
        if self.stopping():
            raise RunInterrupted(f"stopped before probe {number}")
        now = self.clock()
        if self.started_s is None:
            self.started_s = now
        if number > self.budget.max_probes:
            raise BudgetSpent(f"--max-probes {self.budget.max_probes}")
        minutes = self.budget.max_minutes
        if minutes is not None and now - self.started_s >= minutes * 60.0:
            raise BudgetSpent(f"--max-minutes {minutes:g}")

    def _record(self, number: int, controls: Sequence[RunResult],
                probes: Sequence[RunResult]) -> None:
        self.runs += [(number, "control", run.run_id) for run in controls]
        self.runs += [(number, "probe", run.run_id) for run in probes]


def judge_probe_row(rows: Sequence[GateRow], row: tuple[str, str],
                    problems: Sequence[str]) -> ProbeJudgement:
    """The probe's outcome on the failing row, as the analysis judged it."""
    found = next((r for r in rows if (r.workload, r.metric) == row), None)
    if problems:
        return ProbeJudgement(ProbeOutcome.FAILED, redact_text("; ".join(problems)),
                              None if found is None else found.verdict)
    if found is None or found.verdict is None:
        note = "not measured" if found is None else (found.note or "not measured")
        return ProbeJudgement(ProbeOutcome.FAILED, f"{row[0]}/{row[1]}: {note}")
    verdict = found.verdict
    if verdict.regressed:
        outcome = ProbeOutcome.REGRESSED
    elif verdict.outcome is Outcome.INCONCLUSIVE:
        outcome = ProbeOutcome.INCONCLUSIVE
    else:
        outcome = ProbeOutcome.CLEAN
    return ProbeJudgement(outcome, verdict.reason, verdict)


# --- the bisection of a gate's regression ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BisectResult:
    outcome: BisectOutcome
    row: tuple[str, str] | None  # (workload, metric) the gate failed on; None: it did not
    label: str | None  # the row as the report names it: "busy TTFT median"
    head_verdict: Verdict | None
    changes: tuple[Change, ...]  # the config diff, values as the diff shows them
    culprits: tuple[Culprit, ...]
    probes: tuple[Probe, ...]
    stop_reason: str
    probe_confidence: float
    runs: tuple[tuple[int | None, str, int], ...] = ()  # (probe number, role, run id)
    bisection_id: int | None = None  # as stored


def compute_failing_row(result: GateResult) -> GateRow | None:
    """The gate's most severe regression: of its regressed rows (a change a config field asks
    for is never one), the one the gate is sure moved furthest the worse way on the log scale
    (a 3x collapse before a 5 % slip, whichever was decided first, and a median known to be at
    least +170 % before a p99 of 32 values somewhere in +110 % to +9,000 %, which the probes,
    judged at a stricter level, could not decide). A quantile its runs cannot resolve (the p99
    of 32 requests is near each run's largest value) is followed only when no other row
    regressed: a probe's few runs cannot pin it down."""
    regressed = [row for row in result.rows if row.regressed and row.verdict is not None]
    return max(regressed, key=lambda row: (is_resolved(row), compute_severity(row)),
               default=None)


def is_resolved(row: GateRow) -> bool:
    """Whether each run resolves the row's statistic: a median, a mean, a run's one value, a
    p99 of at least 100 requests a run."""
    verdict = row.verdict
    if verdict is None or verdict.base_runs < 1:
        return True
    per_run = min(verdict.base_count / verdict.base_runs,
                  verdict.head_count / max(verdict.head_runs, 1))
    return resolves_statistic(verdict.statistic, per_run)


def compute_severity(row: GateRow) -> float:
    """How far the gate is sure a row moved the worse way: |log(1 + change)| at the end of its
    interval nearest no change (the estimate where there is no interval), 0 when not
    estimated."""
    verdict = row.verdict
    if verdict is None or verdict.rel_change is None:
        return 0.0
    ends = verdict.ci if verdict.ci is not None else (verdict.rel_change,)
    return min(_log_size(end) for end in ends)


def _log_size(change: float) -> float:
    return math.inf if change <= -1.0 else abs(math.log1p(change))


def run_bisection(engine: Engine, base: ConfigSide, head: ConfigSide, suite: LoadedSuite,
                  gate: GateResult, design: GateDesign, options: GateOptions,
                  budget: BisectBudget, *, quiet: bool = True,
                  place: Callable[[LoadedConfig], LoadedConfig] = _as_given,
                  origin: BisectionOrigin | None = None,
                  stopping: Callable[[], bool] = lambda: False) -> BisectResult:
    """Bisect the gate's regression over the diff's fields (no probe when it did not regress),
    and store the bisection with every run it made, the gate's own included. ``place`` is
    applied to every probe config (a worker's GPUs). ``origin`` gives the names it is stored
    under. Once ``stopping()`` is true, no further probe starts. Interrupted (Ctrl-C, SIGTERM,
    ``stopping``) while probing, it is stored as ``interrupted`` with the probes judged so far,
    and ``RunInterrupted`` raised."""
    changes = tuple(compute_config_diff(base.loaded.canonical, head.loaded.canonical))
    probe_options = compute_probe_options(options, budget)
    row = compute_failing_row(gate)
    if row is None or row.verdict is None:
        outcome = (BisectOutcome.NOT_MEASURED if gate.outcome is GateOutcome.NOT_MEASURED
                   else BisectOutcome.NO_REGRESSION)
        reason = ("the gate could not measure the head against the base: nothing to bisect"
                  if outcome is BisectOutcome.NOT_MEASURED
                  else "the head does not regress against the base: nothing to bisect")
        result = BisectResult(outcome, None, None, None, changes, (), (), reason,
                              probe_options.confidence)
    else:
        key = (row.workload, row.metric)
        runner = ProbeRunner(engine, base, head, suite, design, probe_options, key, budget,
                             quiet=quiet, place=place, stopping=stopping)
        label = f"{row.workload} {row.label}"
        try:
            found = search_culprits([c.path for c in changes], runner, row.verdict)
        except (RunInterrupted, KeyboardInterrupt) as exc:
            stopped = BisectResult(
                BisectOutcome.INTERRUPTED, key, label, row.verdict, changes, (),
                tuple(runner.judged), f"interrupted after {len(runner.judged)} probes",
                probe_options.confidence, tuple(runner.runs))
            stored_id = _save(engine, _stored(stopped, base, head, suite, gate, origin))
            what = str(exc) or "interrupted"
            raise RunInterrupted(f"{what}; bisection {stored_id} stored as interrupted with "
                                 f"its {len(runner.judged)} probes judged so far") from None
        result = BisectResult(found.outcome, key, label, row.verdict,
                              changes, found.culprits, found.probes, found.stop_reason,
                              probe_options.confidence, tuple(runner.runs))
    stored = _save(engine, _stored(result, base, head, suite, gate, origin))
    return replace(result, bisection_id=stored)


def _save(engine: Engine, bisection: StoredBisection) -> int:
    with Session(engine) as session, session.begin():
        return save_bisection(session, bisection)


def _stored(result: BisectResult, base: ConfigSide, head: ConfigSide, suite: LoadedSuite,
            gate: GateResult, origin: BisectionOrigin | None) -> StoredBisection:
    culprits = tuple({"fields": list(c.fields), "share": c.share,
                      "share_interval": None if c.share_interval is None
                      else list(c.share_interval)} for c in result.culprits)
    probes = tuple({"number": p.number, "fields": list(p.fields),
                    "outcome": p.judgement.outcome.value, "reason": p.judgement.reason}
                   for p in result.probes)
    runs = [*((None, "base", run_id) for run_id in gate.base_run_ids),
            *((None, "head", run_id) for run_id in gate.head_run_ids),
            *((number, role, run_id) for number, role, run_id in result.runs)]
    origin = origin or BisectionOrigin(base.loaded.config.name, base.loaded.version,
                                       head.loaded.version)
    return StoredBisection(
        origin.config_name, suite.suite.name, origin.base_version, origin.head_version,
        None if result.row is None else result.row[0],
        None if result.row is None else result.row[1], result.outcome.value,
        result.stop_reason, culprits, probes, datetime.now(UTC), tuple(runs))
