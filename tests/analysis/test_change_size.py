"""The size of a change point, on literal series with known answers: the last good config
version's runs against the runs since, as the ratio of geometric means over runs with the
t-test's interval (``compare_samples`` over one-value runs)."""

from __future__ import annotations

import math

import pytest

from tracker.analysis import compare_samples
from tracker.analysis.change_size import compute_change_size, compute_level, rounds_to_zero
from tracker.metrics import REGISTRY

TTFT_P99 = REGISTRY["ttft_p99_s"]
THROUGHPUT = REGISTRY["output_throughput_tokens_per_s"]

# The demo's story in TTFT p99 (s): two versions at ~0.31, prefix caching at ~0.11, then
# max_num_seqs 4 at ~0.58. The "before" of the last change is version 3 alone.
V1 = [0.334, 0.311, 0.318, 0.331, 0.321, 0.313]
V2 = [0.307, 0.305, 0.411, 0.321, 0.350, 0.364]
V3 = [0.107, 0.114, 0.138, 0.117, 0.122, 0.165]
V4 = [0.717, 0.704, 0.604, 0.605, 0.590, 0.578]
VERSIONS = ["v1"] * 6 + ["v2"] * 6 + ["v3"] * 6 + ["v4"] * 6


def _geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def test_the_before_level_is_the_last_good_versions_runs_alone() -> None:
    values = V1 + V2 + V3 + V4
    size = compute_change_size(values, VERSIONS, 18, TTFT_P99)
    assert size.index == 18 and size.on_boundary
    assert size.before_runs == range(12, 18) and size.after_runs == range(18, 24)
    assert size.before == pytest.approx(_geometric_mean(V3))
    assert size.after == pytest.approx(_geometric_mean(V4))
    expected = _geometric_mean(V4) / _geometric_mean(V3) - 1.0  # +401 %
    assert size.rel_change == pytest.approx(expected)
    assert size.rel_change == pytest.approx(4.01, abs=0.01)
    # the interval is the t-test over runs' own, and holds the estimate
    verdict = compare_samples([[v] for v in V3], [[v] for v in V4], TTFT_P99)
    assert size.interval == verdict.ci
    assert size.interval is not None and size.interval[0] < expected < size.interval[1]


def test_a_throughput_drop_is_sized_against_the_last_good_version() -> None:
    v1, v3 = [2543.0, 2604.0, 2600.0, 2509.0, 2602.0, 2575.0], \
        [4580.0, 4759.0, 4303.0, 4845.0, 4279.0, 4383.0]
    v4 = [2066.0, 2068.0, 2029.0, 2079.0, 2094.0, 2068.0]
    size = compute_change_size(v1 + v3 + v4, ["a"] * 6 + ["c"] * 6 + ["d"] * 6, 12, THROUGHPUT)
    assert size.rel_change == pytest.approx(_geometric_mean(v4) / _geometric_mean(v3) - 1.0)
    assert size.rel_change == pytest.approx(-0.54, abs=0.01)  # not the -25 % a mix would give


def test_without_a_version_boundary_the_before_side_is_the_segment_since_the_last_change(
) -> None:
    values = [1.0] * 5 + [2.0, 2.1, 1.9, 2.0, 2.0, 2.1, 1.9] + [3.0, 3.1, 2.9, 3.0, 3.0]
    size = compute_change_size(values, ["v"] * len(values), 12, TTFT_P99, start=5)
    assert not size.on_boundary
    assert size.before_runs == range(5, 12) and size.after_runs == range(12, 17)
    assert size.before == pytest.approx(_geometric_mean(values[5:12]))


def test_the_after_side_ends_at_the_next_change_point() -> None:
    values = V3 + V4 + [0.2] * 6
    versions = ["v3"] * 6 + ["v4"] * 6 + ["v5"] * 6
    size = compute_change_size(values, versions, 6, TTFT_P99, end=12)
    assert size.after_runs == range(6, 12)
    assert size.after == pytest.approx(_geometric_mean(V4))


def test_a_step_placed_one_run_past_the_boundary_is_measured_from_the_boundary() -> None:
    values = V3 + V4  # the new version starts at 6, and its first run is already high
    size = compute_change_size(values, ["v3"] * 6 + ["v4"] * 6, 7, TTFT_P99)
    assert size.index == 6 and size.on_boundary
    assert size.before == pytest.approx(_geometric_mean(V3))
    assert size.after == pytest.approx(_geometric_mean(V4))


def test_a_boundary_whose_runs_disagree_with_it_is_not_the_change() -> None:
    """A new version at 6 that changed nothing, then a step at 8 (the host): the two runs between
    sit on the old level, so the change stays at 8 and its before side is version 2's runs."""
    values = [0.1] * 6 + [0.1, 0.1] + [0.3] * 6
    versions = ["v1"] * 6 + ["v2"] * 8
    size = compute_change_size(values, versions, 8, TTFT_P99)
    assert size.index == 8 and not size.on_boundary
    assert size.before_runs == range(0, 8)
    assert size.before == pytest.approx(0.1) and size.after == pytest.approx(0.3)


def test_levels_are_geometric_means_and_means_where_a_value_is_zero() -> None:
    assert compute_level([1.0, 4.0]) == pytest.approx(2.0)
    assert compute_level([0.0, 4.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="at least one value"):
        compute_level([])


def test_a_bit_constant_step_of_0_8_mb_of_72_gib_shows_no_change() -> None:
    before, after = 77309411328.0, 77308572467.0  # the demo's AWQ version: -838,861 bytes
    memory = REGISTRY["gpu_memory_peak_bytes"]
    size = compute_change_size([before] * 6 + [after] * 6, ["a"] * 6 + ["b"] * 6, 6, memory)
    assert size.rel_change == pytest.approx(after / before - 1.0)
    assert f"{size.rel_change:+.1%}" == "-0.0%" and size.shows_no_change
    assert rounds_to_zero(-0.00049) and not rounds_to_zero(0.0006)
    same = compute_change_size([before] * 12, ["a"] * 6 + ["b"] * 6, 6, memory)
    assert same.shows_no_change


def test_bad_bounds_are_refused_with_the_values() -> None:
    with pytest.raises(ValueError, match=r"start=3, index=2, end=6"):
        compute_change_size([1.0] * 6, ["v"] * 6, 2, TTFT_P99, start=3)
    with pytest.raises(ValueError, match=r"versions \(5\) and values \(6\)"):
        compute_change_size([1.0] * 6, ["v"] * 5, 2, TTFT_P99)
