"""The capacity frontier on literal series with known answers: the Pareto front, Kneedle's knee,
readings off the front, probe names, and one version's runs combined."""

from __future__ import annotations

import pytest

from tracker.analysis.frontier import (
    FrontierPoint,
    ProbeLoad,
    combine_runs,
    compute_frontier,
    compute_knee,
    compute_latency_at_throughput,
    compute_pareto_front,
    parse_probe_load,
)


def point(rate: float, throughput: float, latency_s: float) -> FrontierPoint:
    return FrontierPoint(ProbeLoad(f"{rate:g}rps", rate, None), throughput, latency_s)


# a rate ladder that saturates near 32 req/s: past it, throughput falls and latency explodes
SATURATING = (point(4, 4, 0.020), point(8, 8, 0.021), point(16, 16, 0.023),
              point(32, 30, 0.030), point(64, 32, 0.200), point(128, 31, 0.500))


def throughputs(points: tuple[FrontierPoint, ...]) -> list[float]:
    return [p.throughput_req_per_s for p in points]


def test_the_pareto_front_drops_a_probe_past_saturation() -> None:
    front = compute_pareto_front(SATURATING)
    assert throughputs(front) == [4, 8, 16, 30, 32]  # 128 req/s: less throughput, more latency


def test_a_point_with_equal_throughput_and_more_latency_is_dominated() -> None:
    front = compute_pareto_front((point(8, 10, 0.05), point(16, 10, 0.08), point(4, 4, 0.02)))
    assert [(p.throughput_req_per_s, p.latency_s) for p in front] == [(4, 0.02), (10, 0.05)]


def test_the_knee_is_the_point_farthest_below_the_scaled_chord() -> None:
    # scaled: x - y = 0.137, 0.412, 0.873 for the inner points: the knee is 30 req/s at 30 ms
    knee = compute_knee(compute_pareto_front(SATURATING))
    assert knee is not None and knee.load.rate_per_s == 32 and knee.throughput_req_per_s == 30


def test_a_straight_line_or_two_points_have_no_knee() -> None:
    line = (point(1, 1, 0.01), point(2, 2, 0.02), point(3, 3, 0.03))
    assert compute_knee(line) is None
    assert compute_knee(SATURATING[:2]) is None
    concave = (point(1, 1, 0.01), point(2, 2, 0.05), point(3, 3, 0.06))  # above the chord
    assert compute_knee(concave) is None


def test_the_knee_moves_left_when_the_server_saturates_earlier() -> None:
    slower = (point(4, 4, 0.020), point(8, 8, 0.024), point(16, 14, 0.040),
              point(32, 15, 0.300), point(64, 15.5, 0.900))
    before = compute_frontier(SATURATING).knee
    after = compute_frontier(slower).knee
    assert before is not None and after is not None
    assert after.throughput_req_per_s == 14 < before.throughput_req_per_s


def test_latency_at_a_fixed_throughput_is_interpolated_on_the_front() -> None:
    front = compute_pareto_front(SATURATING)
    assert compute_latency_at_throughput(front, 23) == pytest.approx(0.0265)  # 16..30 req/s
    assert compute_latency_at_throughput(front, 4) == pytest.approx(0.020)
    assert compute_latency_at_throughput(front, 40) is None  # never extrapolated
    assert compute_latency_at_throughput(front, 2) is None


@pytest.mark.parametrize(("name", "expected"), [
    ("ladder@8rps", ProbeLoad("8rps", 8.0, None)),
    ("ladder@0.5rps", ProbeLoad("0.5rps", 0.5, None)),
    ("ladder@c4", ProbeLoad("c4", None, 4)),
    ("ladder", None),  # the sweep's own result
    ("ladder@8rps-b0.5", None),  # a burst stage
    ("ladder@c4@1-worker", None),  # a rerun
    ("ladder@0rps", None),
    ("ladder@c0", None),
    ("other@8rps", None),
])
def test_probe_names_give_the_load_asked_for(name: str, expected: ProbeLoad | None) -> None:
    assert parse_probe_load("ladder", name) == expected


def test_a_versions_runs_combine_by_median_per_load() -> None:
    runs = [(point(8, 8, 0.02), point(16, 15, 0.03)),
            (point(8, 7, 0.04), point(16, 16, 0.05)),
            (point(8, 9, 0.03),)]  # its sweep stopped early
    combined = combine_runs(runs)
    assert [(p.load.label, p.throughput_req_per_s, p.latency_s) for p in combined] == [
        ("8rps", 8, 0.03), ("16rps", 15.5, pytest.approx(0.04))]


def test_the_frontier_keeps_every_point_in_load_order() -> None:
    frontier = compute_frontier(tuple(reversed(SATURATING)))
    assert [p.load.rate_per_s for p in frontier.points] == [4, 8, 16, 32, 64, 128]
    assert len(frontier.front) == 5 and frontier.knee is not None
