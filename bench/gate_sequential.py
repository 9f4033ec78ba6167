"""The sequential gate against the fixed design: how many requests each spends, and what it finds.

Run: .venv/bin/python bench/gate_sequential.py [--trials 400] [--seed 2026]
(``bench/gate_calibration.py`` prints the same table at its end, on its report seed.)

One workload of a gate on the issue's two families (``bench/gate_calibration.py``'s draws:
log-normal sigma 0.5; a mixture of 30 % cache hits at 0.35x, a sigma 0.3 body and a 5 %
Pareto(1.5) tail), in runs of 333 requests per side, each run scaled by 1 % run-level drift; the
gate's rows are the TTFT median, the TTFT p99 and the request throughput (one value per run,
1 % drift and 0.5 % noise). The head is every request slower by 0 (no change), 5, 10 or 20 %
(its throughput lower by as much). Per trial both designs judge the same runs:

- sequential: ``tracker.analysis.sequential.SequentialGate`` after every round, stopping once
  decided, at most ``--max-rounds`` (the gate's default);
- sequential with a prior: the same, given each row's run-to-run noise from 10 earlier base
  runs drawn from the same drift model (``compute_run_noise_prior``, 9 degrees of freedom), as
  ``tracker gate`` takes it from the store, at most ``--max-rounds`` and at most 3 rounds (the
  fixed design's budget); and both once more with that prior's variance halved ("prior/2": a
  prior too small by 2x, what its false alarms become, the guard from round 3 included);
- fixed: ``compare_samples`` over all N rounds' runs and ``judge_family`` (the gate's
  ``--repeats N``), for N = 3 (1,000 requests per side, the issue's design) up to max rounds.

Printed per design and change: how often the gate as a whole says "regression" (no change: the
false-alarm rate; else the power) and the mean requests per side it ran; then the sequential
gate's requests on the clear cases (no change, +10 %) against the fixed 3 rounds and against
the smallest fixed design at least as powerful at +5 %. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from gate_calibration import FAMILIES, RUN_SIGMA, Draw

from tracker.analysis import compare_samples, judge_family
from tracker.analysis.sequential import (
    RunNoisePrior,
    SequentialGate,
    SequentialRow,
    compute_run_noise_prior,
)
from tracker.gate.gating import DEFAULT_MAX_ROUNDS
from tracker.metrics import Metric, get_metric

PER_RUN = 333
FIXED_ROUNDS = 3
CHANGES = (0.0, 0.05, 0.10, 0.20)
METRICS: tuple[Metric, ...] = (get_metric("ttft_median_s"), get_metric("ttft_p99_s"),
                               get_metric("request_throughput_per_s"))
MIN_EFFECT = {"median": 0.02, "p99": 0.05, "mean": 0.02}
EARLIER_RUNS = 10
Prior = dict[str, RunNoisePrior]
Round = dict[str, tuple[list[float], list[float]]]
PRIOR_DESIGNS = ("seq. prior (<= max)", f"seq. prior (<= {FIXED_ROUNDS} rounds)",
                 "seq. prior/2 (<= max)", f"seq. prior/2 (<= {FIXED_ROUNDS} rounds)")


def draw_rounds(draw: Draw, rng: np.random.Generator, change: float, rounds: int) -> list[Round]:
    """``rounds`` rounds: per metric, (base run's values, head run's values)."""
    played = []
    for _ in range(rounds):
        sides = []
        for slower in (1.0, 1.0 + change):
            factor = math.exp(RUN_SIGMA * float(rng.standard_normal()))
            ttft = draw(rng, PER_RUN) * factor * slower
            speed = 10.0 / factor / slower * math.exp(0.005 * float(rng.standard_normal()))
            sides.append({"ttft": ttft.tolist(), "speed": [speed]})
        played.append({metric.name: (sides[0][_key(metric)], sides[1][_key(metric)])
                       for metric in METRICS})
    return played


def _key(metric: Metric) -> str:
    return "ttft" if metric.latency == "ttft" else "speed"


def draw_prior(draw: Draw, rng: np.random.Generator) -> Prior:
    """Each row's prior from ``EARLIER_RUNS`` base runs of the same drift model (the rounds of
    no change: both of their runs are the base's)."""
    played = draw_rounds(draw, rng, 0.0, EARLIER_RUNS // 2)
    priors = {}
    for metric in METRICS:
        runs = [pair[side] for pair in (r[metric.name] for r in played) for side in (0, 1)]
        prior = compute_run_noise_prior(runs, metric.statistic)
        if prior is not None:
            priors[metric.name] = prior
    return priors


def play_sequential(rounds: list[Round], max_rounds: int,
                    prior: Prior | None = None) -> tuple[bool, int]:
    rows = [SequentialRow(m.name, m.statistic, m.lower_is_better, MIN_EFFECT[m.statistic])
            for m in METRICS]
    gate = SequentialGate(rows, alpha=0.05, max_rounds=max_rounds, prior=prior)
    for played in rounds[:max_rounds]:
        state = gate.observe(played)
        if state.decided:
            break
    return bool(state.regressed), state.rounds


def play_fixed(rounds: list[Round], count: int) -> bool:
    verdicts = [compare_samples([r[m.name][0] for r in rounds[:count]],
                                [r[m.name][1] for r in rounds[:count]], m,
                                min_effect=MIN_EFFECT[m.statistic]) for m in METRICS]
    return judge_family(verdicts).regressed


@dataclass
class Tally:
    flagged: int = 0
    rounds: list[int] = field(default_factory=list)

    def cell(self, trials: int) -> str:
        return (f"{self.flagged / trials:6.1%} {np.mean(self.rounds) * PER_RUN:7,.0f}")


def run_family(draw: Draw, seed: int, trials: int, max_rounds: int) -> dict[str, list[Tally]]:
    fixed = range(FIXED_ROUNDS, max(max_rounds, FIXED_ROUNDS) + 1)
    designs = {f"sequential (<= {max_rounds} rounds)": [Tally() for _ in CHANGES]}
    designs |= {f"fixed {count} rounds": [Tally() for _ in CHANGES] for count in fixed}
    designs |= {name: [Tally() for _ in CHANGES] for name in PRIOR_DESIGNS}
    tallies = list(designs.values())
    for column, change in enumerate(CHANGES):
        rng = np.random.default_rng([seed, column])
        earlier = np.random.default_rng([seed, column, EARLIER_RUNS])  # the others' draws stay
        for _ in range(trials):
            rounds = draw_rounds(draw, rng, change, max(max_rounds, FIXED_ROUNDS))
            prior = draw_prior(draw, earlier)
            small = {key: RunNoisePrior(p.variance / 2.0, p.df) for key, p in prior.items()}
            outcomes = [play_sequential(rounds, max_rounds),
                        *((play_fixed(rounds, count), count) for count in fixed),
                        *(play_sequential(rounds, most, given) for given in (prior, small)
                          for most in (max_rounds, FIXED_ROUNDS))]
            for tally, (flag, count) in zip(tallies, outcomes, strict=True):
                tally[column].flagged += flag
                tally[column].rounds.append(count)
    return designs


def print_shares(designs: dict[str, list[Tally]]) -> None:
    """Requests on the clear cases against the fixed 3 rounds, and against the smallest fixed
    design that is at least as powerful at +5 % (the same false-alarm budget throughout)."""
    names = list(designs)
    fixed = [name for name in names if name.startswith("fixed")]
    five = CHANGES.index(0.05)
    for design in (names[0], *PRIOR_DESIGNS[:2]):
        sequential = designs[design]
        equal = next((name for name in fixed
                      if designs[name][five].flagged >= sequential[five].flagged), fixed[-1])
        for name in dict.fromkeys((f"fixed {FIXED_ROUNDS} rounds", equal)):
            shares = [np.mean(sequential[i].rounds) / np.mean(designs[name][i].rounds)
                      for i in (CHANGES.index(0.0), CHANGES.index(0.10))]
            power = designs[name][five].flagged / len(designs[name][five].rounds)
            print(f"  clear cases: {design} ran {shares[0]:.0%} (no change) and "
                  f"{shares[1]:.0%} (+10%) of the requests of {name} (+5% power {power:.1%}; "
                  "goal <= 50%)")


def print_sequential_table(seed: int, trials: int, max_rounds: int = DEFAULT_MAX_ROUNDS) -> None:
    """The table for every family: flagged (false alarms, then power) and requests per side."""
    print(f"\n=== sequential vs fixed gate (seed {seed}, {trials} trials; rows TTFT median, "
          f"TTFT p99, request throughput; runs of {PER_RUN} requests, 1% drift)")
    header = " | ".join(f"{'no change' if c == 0 else f'+{c:.0%}':>15}" for c in CHANGES)
    for name, draw in FAMILIES.items():
        started = time.perf_counter()
        designs = run_family(draw, seed, trials, max_rounds)
        print(f"\n{name} ({time.perf_counter() - started:.0f} s): flagged, mean requests/side")
        print(f"  {'design':<28} {header}")
        for design, tallies in designs.items():
            print(f"  {design:<28} " + " | ".join(t.cell(trials) for t in tallies))
        print_shares(designs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--max-rounds", type=int, default=DEFAULT_MAX_ROUNDS)
    args = parser.parse_args(argv)
    print_sequential_table(args.seed, args.trials, args.max_rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
