"""The stated detectable drop against simulated pairs: is "this set detects a drop of X points at
80 % power" true?

Run: .venv/bin/python bench/quality_power.py [--trials 2000] [--seed 2026]

For each set size n and discordance psi (the share of items that flip either way on identical
configs), ``compute_detectable_drop`` states the smallest accuracy drop the gate's paired test
(one-sided exact McNemar at 5 %) catches 80 % of the time. The simulation draws ``--trials``
paired tables at each true drop d on a grid of 0.1 point (items right on base and wrong on head
with probability (psi' + d) / 2, the reverse (psi' - d) / 2, psi' = max(psi, d): a drop of d
flips at least d of the items), runs the verdict's own one-sided p-value
(``compute_mcnemar_one_sided``, vectorised here with the same SciPy call) and finds the drop
caught 80 % of the time, interpolated between grid points. The last column is the difference
between the two, in points; the issue asks for it within 1 point.

Then the simulator's own answers: ``configs/walk/2-continuous-batching.yaml`` against the same
config with ``kv_cache_dtype: fp8`` (and against ``3-awq.yaml``), on seeded samples of
``baselines/quality/mixed-1k.jsonl`` of 40 to 1,000 items, over ``--sim-seeds`` simulator seeds:
how often the gate's paired verdict says regression, the mean drop, and the mean stated
detectable drop. Printed, never asserted.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from tracker.analysis import Outcome, PairedItem, compute_paired_quality
from tracker.analysis.paired_quality import compute_detectable_drop, compute_mcnemar_one_sided
from tracker.inputs.configs import ServingConfig, load_config
from tracker.inputs.package_data import shipped_configs, shipped_quality_sets
from tracker.quality import compute_sample, load_quality_set, score_output
from tracker.sim.answers import AnswerModel

ALPHA = 0.05
SIZES = (40, 200, 500, 1000, 1319)
DISCORDANCES = (0.0, 0.02, 0.05, 0.10)
GRID = np.arange(0.001, 0.301, 0.001)


def caught_rate(rng: np.random.Generator, n: int, psi: float, drop: float, trials: int) -> float:
    spread = max(psi, drop)
    lost, gained = (spread + drop) / 2.0, (spread - drop) / 2.0
    cells = rng.multinomial(n, [lost, gained, max(0.0, 1.0 - lost - gained)], size=trials)
    base_only, head_only = cells[:, 0], cells[:, 1]
    p_worse = np.where(base_only + head_only > 0,
                       stats.binom.sf(base_only - 1, base_only + head_only, 0.5), 1.0)
    return float(np.mean(p_worse < ALPHA))


def simulated_drop(rng: np.random.Generator, n: int, psi: float, trials: int) -> float | None:
    """The drop caught 80 % of the time: the first grid point at 80 %, interpolated linearly
    from the one before."""
    previous_drop, previous_rate = 0.0, 0.0
    for drop in GRID:
        rate = caught_rate(rng, n, psi, float(drop), trials)
        if rate >= 0.8:
            share = (0.8 - previous_rate) / (rate - previous_rate)
            return previous_drop + share * (float(drop) - previous_drop)
        previous_drop, previous_rate = float(drop), rate
    return None


def _with(config: ServingConfig, seed: int, **engine: object) -> ServingConfig:
    simulator = config.target.simulator.model_copy(update={"seed": seed})
    return config.model_copy(update={
        "target": config.target.model_copy(update={"simulator": simulator}),
        "engine": config.engine.model_copy(update=engine)})


def simulator_table(seeds: int) -> None:
    walk = shipped_configs() / "walk"
    plain = load_config(walk / "2-continuous-batching.yaml").config
    heads = {"fp8 KV": lambda s: _with(plain, s, kv_cache_dtype="fp8"),
             "AWQ": lambda s: _with(load_config(walk / "3-awq.yaml").config, s)}
    whole = load_quality_set(shipped_quality_sets() / "mixed-1k.jsonl")
    print(f"\nthe simulator's answers, 2-continuous-batching vs head, {seeds} simulator seeds")
    print(f"{'head':>7} {'items':>6} {'caught':>7} {'mean drop':>10} {'detectable':>11}")
    for name, make in heads.items():
        for size in (40, 200, 500, 1000):
            caught, drops, detectable = 0, [], []
            for seed in range(1, seeds + 1):
                base = AnswerModel.from_config(_with(plain, seed))
                head = AnswerModel.from_config(make(seed))
                items = compute_sample(whole, size, seed).items
                pairs = []
                for item in items:
                    before, after = base.answer(item.prompt), head.answer(item.prompt)
                    pairs.append(PairedItem(item.id, score_output(item, before or "") == 1.0,
                                            score_output(item, after or "") == 1.0,
                                            before != after))
                result = compute_paired_quality(pairs)
                caught += result.verdict.outcome is Outcome.REGRESSION
                drops.append(-result.difference)
                detectable.append(result.detectable_drop)
            print(f"{name:>7} {size:>6} {caught / seeds:>7.0%} {np.mean(drops) * 100:>7.2f} pt "
                  f"{np.mean(detectable) * 100:>8.2f} pt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--sim-seeds", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    # the vectorised p-value is the verdict's own
    assert abs(float(stats.binom.sf(9, 12, 0.5)) - compute_mcnemar_one_sided(10, 2)) < 1e-12
    print(f"one-sided exact McNemar at {ALPHA:.0%}, 80 % power, {args.trials} tables per drop, "
          f"seed {args.seed}")
    print(f"{'items':>6} {'psi':>6} {'stated drop':>12} {'simulated':>10} {'diff':>7}")
    worst = 0.0
    for n in SIZES:
        for psi in DISCORDANCES:
            stated = compute_detectable_drop(n, psi, ALPHA)
            found = simulated_drop(rng, n, psi, args.trials)
            if found is None:
                print(f"{n:>6} {psi:>6.2f} {stated * 100:>10.2f} pt {'> 30 pt':>10}")
                continue
            diff = (found - stated) * 100
            worst = max(worst, abs(diff))
            print(f"{n:>6} {psi:>6.2f} {stated * 100:>10.2f} pt {found * 100:>7.2f} pt "
                  f"{diff:>+6.2f}")
    print(f"largest |stated - simulated|: {worst:.2f} points")
    simulator_table(args.sim_seeds)


if __name__ == "__main__":
    main()
