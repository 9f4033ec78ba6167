"""The one comparison policy on literal and seeded runs: the run is the unit, the history gives
the noise, one budget per family, an outcome never contradicts its interval, and the client's
timing error is an error bar."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tracker.analysis import Outcome
from tracker.analysis.holm import compute_holm_levels
from tracker.analysis.noise import RunNoisePrior, compute_run_noise_prior
from tracker.analysis.policy import RowEvidence, RunSample, compare_runs, judge_rows
from tracker.analysis.timing import TimingBound
from tracker.metrics import get_metric

TTFT = get_metric("ttft_median_s")
THROUGHPUT = get_metric("request_throughput_per_s")


def _run(rng: np.random.Generator, level: float, *, n: int = 400, drift: float = 0.05,
         timing: TimingBound | None = None) -> RunSample:
    """One run: log-normal requests around ``level`` times a run-level drift of its own."""
    factor = math.exp(drift * rng.standard_normal())
    values = level * factor * np.exp(0.4 * rng.standard_normal(n))
    return RunSample(tuple(values.tolist()), timing or TimingBound(),
                     0.0 if timing is None else timing.lag_s)


def _history(rng: np.random.Generator, runs: int = 6) -> RunNoisePrior:
    prior = compute_run_noise_prior([list(_run(rng, 0.1).values) for _ in range(runs)],
                                    "median")
    assert prior is not None
    return prior


def test_holm_levels_on_literal_p_values() -> None:
    found = compute_holm_levels([0.001, 0.04, 0.012, 0.3], 0.05)
    assert found.rejected == (True, False, True, False)
    # ranks: 0.001 at 0.05/4, 0.012 at 0.05/3, then 0.04 fails 0.05/2: the rest at 0.05/2
    assert found.levels == pytest.approx((0.0125, 0.025, 0.05 / 3, 0.025))
    assert found.adjusted == pytest.approx((0.004, 0.08, 0.036, 0.3))


def test_two_runs_of_one_version_never_read_as_a_change_with_the_history_noise() -> None:
    """Two runs of the same config, 400 requests each and 5 % run-to-run drift: request-level
    sampling alone would call a difference most of the time; the policy, with the noise of six
    earlier runs, at most at its 5 % budget."""
    rng = np.random.default_rng(7)
    flagged = 0
    for _ in range(200):
        prior = _history(rng)
        row = compare_runs([_run(rng, 0.1)], [_run(rng, 0.1)], TTFT, min_effect=0.02,
                           prior=prior)
        (judged,) = judge_rows([row], 0.05)
        flagged += judged.verdict.outcome in (Outcome.REGRESSION, Outcome.IMPROVEMENT)
    assert flagged / 200 <= 0.05


def test_one_run_a_side_without_history_decides_only_far_beyond_one_runs_sampling() -> None:
    rng = np.random.default_rng(3)
    small = compare_runs([_run(rng, 0.1)], [_run(rng, 0.103)], TTFT, min_effect=0.02)
    (verdict,) = (j.verdict for j in judge_rows([small], 0.05))
    assert verdict.outcome is Outcome.INCONCLUSIVE and "one run a side" in verdict.method
    large = compare_runs([_run(rng, 0.127)], [_run(rng, 0.604)], TTFT, min_effect=0.02)
    (judged,) = judge_rows([large], 0.05)
    assert judged.regressed and judged.verdict.rel_change == pytest.approx(3.75, rel=0.2)


def test_one_value_per_run_and_one_run_a_side_is_inconclusive_and_says_what_would_decide() -> None:
    row = compare_runs([RunSample((10.0,))], [RunSample((5.0,))], THROUGHPUT, min_effect=0.02)
    (judged,) = judge_rows([row], 0.05)
    assert judged.verdict.outcome is Outcome.INCONCLUSIVE and not judged.regressed
    assert judged.verdict.rel_change == pytest.approx(-0.5)
    assert "needs 2 runs on a side, or 3 earlier runs" in judged.verdict.reason


def test_an_outcome_never_contradicts_its_interval() -> None:
    """Families of 12 rows, some shifted: a regression's interval lies above no change, an
    improvement's below it, and a row left undecided has an interval that holds no change or
    reaches past its minimum effect."""
    rng = np.random.default_rng(11)
    for _ in range(30):
        rows: list[RowEvidence] = []
        for k in range(12):
            shift = rng.choice([0.0, 0.0, 0.03, -0.03, 0.3])
            base = [_run(rng, 0.1) for _ in range(3)]
            head = [_run(rng, 0.1 * (1 + shift)) for _ in range(3)]
            rows.append(compare_runs(base, head, TTFT, key=str(k), min_effect=0.02))
        for judged in judge_rows(rows, 0.05):
            verdict = judged.verdict
            assert verdict.ci is not None and verdict.rel_change is not None
            low, high = verdict.ci
            assert low <= verdict.rel_change <= high
            if verdict.outcome is Outcome.REGRESSION:
                assert low > 0.0
            elif verdict.outcome is Outcome.IMPROVEMENT:
                assert high < 0.0
            elif verdict.outcome is Outcome.INCONCLUSIVE:
                assert low <= 0.0 <= high or high >= 0.02 or low <= -0.02


def test_a_change_only_the_client_lag_stands_in_the_way_of_is_within_the_timing_error() -> None:
    rng = np.random.default_rng(5)
    lag = TimingBound(absolute=0.05, lag_s=0.05)
    base = [_run(rng, 0.100, drift=0.01, timing=lag) for _ in range(4)]
    head = [_run(rng, 0.160, drift=0.01, timing=lag) for _ in range(4)]
    (judged,) = judge_rows([compare_runs(base, head, TTFT, min_effect=0.02)], 0.05)
    assert not judged.regressed and judged.within_timing_error
    assert "could not measure" in judged.verdict.reason and "50 ms" in judged.verdict.reason
    far = [_run(rng, 0.600, drift=0.01, timing=lag) for _ in range(4)]
    (judged,) = judge_rows([compare_runs(base, far, TTFT, min_effect=0.02)], 0.05)
    assert judged.regressed and not judged.within_timing_error
    low, _ = judged.verdict.ci or (0.0, 0.0)
    assert low > 0.5  # (0.6 - 0.05) / (0.1 + 0.05) - 1 = +267 % at worst, less the noise


def test_a_throughput_the_client_held_back_is_never_an_improvement_of_the_head() -> None:
    """A starved client only holds a rate back: the head's rate could be higher than measured,
    so a drop survives only beyond what the lag could cost."""
    held = TimingBound(relative_up=0.5, lag_s=0.1)
    base = [RunSample((v,)) for v in (10.0, 10.2, 9.9)]
    head = [RunSample((v,), held, 0.1) for v in (8.0, 8.1, 7.9)]
    (judged,) = judge_rows([compare_runs(base, head, THROUGHPUT, min_effect=0.02)], 0.05)
    assert not judged.regressed and judged.within_timing_error
    assert judged.verdict.rel_change == pytest.approx(-0.2, abs=0.01)


def _top_heavy(rng: np.random.Generator, largest: float, n: int = 16) -> RunSample:
    """A small run whose p99 is its largest value, ``largest`` exactly, standing well above its
    other values (as a 16-request run's largest TPOT does: 7.6 ms over 5.8, 5.7, 5.3 ms)."""
    values = np.sort(largest * np.exp(-0.25 - np.abs(0.15 * rng.standard_normal(n))))
    values[-1] = largest
    return RunSample(tuple(values.tolist()))


P99 = get_metric("tpot_p99_s")


def test_two_runs_a_side_that_agree_by_chance_are_not_precision() -> None:
    """Two runs a side of 16 requests, each side's two p99s (their largest values) alike to
    0.1 % by chance, 17 % apart between the sides: with only the runs' own spread the t over
    runs calls a change (what a same-config gate on the simulator once showed as "improvement");
    the p99's own sampling variance from its requests is a floor under the run-to-run noise."""
    rng = np.random.default_rng(3)
    base = [_top_heavy(rng, 7.367e-3), _top_heavy(rng, 7.376e-3)]
    head = [_top_heavy(rng, 6.111e-3), _top_heavy(rng, 6.142e-3)]
    row = compare_runs(base, head, P99, statistic="p99", min_effect=0.05)
    (judged,) = judge_rows([row], 0.05)
    assert judged.verdict.outcome is Outcome.INCONCLUSIVE, judged.verdict.reason
    floor = row.looks[0].se
    spread = float(np.std([math.log(7.367), math.log(7.376)], ddof=1))
    assert floor > 20 * spread  # the floor, not the runs' agreement, sets the noise


def test_the_sampling_floor_leaves_a_real_change_decided() -> None:
    """Three runs a side of 400 requests, +30 % on the median: the floor (about 2 % a run) is far
    under the change, so it is still a regression."""
    rng = np.random.default_rng(5)
    base = [_run(rng, 0.1) for _ in range(3)]
    head = [_run(rng, 0.13) for _ in range(3)]
    (judged,) = judge_rows([compare_runs(base, head, TTFT, min_effect=0.02)], 0.05)
    assert judged.verdict.outcome is Outcome.REGRESSION, judged.verdict.reason
