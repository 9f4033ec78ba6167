"""Change-point detection on labelled synthetic nightly histories from two generators.

Run: .venv/bin/python bench/detection.py [--series 300] [--nights 160]
         [--old-seed 2026] [--tune-seed 11] [--report-seed 2027] [--skip-old]

Two independent generators, so that the detector is not judged only on the data it was built on:

- **old** (this file, ``generate_history``): one model for every series, heavy-tailed noise on
  a log level, symmetric-ish outliers, reverting spikes both ways, 2-30 % log-uniform steps;
- **fleet** (``bench/fleet_histories.py``): a metric kind per series (log-normal p50s,
  Student-t p99s, Gaussian throughput, binomial accuracy scores, bit-constant memory), bimodal
  hosts, random-walk and linear drift, weekly seasonality, noisy-neighbour outliers, spikes that
  always go the bad way, and steps of exactly 2, 5, 10 or 30 %. Knobs are picked on
  ``--tune-seed``; ``--report-seed`` is the figure to quote.

The old generator, in detail:

- noise: Student-t with 3 degrees of freedom (heavy tails), a per-series scale drawn log-uniformly
  in [0.5 %, 3 %] of the level;
- outliers: 3 % of nights are slow by 10-60 % (one in four is instead fast by 5-30 %);
- weekly seasonality on half the series (a fixed day-of-week pattern, up to 1 noise sd);
- a slow linear drift on a third of the series (up to ±1.5 noise sd over the whole history);
- spikes that revert on 40 % of the series: 1-2 episodes of 1-3 nights, ±10-40 %;
- steps (the labelled change points): 0-3 per series, at least 20 nights apart and 15 from the
  ends, each a persistent jump of 2-30 % (log-uniform, so small steps are common), up or down.

Each set is drawn twice: histories with steps (precision / recall / F1, location error) and
histories without any step (false alarms per 100 points). Detectors, in one run:

- offline: ``detect_change_points`` over the whole history; a detection counts when it is
  within ±2 nights of a labelled step (one-to-one);
- nightly: ``ChangeMonitor().observe`` night by night; a step counts as caught when an alert
  locates it within ±3 nights, and "within 7 nights" when that alert came at most 7 nights
  after the step's first night; false alerts per 100 nights observed on the histories without
  a step;
- threshold (the anchor): the common rule "alert when tonight differs from the mean of the
  previous 7 nights by more than X %", for X = 5 and 10, used both ways.
Printed, never asserted. On the fleet sets the bench also prints recall by kind and step size
together, and an oracle's ceiling (``bench/detection_oracle.py``: a scan told the noise sd and the
neighbouring steps, Gaussian noise without nuisances), so the distance to the achievable shows.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from detection_oracle import render_oracle, score_nightly_oracle, score_oracle
from fleet_histories import FleetHistory, generate_fleet

from tracker.analysis import ChangeMonitor, detect_change_points
from tracker.analysis.changepoint_tail import TAIL_REACH
from tracker.analysis.monitor import TAIL_ALPHA


@dataclass(frozen=True, slots=True)
class History:
    values: list[float]
    steps: list[int]  # first night of each new level
    step_sizes: list[float]


def _student_t3(rng: random.Random) -> float:
    chi2 = sum(rng.gauss(0.0, 1.0) ** 2 for _ in range(3))
    return rng.gauss(0.0, 1.0) / math.sqrt(chi2 / 3.0) / math.sqrt(3.0)  # unit variance


def _draw_steps(rng: random.Random, nights: int) -> list[int]:
    count = rng.choices((0, 1, 2, 3), weights=(0.1, 0.45, 0.3, 0.15))[0]
    steps: list[int] = []
    for _ in range(50):
        if len(steps) == count:
            break
        at = rng.randrange(15, nights - 15)
        if all(abs(at - other) >= 20 for other in steps):
            steps.append(at)
    return sorted(steps)


def generate_history(rng: random.Random, nights: int, with_steps: bool) -> History:
    sd = math.exp(rng.uniform(math.log(0.005), math.log(0.03)))
    weekly = [rng.uniform(-1.0, 1.0) for _ in range(7)] if rng.random() < 0.5 else [0.0] * 7
    season = rng.uniform(0.0, 1.0) * sd
    drift = rng.uniform(-1.5, 1.5) * sd if rng.random() < 1 / 3 else 0.0
    steps = _draw_steps(rng, nights) if with_steps else []
    sizes = [math.copysign(math.exp(rng.uniform(math.log(0.02), math.log(0.30))),
                           rng.choice((-1.0, 1.0))) for _ in steps]
    spikes: dict[int, float] = {}
    if rng.random() < 0.4:
        for _ in range(rng.randint(1, 2)):
            start, length = rng.randrange(nights), rng.randint(1, 3)
            size = rng.choice((-1.0, 1.0)) * rng.uniform(0.10, 0.40)
            spikes.update({night: size for night in range(start, min(nights, start + length))})
    level = 1.0
    values: list[float] = []
    for night in range(nights):
        for at, size in zip(steps, sizes, strict=True):
            if night == at:
                level *= 1.0 + size
        log_value = (math.log(level) + sd * _student_t3(rng) + season * weekly[night % 7]
                     + drift * night / nights)
        value = math.exp(log_value) * (1.0 + spikes.get(night, 0.0))
        if rng.random() < 0.03:
            value *= 1.0 + rng.uniform(0.10, 0.60) if rng.random() < 0.75 else \
                1.0 - rng.uniform(0.05, 0.30)
        values.append(value)
    return History(values, steps, sizes)


# --- detectors ------------------------------------------------------------------------------

Alert = tuple[int, int]  # (location, night it was raised)
Case = History | FleetHistory
Run = Callable[[Case], list[Alert]]


def _direction(case: Case) -> bool | None:
    return case.lower_is_better if isinstance(case, FleetHistory) else None


def run_offline(case: Case) -> list[Alert]:
    points = detect_change_points(case.values, lower_is_better=_direction(case))
    return [(p.index, len(case.values) - 1) for p in points]


def run_nightly(case: Case) -> list[Alert]:
    monitor = ChangeMonitor(lower_is_better=_direction(case))
    alerts: list[Alert] = []
    for night, value in enumerate(case.values):
        alerts += [(p.index, night) for p in monitor.observe(value)]
    return alerts


def threshold_rule(percent: float) -> Run:
    def run(case: Case) -> list[Alert]:
        values = np.asarray(case.values)
        reference = np.convolve(values, np.ones(7) / 7.0, mode="valid")[:-1]
        rel = np.abs(values[7:] / reference - 1.0)
        return [(int(night) + 7, int(night) + 7) for night in np.flatnonzero(rel > percent / 100)]
    return run


@dataclass(frozen=True, slots=True)
class Detector:
    name: str
    run: Run
    tolerance: int  # nights between an alert's location and a step for a match
    nightly: bool  # alerts have a night they were raised on


DETECTORS = (
    Detector("offline (±2)", run_offline, 2, False),
    Detector("nightly (±3)", run_nightly, 3, True),
    Detector("threshold 5% (±3)", threshold_rule(5.0), 3, True),
    Detector("threshold 10% (±3)", threshold_rule(10.0), 3, True),
)
BUCKETS = ((0.02, 0.04), (0.04, 0.08), (0.08, 0.15), (0.15, 0.31))  # 2 %, 5 %, 10 %, 30 %


# --- scoring --------------------------------------------------------------------------------


@dataclass
class Score:
    true_positive: int = 0
    false_positive: int = 0
    missed: int = 0
    caught_in_7: int = 0
    delays: list[int] = field(default_factory=list)
    location_errors: list[int] = field(default_factory=list)
    null_alarms: int = 0
    null_points: int = 0
    by_size: dict[tuple[float, float], list[int]] = field(
        default_factory=lambda: {bucket: [0, 0] for bucket in BUCKETS})
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    by_kind_size: dict[str, list[int]] = field(default_factory=dict)  # "p99 5%": [hit, total]

    def f1(self) -> tuple[float, float, float]:
        found = self.true_positive + self.false_positive
        precision = self.true_positive / found if found else 1.0
        total = self.true_positive + self.missed
        recall = self.true_positive / total if total else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1


def _tally(score: Score, case: Case, size: float, hit: bool) -> None:
    bucket = next(b for b in BUCKETS if b[0] <= abs(size) < b[1])
    score.by_size[bucket][0] += hit
    score.by_size[bucket][1] += 1
    kind = case.kind if isinstance(case, FleetHistory) else "all"
    for table, key in ((score.by_kind, kind), (score.by_kind_size, f"{kind} {abs(size):.0%}")):
        tally = table.setdefault(key, [0, 0])
        tally[0] += hit
        tally[1] += 1


def score_history(score: Score, case: Case, alerts: list[Alert], tolerance: int) -> None:
    """Greedy one-to-one matching: each step takes the earliest-raised alert within tolerance."""
    unused = sorted(alerts, key=lambda a: (a[1], abs(a[0])))
    for step, size in zip(case.steps, case.step_sizes, strict=True):
        match = next((a for a in unused if abs(a[0] - step) <= tolerance), None)
        _tally(score, case, size, match is not None)
        if match is None:
            score.missed += 1
            continue
        unused.remove(match)
        score.true_positive += 1
        delay = match[1] - step
        score.delays.append(delay)
        score.location_errors.append(abs(match[0] - step))
        score.caught_in_7 += delay <= 7
    score.false_positive += len(unused)


def evaluate(detector: Detector, changed: Sequence[Case], quiet: Sequence[Case]) -> Score:
    score = Score()
    for case in changed:
        score_history(score, case, detector.run(case), detector.tolerance)
    for case in quiet:
        score.null_alarms += len(detector.run(case))
        score.null_points += len(case.values)
    return score


def _row(detector: Detector, score: Score, seconds: float) -> str:
    precision, recall, f1 = score.f1()
    per_100 = 100.0 * score.null_alarms / score.null_points
    steps = score.true_positive + score.missed
    delay = statistics.median(score.delays) if score.delays else float("nan")
    within = score.caught_in_7 / steps if steps else float("nan")
    location = statistics.fmean(score.location_errors) if score.location_errors else float("nan")
    caught = f"{within:6.1%}" if detector.nightly else "-"
    delay_text = f"{delay:7.1f}" if detector.nightly else "-"
    return (f"{detector.name:<20} {precision:6.3f} {recall:6.3f} {f1:6.3f} {per_100:9.3f} "
            f"{caught:>9} {delay_text:>7} {location:8.2f} {seconds:7.1f}")


def _fractions(tallies: dict[str, list[int]]) -> str:
    return "  ".join(f"{name}: {hit}/{total} {hit / total:.0%}" if total else f"{name}: -"
                     for name, (hit, total) in tallies.items())


def _detectable(changed: Sequence[Case], after_nights: int | None) -> str:
    """Share of steps whose shift, over the noise sd the generator used, reaches z >= 3 over
    its neighbouring segments (or over the first ``after_nights`` nights after it): what any
    detector could hope to find. Only fleet histories know their noise sd."""
    hits = total = 0
    for case in changed:
        if not isinstance(case, FleetHistory):
            return "-"
        bounds = [0, *case.steps, len(case.values)]
        for i, (step, size) in enumerate(zip(case.steps, case.step_sizes, strict=True)):
            before = step - bounds[i]
            after = bounds[i + 2] - step if after_nights is None else after_nights
            if case.noise_sd == 0.0:
                hits += 1
            else:
                spread = case.noise_sd * math.sqrt(1.0 / before + 1.0 / after)
                hits += abs(math.log1p(size)) / spread >= 3.0
            total += 1
    return f"{hits / total:.0%}"


def _by_kind_and_size(detector: Detector, score: Score) -> list[str]:
    """One line per kind: its recall at each step size (2, 5, 10, 30 %)."""
    lines: list[str] = []
    for kind in dict.fromkeys(key.split()[0] for key in sorted(score.by_kind_size)):
        cells = sorted(((float(key.split()[1].rstrip("%")), tally)
                        for key, tally in score.by_kind_size.items() if key.split()[0] == kind))
        lines.append(f"  {detector.name} {kind:<10} " + "  ".join(
            f"{size:.0f}%: {hit}/{total}" for size, (hit, total) in cells))
    return lines


def report_set(title: str, changed: Sequence[Case], quiet: Sequence[Case],
               oracle_seed: int | None = None) -> None:
    steps = sum(len(case.steps) for case in changed)
    print(f"\n== {title}: {len(changed)} histories with {steps} labelled steps and {len(quiet)} "
          f"without, {len(changed[0].values)} nights each")
    print(f"{'detector':<20} {'prec':>6} {'recall':>6} {'F1':>6} {'FA/100pt':>9} {'<=7 nts':>9} "
          f"{'delay':>7} {'loc err':>8} {'secs':>7}")
    extra: list[str] = []
    for detector in DETECTORS:
        started = time.perf_counter()
        score = evaluate(detector, changed, quiet)
        print(_row(detector, score, time.perf_counter() - started), flush=True)
        if detector.run in (run_offline, run_nightly):
            sizes = {f"{lo:.0%}-{hi:.0%}": tally for (lo, hi), tally in score.by_size.items()}
            extra.append(f"recall by step size, {detector.name}: {_fractions(sizes)}")
            if len(score.by_kind) > 1:
                extra.append(f"recall by kind, {detector.name}: {_fractions(score.by_kind)}")
                extra += _by_kind_and_size(detector, score)
    print("\n".join(extra))
    if isinstance(changed[0], FleetHistory):
        print(f"steps with z >= 3 (shift / noise sd) over their segments: "
              f"{_detectable(changed, None)}; over the 7 nights after them: "
              f"{_detectable(changed, 7)}")
        fleet = [case for case in changed if isinstance(case, FleetHistory)]
        seed = 0 if oracle_seed is None else oracle_seed
        print(render_oracle(score_oracle(fleet, seed)))
        splits = TAIL_REACH - 5 + 1  # the tail test's Bonferroni over its splits
        nightly, z = score_nightly_oracle(fleet, seed, TAIL_ALPHA / splits)
        print(f"nightly oracle (told the step and the noise sd, Gaussian; |z| >= {z:.2f}, the "
              f"tail test's per-split rate): alerted within 7 nights {nightly:.1%}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=300, help="histories per set")
    parser.add_argument("--nights", type=int, default=160)
    parser.add_argument("--old-seed", "--seed", type=int, default=2026,
                        help="the old generator's seed (--seed: its former name)")
    parser.add_argument("--tune-seed", type=int, default=11, help="fleet seed knobs were picked on")
    parser.add_argument("--report-seed", type=int, default=2027, help="fleet seed to report")
    parser.add_argument("--skip-old", action="store_true", help="only the fleet generator")
    parser.add_argument("--skip-tune", action="store_true", help="no tuning-seed fleet set")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if not args.skip_old:
        rng = random.Random(args.old_seed)
        changed = [generate_history(rng, args.nights, True) for _ in range(args.series)]
        quiet = [generate_history(rng, args.nights, False) for _ in range(args.series)]
        report_set(f"old generator, seed {args.old_seed}", changed, quiet)
    seeds = [("tuning", args.tune_seed)] * (not args.skip_tune) + [("reporting", args.report_seed)]
    for role, seed in seeds:
        fleet_changed, fleet_quiet = generate_fleet(seed, args.series, args.nights)
        report_set(f"fleet generator, {role} seed {seed}", fleet_changed, fleet_quiet, seed)
    print("\ndelay = nights from a step to its alert (median); loc err = |location - step| (mean)")
    print("goals: offline F1 >= 0.90 and FA/100pt <= 0.05; nightly >= 80% within 7 nights "
          "and FA/100pt <= 0.3")
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
