"""Change-point detection on labelled synthetic nightly histories: offline, streaming, threshold.

Run: .venv/bin/python bench/detection.py [--series 300] [--nights 160] [--seed 2026]

Each history is one metric's nightly values (positive, like a latency or a throughput) built
from a seeded generator with what real nightly benchmark series show:

- noise: Student-t with 3 degrees of freedom (heavy tails), a per-series scale drawn log-uniformly
  in [0.5 %, 3 %] of the level;
- outliers: 3 % of nights are slow by 10-60 % (one in four is instead fast by 5-30 %);
- weekly seasonality on half the series (a fixed day-of-week pattern, up to 1 noise sd);
- a slow linear drift on a third of the series (up to ±1.5 noise sd over the whole history);
- spikes that revert on 40 % of the series: 1-2 episodes of 1-3 nights, ±10-40 %;
- steps (the labelled change points): 0-3 per series, at least 20 nights apart and 15 from the
  ends, each a persistent jump of 2-30 % (log-uniform, so small steps are common), up or down.

Two sets are drawn: histories with steps (precision / recall / F1, location error) and histories
without any step (false alarms per 100 points). Three detectors, in one run:

- offline: ``detect_change_points`` over the whole history; a detection counts when it is
  within ±2 nights of a labelled step (one-to-one);
- streaming: ``ChangeMonitor().observe`` night by night; a step counts as caught when an alert
  locates it within ±3 nights, and "within 7 nights" when that alert came at most 7 nights
  after the step's first night; false alerts per 100 nights observed;
- threshold: the common rule "alert when tonight differs from the mean of the previous 7 nights
  by more than X %", for X = 5 and 10, used both ways.
Printed, never asserted.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tracker.analysis import ChangeMonitor, detect_change_points


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


def run_offline(values: Sequence[float]) -> list[Alert]:
    return [(p.index, len(values) - 1) for p in detect_change_points(values)]


def run_streaming(values: Sequence[float]) -> list[Alert]:
    monitor = ChangeMonitor()
    alerts: list[Alert] = []
    for night, value in enumerate(values):
        alerts += [(p.index, night) for p in monitor.observe(value)]
    return alerts


def threshold_rule(percent: float) -> Callable[[Sequence[float]], list[Alert]]:
    def run(values: Sequence[float]) -> list[Alert]:
        alerts: list[Alert] = []
        for night in range(7, len(values)):
            reference = statistics.fmean(values[night - 7:night])
            if abs(values[night] / reference - 1.0) > percent / 100.0:
                alerts.append((night, night))
        return alerts
    return run


# --- scoring --------------------------------------------------------------------------------


@dataclass
class Score:
    true_positive: int = 0
    false_positive: int = 0
    missed: int = 0
    caught_in_7: int = 0
    delays: list[int] | None = None
    location_errors: list[int] | None = None
    null_alarms: int = 0
    null_points: int = 0

    def f1(self) -> tuple[float, float, float]:
        found = self.true_positive + self.false_positive
        precision = self.true_positive / found if found else 1.0
        total = self.true_positive + self.missed
        recall = self.true_positive / total if total else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1


def score_history(score: Score, history: History, alerts: list[Alert], tolerance: int) -> None:
    """Greedy one-to-one matching: each step takes the earliest-raised alert within tolerance."""
    unused = sorted(alerts, key=lambda a: (a[1], abs(a[0])))
    for step in history.steps:
        match = next((a for a in unused if abs(a[0] - step) <= tolerance), None)
        if match is None:
            score.missed += 1
            continue
        unused.remove(match)
        score.true_positive += 1
        delay = match[1] - step
        assert score.delays is not None and score.location_errors is not None
        score.delays.append(delay)
        score.location_errors.append(abs(match[0] - step))
        score.caught_in_7 += delay <= 7
    score.false_positive += len(unused)


def evaluate(detector: Callable[[Sequence[float]], list[Alert]], changed: list[History],
             quiet: list[History], tolerance: int) -> Score:
    score = Score(delays=[], location_errors=[])
    for history in changed:
        score_history(score, history, detector(history.values), tolerance)
    for history in quiet:
        score.null_alarms += len(detector(history.values))
        score.null_points += len(history.values)
    return score


def _row(name: str, score: Score, steps: int, streaming: bool, seconds: float) -> str:
    precision, recall, f1 = score.f1()
    per_100 = 100.0 * score.null_alarms / score.null_points
    assert score.delays is not None and score.location_errors is not None
    delay = statistics.median(score.delays) if score.delays else float("nan")
    within = score.caught_in_7 / steps if steps else float("nan")
    location = statistics.fmean(score.location_errors) if score.location_errors else float("nan")
    caught = f"{within:6.1%}" if streaming else "-"
    delay_text = f"{delay:7.1f}" if streaming else "-"
    return (f"{name:<22} {precision:6.3f} {recall:6.3f} {f1:6.3f} {per_100:9.3f} "
            f"{caught:>9} {delay_text:>7} {location:8.2f} {seconds:7.1f}")


def _recall_by_size(detector: Callable[[Sequence[float]], list[Alert]],
                    changed: list[History], tolerance: int) -> str:
    buckets = [(0.02, 0.04), (0.04, 0.08), (0.08, 0.15), (0.15, 0.31)]
    hits = {b: [0, 0] for b in buckets}
    for history in changed:
        alerts = detector(history.values)
        for step, size in zip(history.steps, history.step_sizes, strict=True):
            bucket = next(b for b in buckets if b[0] <= abs(size) < b[1])
            hits[bucket][1] += 1
            hits[bucket][0] += any(abs(a[0] - step) <= tolerance for a in alerts)
    return "  ".join(f"{lo:.0%}-{hi:.0%}: {h}/{n}" for (lo, hi), (h, n) in hits.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=300, help="histories per set")
    parser.add_argument("--nights", type=int, default=160)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    changed = [generate_history(rng, args.nights, True) for _ in range(args.series)]
    quiet = [generate_history(rng, args.nights, False) for _ in range(args.series)]
    steps = sum(len(h.steps) for h in changed)
    print(f"{args.series} histories with {steps} labelled steps and {args.series} without, "
          f"{args.nights} nights each (seed {args.seed})\n")
    print(f"{'detector':<22} {'prec':>6} {'recall':>6} {'F1':>6} {'FA/100pt':>9} {'<=7 nts':>9} "
          f"{'delay':>7} {'loc err':>8} {'secs':>7}")
    detectors: list[tuple[str, Callable[[Sequence[float]], list[Alert]], int, bool]] = [
        ("offline (±2)", run_offline, 2, False),
        ("streaming (±3)", run_streaming, 3, True),
        ("threshold 5% (±3)", threshold_rule(5.0), 3, True),
        ("threshold 10% (±3)", threshold_rule(10.0), 3, True),
    ]
    for name, detector, tolerance, streaming in detectors:
        started = time.perf_counter()
        score = evaluate(detector, changed, quiet, tolerance)
        print(_row(name, score, steps, streaming, time.perf_counter() - started), flush=True)
    print("\nrecall by step size (offline, ±2):   " + _recall_by_size(run_offline, changed, 2))
    print("delay = nights from a step to its alert (median); loc err = |location - step| (mean)")
    print("targets: offline F1 >= 0.85 and FA/100pt <= 0.05; streaming >= 75% within 7 nights "
          "and FA/100pt <= 0.3")
    return 0


if __name__ == "__main__":
    sys.exit(main())
