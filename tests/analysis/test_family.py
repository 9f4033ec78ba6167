"""judge_family: Holm's step-down over a gate's regression p-values, on literal and seeded inputs."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from tracker.analysis import FamilyJudgement, compare_samples, judge_family
from tracker.analysis.holm import compute_holm_levels
from tracker.metrics import REGISTRY

TTFT = REGISTRY["ttft_median_s"]


def _run(rng: random.Random, n: int, scale: float = 1.0) -> list[float]:
    return [0.08 * scale * rng.lognormvariate(0.0, 0.5) for _ in range(n)]


def test_holm_adjusts_like_the_textbook() -> None:
    # p sorted 0.01, 0.02, 0.03, 0.04 (m = 4): 4*0.01, 3*0.02, 2*0.03, 1*0.04, made monotone
    levels = compute_holm_levels([0.03, 0.01, 0.04, 0.02], 0.05)
    assert levels.adjusted == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert levels.rejected == (False, True, False, False)  # 0.01 <= 0.05/4; then 0.02 > 0.05/3
    assert compute_holm_levels([0.5, 0.9], 0.05).adjusted == pytest.approx([1.0, 1.0])
    assert compute_holm_levels([], 0.05).adjusted == ()


def test_a_family_refuses_a_p_value_outside_zero_one() -> None:
    verdict = compare_samples([0.1, 0.11, 0.12], [0.1, 0.11, 0.13], TTFT)
    with pytest.raises(ValueError, match="p-values must lie in"):
        judge_family([verdict, replace(verdict, p_value=1.5)])


def test_a_bad_alpha_is_refused() -> None:
    with pytest.raises(ValueError, match="alpha must be"):
        judge_family([], alpha=0.0)


def test_an_empty_family_has_no_regression() -> None:
    judgement = judge_family([])
    assert judgement == FamilyJudgement((), (), 0.05, 0)
    assert not judgement.regressed


def test_holm_keeps_48_null_comparisons_quiet_and_flags_one_true_regression() -> None:
    rng = random.Random(2026)
    null = [compare_samples(_run(rng, 400), _run(rng, 400), TTFT, seed=i) for i in range(48)]
    quiet = judge_family(null)
    assert quiet.regressions == () and quiet.tested == 48
    assert all(p is not None and p >= 0.05 for p in quiet.adjusted_p_values)
    true = compare_samples(_run(rng, 400), _run(rng, 400, scale=1.5), TTFT)
    assert true.regressed
    loud = judge_family([*null[:20], true, *null[20:]])
    assert loud.regressions == (20,) and loud.regressed


def test_a_verdict_that_is_not_a_regression_on_its_own_stays_out() -> None:
    rng = random.Random(3)
    base = _run(rng, 2000)
    faster = compare_samples(base, [v * 0.6 for v in _run(rng, 2000)], TTFT)  # an improvement
    assert faster.improved
    assert judge_family([faster]).regressions == ()


def test_verdicts_without_a_p_value_spend_no_budget() -> None:
    rng = random.Random(4)
    unmeasured = compare_samples([1.0], [2.0], TTFT)  # too few values: nothing estimated
    assert unmeasured.p_value is None
    true = compare_samples(_run(rng, 400), _run(rng, 400, scale=1.3), TTFT)
    judgement = judge_family([unmeasured, true])
    assert judgement.tested == 1
    assert judgement.adjusted_p_values[0] is None
    assert judgement.regressions == (1,)
