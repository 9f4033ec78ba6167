"""The Overview lists only changes in the worse direction as regressions."""

from __future__ import annotations

import pandas as pd

from tracker.dashboard.triage import split_by_direction


def test_improvements_and_unknown_directions_are_not_listed_as_regressions() -> None:
    frame = pd.DataFrame({"id": [1, 2, 3, 4], "regressed": [False, True, None, True],
                          "rel_change": [-0.65, 0.12, 0.3, 0.86]})
    worse, other = split_by_direction(frame)
    assert list(worse["id"]) == [4, 2]  # the largest change first
    assert sorted(other["id"]) == [1, 3]


def test_an_empty_frame_splits_into_two_empty_frames() -> None:
    frame = pd.DataFrame({"id": [], "regressed": [], "rel_change": []})
    worse, other = split_by_direction(frame)
    assert worse.empty and other.empty
