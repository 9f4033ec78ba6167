"""compare_samples: the four outcomes, the direction, the methods, seeded inputs with known answers."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tracker.analysis import Outcome, compare_samples
from tracker.metrics import REGISTRY

TTFT = REGISTRY["ttft_median_s"]  # lower is better, judged by the median
THROUGHPUT = REGISTRY["output_throughput_tokens_per_s"]  # higher is better, one value per run


def _latencies(seed: int, n: int, scale: float = 1.0, sigma: float = 0.1) -> list[float]:
    rng = random.Random(seed)
    return [0.05 * scale * rng.lognormvariate(0.0, sigma) for _ in range(n)]


def test_identical_samples_give_no_change() -> None:
    values = _latencies(1, 800)
    verdict = compare_samples(values, list(values), TTFT)
    assert verdict.outcome is Outcome.NO_CHANGE
    assert verdict.rel_change == pytest.approx(0.0, abs=1e-12)
    # the one-sided p-value of "head is worse": identical sides sit at the middle of the null
    assert verdict.p_value == pytest.approx(0.5, abs=0.01)
    assert not verdict.regressed and not verdict.improved


def test_a_huge_latency_increase_is_a_regression_when_lower_is_better() -> None:
    verdict = compare_samples(_latencies(1, 300), _latencies(2, 300, scale=1.5), TTFT)
    assert verdict.outcome is Outcome.REGRESSION and verdict.regressed
    assert verdict.rel_change == pytest.approx(0.5, abs=0.05)
    assert verdict.ci is not None and verdict.ci[0] > 0.4
    assert verdict.p_value is not None and verdict.p_value < 1e-6


def test_the_same_increase_is_an_improvement_when_higher_is_better() -> None:
    verdict = compare_samples(_latencies(1, 300), _latencies(2, 300, scale=1.5), THROUGHPUT,
                              statistic="median")
    assert verdict.outcome is Outcome.IMPROVEMENT and verdict.improved


def test_a_throughput_drop_over_runs_is_a_regression_when_higher_is_better() -> None:
    base = [[101.0], [99.0], [100.5], [99.5]]
    head = [[80.0], [81.0], [79.0], [80.5]]
    verdict = compare_samples(base, head, THROUGHPUT)
    assert verdict.outcome is Outcome.REGRESSION
    assert verdict.method.startswith("t-test over runs")
    assert verdict.rel_change == pytest.approx(-0.2, abs=0.01)
    assert verdict.base_runs == 4 and verdict.head_runs == 4


def test_one_value_per_side_is_inconclusive_and_asks_for_runs() -> None:
    verdict = compare_samples([[100.0]], [[50.0]], THROUGHPUT)
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert verdict.runs_needed is not None and verdict.runs_needed >= 2
    assert verdict.p_value is None


def test_a_p99_from_too_few_requests_is_inconclusive_with_the_runs_that_would_do() -> None:
    verdict = compare_samples(_latencies(1, 50), _latencies(2, 50, scale=3.0), TTFT, statistic="p99")
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "needs >= 500" in verdict.reason
    assert verdict.runs_needed == 10


def test_noisy_small_samples_are_inconclusive_rather_than_no_change() -> None:
    verdict = compare_samples(_latencies(1, 20, sigma=0.6), _latencies(2, 20, sigma=0.6), TTFT)
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert verdict.runs_needed is not None and verdict.runs_needed > 1


def test_a_significant_change_below_the_minimum_effect_is_no_change() -> None:
    base = _latencies(1, 4000, sigma=0.02)
    head = [v * 1.01 for v in _latencies(2, 4000, sigma=0.02)]
    verdict = compare_samples(base, head, TTFT)  # default min effect 2 %
    assert verdict.p_value is not None and verdict.p_value < 0.01
    assert verdict.outcome is Outcome.NO_CHANGE
    strict = compare_samples(base, head, TTFT, min_effect=0.005)
    assert strict.outcome is Outcome.REGRESSION


def test_a_tail_only_regression_is_caught_by_p99_not_by_the_median() -> None:
    rng = random.Random(11)
    base = [rng.lognormvariate(0.0, 0.25) for _ in range(3000)]
    cut = sorted(base)[int(0.95 * len(base))]
    head_raw = [rng.lognormvariate(0.0, 0.25) for _ in range(3000)]
    head = [v if v <= cut else cut + (v - cut) * 2.0 for v in head_raw]
    assert compare_samples(base, head, TTFT, statistic="p99").regressed
    assert not compare_samples(base, head, TTFT, statistic="median").regressed


def test_repeated_runs_count_run_to_run_drift_as_noise() -> None:
    rng = random.Random(5)
    # drift between runs, and no order between the configs: one head run is the slowest,
    # the other sits between the two base runs
    factors = (0.92, 1.06, 1.0, 0.98)

    def run(factor: float) -> list[float]:
        return [factor * rng.lognormvariate(0.0, 0.05) for _ in range(300)]

    base = [run(factors[0]), run(factors[2])]
    head = [run(factors[1]), run(factors[3])]
    pooled = compare_samples([v for r in base for v in r], [v for r in head for v in r], TTFT)
    by_run = compare_samples(base, head, TTFT)
    assert pooled.regressed  # treating requests as independent fakes significance
    assert not by_run.regressed
    assert by_run.method.startswith("t-test over runs")


def test_a_p99_verdict_is_reproducible() -> None:
    base, head = _latencies(1, 600, sigma=0.3), _latencies(2, 600, sigma=0.3)
    first = compare_samples(base, head, TTFT, statistic="p99", seed=3)
    again = compare_samples(base, head, TTFT, statistic="p99", seed=3)
    assert first == again


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"statistic": "p95"}, "statistic must be one of"),
    ({"confidence": 1.5}, "confidence must be"),
    ({"min_effect": -0.1}, "min_effect must be"),
])
def test_bad_arguments_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compare_samples([1.0] * 10, [1.0] * 10, TTFT, **kwargs)  # type: ignore[arg-type]


def test_non_finite_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        compare_samples([1.0, float("nan")], [1.0, 2.0], TTFT)


def test_the_metric_says_which_way_is_worse() -> None:
    base, head = [[100.0], [101.0], [99.0]], [[120.0], [121.0], [119.0]]
    assert compare_samples(base, head, REGISTRY["request_throughput_per_s"]).improved
    slower = compare_samples(base, head, REGISTRY["e2el_median_s"])
    assert slower.regressed and slower.lower_is_better


def test_the_statistic_defaults_to_the_metrics_own() -> None:
    base, head = _latencies(1, 600, sigma=0.3), _latencies(2, 600, scale=1.3, sigma=0.3)
    by_metric = compare_samples(base, head, REGISTRY["ttft_p99_s"])
    assert by_metric.statistic == "p99"
    assert by_metric == compare_samples(base, head, TTFT, statistic="p99")
    assert compare_samples([[1.0], [2.0]], [[1.0], [2.0]], THROUGHPUT).statistic == "mean"
    with pytest.raises(ValueError, match="statistic must be one of"):
        compare_samples(base, head, REGISTRY["ttft_std_s"])  # a spread is not compared


def _lognormal_runs(rng: np.random.Generator, n: int, scale: float = 1.0) -> list[float]:
    return (0.08 * scale * np.exp(0.5 * rng.standard_normal(n))).tolist()


def test_a_five_percent_median_shift_of_1000_requests_is_flagged_most_of_the_time() -> None:
    # the best possible test flags it 70 % of the time at sigma 0.5 (bench/gate_calibration.py)
    rng = np.random.default_rng(2026)
    flagged = [compare_samples(_lognormal_runs(rng, 1000), _lognormal_runs(rng, 1000, 1.05),
                               TTFT) for _ in range(40)]
    assert sum(v.regressed for v in flagged) >= 20  # expected 27; 20 is 2.5 sd below
    assert all(v.method.startswith("efficient-score rank test") for v in flagged)


def test_identical_seeded_sides_pass() -> None:
    rng = np.random.default_rng(7)
    verdicts = [compare_samples(_lognormal_runs(rng, 1000), _lognormal_runs(rng, 1000), metric)
                for _ in range(40) for metric in (TTFT, REGISTRY["ttft_p99_s"])]
    assert sum(v.regressed for v in verdicts) <= 9  # 5 % of 80 is 4; 9 is beyond 2.5 sd


def test_a_p99_only_regression_is_caught_by_the_tail_test_not_by_the_median() -> None:
    rng = np.random.default_rng(11)
    base, head = np.array(_lognormal_runs(rng, 5000)), np.array(_lognormal_runs(rng, 5000))
    cut = np.quantile(base, 0.97)
    head = np.where(head <= cut, head, cut + (head - cut) * 1.6)  # the slowest 3 % only
    tail = compare_samples(base.tolist(), head.tolist(), REGISTRY["ttft_p99_s"])
    assert tail.regressed and tail.method.startswith("exceedance test")
    assert tail.rel_change is not None and 0.1 < tail.rel_change < 0.4
    median = compare_samples(base.tolist(), head.tolist(), TTFT)
    assert not median.regressed


def test_a_p99_only_regression_of_1000_requests_is_flagged_by_the_p99_verdict_alone() -> None:
    # the slowest 3 % stretched so that the p99 grows by 20 %: the exceedance test flags it
    # about 55 % of the time at 1,000 requests per side; the median verdict about 5 %
    rng = np.random.default_rng(15)
    cut, p99 = 0.08 * math.exp(0.5 * 1.8808), 0.08 * math.exp(0.5 * 2.3263)
    stretch = (1.2 * p99 - cut) / (p99 - cut)
    tail = median = 0
    for _ in range(40):
        base, head = np.array(_lognormal_runs(rng, 1000)), np.array(_lognormal_runs(rng, 1000))
        head = np.where(head <= cut, head, cut + (head - cut) * stretch)
        verdict = compare_samples(base.tolist(), head.tolist(), REGISTRY["ttft_p99_s"])
        assert verdict.method.startswith("exceedance test")
        tail += verdict.regressed
        median += compare_samples(base.tolist(), head.tolist(), TTFT).regressed
    assert tail >= 14  # expected 22; 14 is 2.5 sd below
    assert median <= 6  # expected 2


def test_a_throughput_is_judged_in_its_higher_is_better_direction() -> None:
    base = [[100.0], [101.0], [99.0], [100.5]]
    lower = compare_samples(base, [[95.0], [96.0], [94.5], [95.5]], THROUGHPUT)
    higher = compare_samples(base, [[105.0], [106.0], [104.5], [105.5]], THROUGHPUT)
    assert lower.regressed and not lower.lower_is_better
    assert lower.p_value is not None and lower.p_value < 0.001  # p of "head is worse": lower
    assert higher.improved
    assert higher.p_value is not None and higher.p_value > 0.999


def test_the_interval_ends_are_one_sided_bounds_consistent_with_the_test() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        verdict = compare_samples(_lognormal_runs(rng, 1000), _lognormal_runs(rng, 1000, 1.03),
                                  TTFT)
        assert verdict.ci is not None and verdict.p_value is not None
        assert (verdict.ci[0] > 0.0) == (verdict.p_value < 0.05)


def test_a_p99_interval_excludes_0_exactly_when_the_exceedance_test_rejects() -> None:
    rng = np.random.default_rng(8)
    for _ in range(20):
        verdict = compare_samples(_lognormal_runs(rng, 1000), _lognormal_runs(rng, 1000, 1.05),
                                  REGISTRY["ttft_p99_s"])
        assert verdict.ci is not None and verdict.p_value is not None
        assert verdict.method.startswith("exceedance test")
        assert (verdict.ci[0] > 0.0) == (verdict.p_value < 0.05)


@pytest.mark.parametrize("scale", [1e-300, 1e300])
def test_the_verdict_is_the_same_at_any_scale_even_near_the_float_limits(scale: float) -> None:
    rng = random.Random(8)
    base = [0.08 * math.exp(0.3 * rng.gauss(0.0, 1.0)) for _ in range(300)]
    head = [0.096 * math.exp(0.3 * rng.gauss(0.0, 1.0)) for _ in range(300)]
    metric = REGISTRY["request_throughput_per_s"]  # a mean: its variance overflowed at 1e300
    plain = compare_samples(base, head, metric)
    scaled = compare_samples([v * scale for v in base], [v * scale for v in head], metric)
    assert plain.outcome is Outcome.IMPROVEMENT and scaled.outcome is plain.outcome
    assert scaled.rel_change == pytest.approx(plain.rel_change, rel=1e-9)
    assert scaled.base_value == pytest.approx(plain.base_value * scale, rel=1e-9)  # as given
