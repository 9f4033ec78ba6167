"""An oracle's ceiling for offline change points on the fleet histories: what a detector that is
*told* the noise could reach, so the bench can say how far the real detector is from it.

The oracle knows, for each labelled step, the generator's noise sd (host modes included), where
the neighbouring steps are (so it scans one step at a time, between them) and that the noise is
Gaussian on the log value, with none of the nuisances (no outliers, spikes, drift or seasonality).
It scans every split of that segment (both sides >= 5 nights, like ``detect_change_points``) with
the likelihood-ratio statistic for a shift of the mean at a known sd,
``z_j = |mean(after) - mean(before)| / (sd sqrt(1/j + 1/(L - j)))``, and finds the step when
``max_j z_j`` clears the threshold that a quiet history of ``nights`` Gaussian nights crosses with
the goal's false-alarm rate (0.05 per 100 points: 8 % of 160-night histories), *and* its argmax
is within ±2 nights of the step. Each step is redrawn ``REPLICATES`` times (seeded); the share
found is its chance. Bit-constant (memory) steps have no noise: found.

It is a ceiling in the sense that matters for the goal (no nuisance, the neighbours given), not a
strict bound: under Student-t noise a rank or t-likelihood test beats the Gaussian one at the same
sd, so the detector can beat the oracle on single p99 steps. ``located`` drops the ±2 night
requirement: found at all, anywhere, which splits the loss into detection and location.

The nightly oracle (``score_nightly_oracle``) is told where the step is and the noise sd: on each
of the nights 4-7 after the step's first night (5 to 8 nights of the new level) it compares those
nights with the ``BEFORE_NIGHTS`` before the step (fewer when a step is nearer) by the known-sd z,
and alerts when ``|z|`` clears the two-sided threshold at the per-split false-alarm rate the
monitor's tail test uses. What it reaches is the share of steps any test of those nights could
alert within 7 nights at that rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
from fleet_histories import FleetHistory

MIN_SEGMENT = 5
TOLERANCE = 2
REPLICATES = 40
CALIBRATION_SERIES = 4000
FALSE_ALARMS_PER_100 = 0.05  # the goal's false-alarm rate, as the oracle's threshold


def _scan(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise (max z, argmax split) of the known-sd (1) mean-shift scan of each row."""
    n = values.shape[1]
    k = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    before = np.cumsum(values, axis=1)[:, k - 1]
    after = values.sum(axis=1, keepdims=True) - before
    z = np.abs(after / (n - k) - before / k) / np.sqrt(1.0 / k + 1.0 / (n - k))
    best = np.argmax(z, axis=1)
    return z[np.arange(len(values)), best], k[best]


def compute_threshold(rng: np.random.Generator, nights: int) -> float:
    """The max z that quiet Gaussian histories of ``nights`` cross at the goal's rate."""
    z_max, _ = _scan(rng.standard_normal((CALIBRATION_SERIES, nights)))
    share = FALSE_ALARMS_PER_100 * nights / 100.0
    return float(np.quantile(z_max, 1.0 - share))


@dataclass
class OracleScore:
    threshold: float
    found: float = 0.0  # expected steps found within ±2 nights
    located: float = 0.0  # expected steps found anywhere
    total: int = 0
    by_size: dict[str, list[float]] = field(default_factory=dict)
    by_kind: dict[str, list[float]] = field(default_factory=dict)

    def add(self, case: FleetHistory, size: float, found: float, located: float) -> None:
        self.found += found
        self.located += located
        self.total += 1
        for key, table in ((f"{abs(size):.0%}", self.by_size), (case.kind, self.by_kind)):
            entry = table.setdefault(key, [0.0, 0])
            entry[0] += found
            entry[1] += 1


def score_oracle(changed: Sequence[FleetHistory], seed: int) -> OracleScore:
    rng = np.random.default_rng(seed)
    nights = len(changed[0].values)
    score = OracleScore(compute_threshold(rng, nights))
    for case in changed:
        bounds = [0, *case.steps, len(case.values)]
        for i, (step, size) in enumerate(zip(case.steps, case.step_sizes, strict=True)):
            if case.noise_sd == 0.0:
                score.add(case, size, 1.0, 1.0)
                continue
            length, at = bounds[i + 2] - bounds[i], step - bounds[i]
            values = rng.standard_normal((REPLICATES, length))
            values[:, at:] += math.log1p(size) / case.noise_sd
            z_max, where = _scan(values)
            clears = z_max >= score.threshold
            near = np.abs(where - at) <= TOLERANCE
            score.add(case, size, float(np.mean(clears & near)), float(np.mean(clears)))
    return score


BEFORE_NIGHTS = 60
FIRST_LOOK, LAST_LOOK = 5, 8  # nights of the new level on the nights the oracle looks


def score_nightly_oracle(changed: Sequence[FleetHistory], seed: int,
                         alpha_per_split: float) -> tuple[float, float]:
    """(share of steps alerted within 7 nights, the |z| threshold)."""
    rng = np.random.default_rng(seed)
    threshold = float(NormalDist().inv_cdf(1.0 - alpha_per_split / 2.0))
    found, total = 0.0, 0
    for case in changed:
        bounds = [0, *case.steps, len(case.values)]
        for i, (step, size) in enumerate(zip(case.steps, case.step_sizes, strict=True)):
            total += 1
            if case.noise_sd == 0.0:
                found += 1.0
                continue
            before = min(BEFORE_NIGHTS, step - bounds[i])
            after = min(LAST_LOOK, bounds[i + 2] - step)
            noise = rng.standard_normal((REPLICATES, before + after))
            noise[:, before:] += math.log1p(size) / case.noise_sd
            old = noise[:, :before].mean(axis=1, keepdims=True)
            looks = np.arange(FIRST_LOOK, after + 1)
            new = np.cumsum(noise[:, before:], axis=1)[:, looks - 1] / looks
            z = np.abs(new - old) / np.sqrt(1.0 / before + 1.0 / looks)
            found += float(np.mean((z >= threshold).any(axis=1)))
    return found / total, threshold


def render_oracle(score: OracleScore) -> str:
    def shares(table: dict[str, list[float]]) -> str:
        return "  ".join(f"{key}: {hit / total:.0%}" for key, (hit, total) in table.items())
    sizes = dict(sorted(score.by_size.items(), key=lambda item: float(item[0].rstrip("%"))))
    return (f"oracle (told the noise sd and the neighbouring steps, Gaussian, no nuisances; "
            f"threshold z {score.threshold:.2f}): recall within ±2 "
            f"{score.found / score.total:.1%}, found anywhere {score.located / score.total:.1%}\n"
            f"oracle recall by step size: {shares(sizes)}\n"
            f"oracle recall by kind: {shares(score.by_kind)}")
