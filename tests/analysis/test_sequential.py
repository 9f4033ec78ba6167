"""The sequential gate: looking after every round keeps the false alarms under alpha, a clear
regression stops it early, a clear no-change stops it too, and what it cannot judge never
holds it."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from tracker.analysis import Outcome
from tracker.analysis.holm import compute_holm_levels
from tracker.analysis.policy import Look, RowEvidence
from tracker.analysis.sequential import (
    RowStatus,
    RunNoisePrior,
    SequentialGate,
    SequentialRow,
    SequentialState,
    compute_log_statistic,
    compute_run_noise_prior,
)

MEDIAN = SequentialRow("chat/ttft_median_s", "median", lower_is_better=True, min_effect=0.02)
THROUGHPUT = SequentialRow("chat/request_throughput_per_s", "mean", lower_is_better=False,
                           min_effect=0.02)
Round = dict[str, tuple[list[float], list[float]]]


def _round(rng: np.random.Generator, effect: float, *, sigma: float = 0.5, n: int = 200,
           drift: float = 0.01) -> Round:
    """One round: a base and a head run, each with its own run-level drift."""
    base_factor, head_factor = np.exp(drift * rng.standard_normal(2))
    base = 0.08 * base_factor * np.exp(sigma * rng.standard_normal(n))
    head = 0.08 * head_factor * (1.0 + effect) * np.exp(sigma * rng.standard_normal(n))
    speed = 10.0 * np.exp(drift * rng.standard_normal(2))
    return {MEDIAN.key: (base.tolist(), head.tolist()),
            THROUGHPUT.key: ([float(speed[0])], [float(speed[1]) / (1.0 + effect)])}


def _play(gate: SequentialGate, draw: object) -> SequentialState:
    for _ in range(gate.max_rounds):
        state = gate.observe(draw())  # type: ignore[operator]
        if state.decided:
            break
    return state


def _gate_on(seed: int, effect: float) -> SequentialState:
    rng = np.random.default_rng(seed)
    return _play(SequentialGate([MEDIAN, THROUGHPUT], max_rounds=8),
                 lambda: _round(rng, effect))


def test_looking_after_every_round_keeps_the_gate_false_alarm_rate_under_alpha() -> None:
    trials = 200
    flagged = sum(bool(_gate_on(seed, 0.0).regressed) for seed in range(trials))
    assert flagged / trials <= 0.05


def test_a_clear_30_percent_regression_stops_the_gate_early() -> None:
    played = [_gate_on(seed, 0.30) for seed in range(40)]
    assert all(state.regressed for state in played)
    assert np.mean([state.rounds for state in played]) <= 4.5
    assert max(state.rounds for state in played) < 8


def test_nothing_is_decided_after_one_round_however_large_the_change() -> None:
    gate = SequentialGate([MEDIAN], max_rounds=4)
    state = gate.observe(_round(np.random.default_rng(1), 3.0))
    assert not state.decided and state.rows[0].status is RowStatus.UNDECIDED
    verdict = state.rows[0].verdict
    assert verdict.outcome is Outcome.INCONCLUSIVE and verdict.ci is None
    assert verdict.rel_change is not None and verdict.rel_change > 2.0


def test_a_quiet_no_change_is_decided_before_the_last_round() -> None:
    rng = np.random.default_rng(3)
    state = _play(SequentialGate([MEDIAN, THROUGHPUT], max_rounds=8),
                  lambda: _round(rng, 0.0, sigma=0.01, drift=0.0005))
    assert state.decided and state.rounds < 8 and state.regressed == ()
    assert all(row.status is RowStatus.NO_REGRESSION for row in state.rows)
    assert all(row.verdict.outcome is Outcome.NO_CHANGE for row in state.rows)
    assert state.stop_reason == f"decided after {state.rounds} of 8 rounds"


def test_the_verdict_names_the_change_its_interval_and_the_round() -> None:
    rng = np.random.default_rng(11)
    state = _play(SequentialGate([MEDIAN], max_rounds=6), lambda: _round(rng, 0.5))
    assert state.decided and state.regressed == (MEDIAN.key,) and state.rounds <= 4
    verdict = state.rows[0].verdict
    assert verdict.regressed and verdict.rel_change is not None and verdict.ci is not None
    assert 0.0 < verdict.ci[0] < verdict.rel_change < verdict.ci[1]
    assert verdict.ci[0] < 0.5 < verdict.ci[1]  # the true change
    assert verdict.p_value is not None and verdict.p_value < 0.05
    runs = state.rounds
    assert (verdict.base_runs, verdict.head_runs, verdict.base_count) == (runs, runs, 200 * runs)
    assert f"round {runs}" in verdict.reason


def test_an_improvement_is_no_regression_and_said_so() -> None:
    rng = np.random.default_rng(5)
    state = _play(SequentialGate([MEDIAN], max_rounds=6), lambda: _round(rng, -0.4, sigma=0.2))
    assert state.decided and state.regressed == ()
    assert state.rows[0].verdict.outcome is Outcome.IMPROVEMENT


def test_a_p99_of_small_runs_is_judged_as_what_it_is_and_a_tiny_run_not_at_all() -> None:
    """The p99 of 60 requests is near the run's largest value: compared as such (the runs'
    spread is its noise), and the method says so; a run of 5 values has no p99 to speak of."""
    p99 = SequentialRow("chat/ttft_p99_s", "p99", lower_is_better=True, min_effect=0.05)
    tiny = SequentialRow("tiny/ttft_p99_s", "p99", lower_is_better=True, min_effect=0.05)
    rng = np.random.default_rng(2)

    def draw() -> Round:
        values = _round(rng, 0.5, sigma=0.2, n=60)[MEDIAN.key]
        return {MEDIAN.key: values, p99.key: values, tiny.key: (values[0][:5], values[1][:5])}

    state = _play(SequentialGate([MEDIAN, p99, tiny], max_rounds=6), draw)
    assert state.decided and MEDIAN.key in state.regressed
    small = state.rows[1].verdict
    assert "p99 of about 60 values a run: near the run's largest value" in small.method
    assert small.rel_change is not None and small.rel_change > 0.2
    unjudged = state.rows[2]
    assert unjudged.status is RowStatus.UNDECIDED
    assert unjudged.verdict.outcome is Outcome.INCONCLUSIVE and unjudged.verdict.p_value is None
    assert unjudged.verdict.reason == "inconclusive: p99 needs >= 8 values per run (got 5)"


def test_max_rounds_undecided_is_inconclusive_and_no_more_rounds_are_taken() -> None:
    gate = SequentialGate([THROUGHPUT], max_rounds=2)
    for base, head in ((10.0, 9.9), (10.0, 10.1)):
        state = gate.observe({THROUGHPUT.key: ([base], [head])})
    assert not state.decided and state.stop_reason == "max rounds reached (2)"
    assert state.rows[0].verdict.outcome is Outcome.INCONCLUSIVE
    with pytest.raises(ValueError, match="all 2 rounds were observed already"):
        gate.observe({THROUGHPUT.key: ([10.0], [10.0])})


def test_holm_rejects_step_down_on_literal_p_values() -> None:
    def holm(p_values: list[float], alpha: float) -> list[bool]:
        return list(compute_holm_levels(p_values, alpha).rejected)

    assert holm([0.01, 0.04, 0.03, 0.2], 0.05) == [True, False, False, False]
    assert holm([0.01, 0.02, 0.5], 0.06) == [True, True, False]
    assert holm([], 0.05) == []


def test_the_log_statistic_of_a_run() -> None:
    assert compute_log_statistic([4.0], "mean") == math.log(4.0)
    assert compute_log_statistic([1.0, 2.0, 3.0, 4.0], "mean") == pytest.approx(math.log(2.5))
    assert compute_log_statistic([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0], "median") \
        == pytest.approx(math.log(4.5))
    assert compute_log_statistic([0.0, 1.0], "mean") == "values must be finite and > 0 for a ratio"


def test_no_change_that_cannot_be_ruled_out_stops_when_more_rounds_would_not_show_one() -> None:
    """A 2 % regression cannot be ruled out at this noise in 8 rounds; the gate still stops
    early on most null trials, the rows futile: inconclusive, never a regression."""
    played = [_gate_on(seed, 0.0) for seed in range(40)]
    assert np.mean([state.rounds for state in played]) < 5.0
    stopped = [state for state in played if state.decided]
    assert len(stopped) >= 30
    for state in stopped:
        assert state.regressed == ()
        assert {row.status for row in state.rows} <= {RowStatus.FUTILE, RowStatus.NO_REGRESSION}
    futile = next(row for state in stopped for row in state.rows
                  if row.status is RowStatus.FUTILE)
    assert futile.verdict.outcome is Outcome.INCONCLUSIVE
    assert "more rounds would likely not show one (conditional power" in futile.verdict.reason


# --- a prior for the run-to-run noise -------------------------------------------------------

ONE_VALUE = SequentialRow("chat/output_throughput_per_s", "mean", lower_is_better=False,
                          min_effect=0.0)


def _null_false_alarm_rate(trials: int, shrink: float, seed: int = 7) -> float:
    """Looks after every round of a no-change gate whose prior comes from 10 earlier runs of the
    same noise (one value per run, 3 % run-to-run sd), its variance divided by ``shrink``."""
    rng = np.random.default_rng(seed)
    flagged = 0
    for _ in range(trials):
        earlier = 100.0 * np.exp(0.03 * rng.standard_normal(10))
        prior = compute_run_noise_prior([[float(v)] for v in earlier], "mean")
        assert prior is not None and prior.df == 9
        gate = SequentialGate([ONE_VALUE], max_rounds=6, prior={
            ONE_VALUE.key: RunNoisePrior(prior.variance / shrink, prior.df)})
        for _ in range(6):
            base, head = 100.0 * np.exp(0.03 * rng.standard_normal(2))
            state = gate.observe({ONE_VALUE.key: ([float(base)], [float(head)])})
            if state.decided:
                break
        flagged += bool(state.regressed)
    return flagged / trials


def test_a_prior_from_the_same_noise_keeps_the_false_alarm_rate_at_alpha_at_every_look() -> None:
    trials = 1500
    rate = _null_false_alarm_rate(trials, shrink=1.0)
    assert rate <= 0.05 + 2.0 * math.sqrt(0.05 * 0.95 / trials)


def test_a_prior_too_small_by_2x_raises_the_false_alarm_rate() -> None:
    assert _null_false_alarm_rate(800, shrink=2.0) > _null_false_alarm_rate(800, shrink=1.0)


def _prior_for(seed: int, rows: list[SequentialRow]) -> dict[str, RunNoisePrior]:
    rng = np.random.default_rng([seed, 10])
    earlier = [_round(rng, 0.0) for _ in range(5)]
    priors = {}
    for row in rows:
        runs = [side for played in earlier for side in played[row.key]]
        prior = compute_run_noise_prior(runs, row.statistic)
        assert prior is not None
        priors[row.key] = prior
    return priors


def test_with_a_prior_a_clear_regression_is_looked_at_after_one_round_and_confirmed_by_the_next(
        ) -> None:
    rng = np.random.default_rng(3)
    gate = SequentialGate([MEDIAN, THROUGHPUT], max_rounds=6,
                          prior=_prior_for(3, [MEDIAN, THROUGHPUT]))
    state = gate.observe(_round(rng, 0.30))
    # the prior gives a look after one round, but one look alone never fails the gate
    assert state.regressed == () and not state.decided
    assert state.rows[1].verdict.ci is not None and state.rows[1].verdict.ci[1] < 0
    state = gate.observe(_round(rng, 0.30))
    assert state.regressed == (THROUGHPUT.key,)  # confirmed by the second round's look
    # the median's +30 % is large and undecided: the gate plays on to explain it too
    assert not state.decided and state.holding == (MEDIAN.key,)
    state = gate.observe(_round(rng, 0.30))
    assert state.decided and state.rounds == 3 and state.regressed == (MEDIAN.key, THROUGHPUT.key)
    assert "pooled with 10 earlier runs" in state.rows[0].verdict.method
    assert "looks 1..6" in state.rows[0].verdict.method


def test_one_look_that_shows_a_regression_fails_only_once_the_next_look_shows_it_too() -> None:
    first = RowEvidence(key=MEDIAN.key, statistic="median", lower_is_better=True,
                        min_effect=0.0, looks=(Look(diff=0.3, se=0.01, df=10),),
                        max_rounds=6, prior_df=10)
    assert first.compute_p_worse() == 1.0  # alone, not at the last round
    confirmed = replace(first, looks=(*first.looks, Look(diff=0.3, se=0.01, df=12)))
    assert confirmed.compute_p_worse() < 1e-4
    undone = replace(first, looks=(*first.looks, Look(diff=0.0, se=0.01, df=12)))
    assert undone.compute_p_worse() > 0.4  # the next look did not show it: no regression
    last = replace(first, max_rounds=1)
    assert last.compute_p_worse() < 1e-4  # the last round's look stands alone
    fixed = replace(first, max_rounds=None)
    assert fixed.compute_p_worse() == first.looks[0].compute_p_worse()


def test_a_prior_needs_three_runs_whose_statistic_can_be_had() -> None:
    assert compute_run_noise_prior([[1.0], [1.1]], "mean") is None
    assert compute_run_noise_prior([[1.0] * 5] * 5, "p99") is None  # p99 of 5: too few
    prior = compute_run_noise_prior([[1.0], [math.e], [math.e ** 2]], "mean")
    assert prior is not None and prior.df == 2 and prior.variance == pytest.approx(1.0)


def test_a_prior_for_a_row_not_in_the_family_or_with_no_df_is_refused() -> None:
    with pytest.raises(ValueError, match="not in the family: other"):
        SequentialGate([MEDIAN], prior={"other": RunNoisePrior(0.01, 4)})
    with pytest.raises(ValueError, match="df >= 1"):
        RunNoisePrior(0.01, 0)


def test_runs_that_agree_exactly_rule_nothing_out_and_do_not_hide_a_later_drop() -> None:
    # a capacity read off a ladder: two rounds of 16 req/s on both sides show no noise at all,
    # which is no evidence that a change is ruled out; the head's later drop to 4 is still seen
    capacity = SequentialRow("ladder/capacity_at_slo_req_per_s", "mean", False, 0.05)
    gate = SequentialGate([capacity], max_rounds=6)
    for _ in range(2):
        state = gate.observe({capacity.key: ([16.0], [16.0])})
    assert state.rows[0].status is RowStatus.UNDECIDED and not state.decided
    for head in (4.0, 4.0, 4.0):
        state = gate.observe({capacity.key: ([16.0], [head])})
    verdict = state.rows[0].verdict
    assert verdict.ci is not None and verdict.ci[0] < verdict.ci[1]  # a real interval
    assert verdict.rel_change is not None and verdict.rel_change < -0.3
    assert "-0.0%" not in verdict.reason
