"""How big a change point is: the level before it against the level after, over runs.

The detector (and the nightly monitor) says *where* a series' level moved. This module says *by
how much*, the way every other comparison of runs does. The run is the unit, with one value per
run, and the estimate is the ratio of the two sides' geometric means with its interval, computed
by ``compare_samples`` over one-value runs (its t-test over runs). The sides:

- **before**: the last good config version's runs, i.e. the runs before the change point that
  share the config version of the run just before it (not earlier than the previous change
  point). A change that does not sit on a config-version boundary has the whole segment from
  the previous change point as its before side. An older version's runs never dilute the level
  the change left: the gate compares the last good version alone too.
- **after**: the runs from the change point up to the next change point, or the end.

The detector may place a step a run or two off the version boundary that caused it. A change
point within ``ATTRIBUTION_TOLERANCE`` runs of a boundary is measured from the boundary when
the runs between the two sit on the side the boundary puts them.

The levels are the geometric means (the arithmetic means when a value is 0 or negative, as the
comparison then does), in the metric's own units. Pure, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tracker.analysis.attribution import ATTRIBUTION_TOLERANCE
from tracker.analysis.compare import compare_samples
from tracker.metrics import Metric

# A relative change below this reads "+0.0 %" where a change is shown (one decimal of a
# percent): no record claims a change that its own line cannot show.
SHOWN_RESOLUTION = 0.0005


@dataclass(frozen=True, slots=True)
class ChangeSize:
    """A change point's two levels and the relative change between them."""

    index: int  # where the after side starts (the change point, or the version boundary)
    before: float  # level of the before side, in the metric's units
    after: float
    rel_change: float | None  # after vs before, ratio of geometric means - 1; None: before is 0
    interval: tuple[float, float] | None  # of rel_change (each end a one-sided 95 % bound)
    before_runs: range  # indices of the values on each side
    after_runs: range
    on_boundary: bool  # the after side starts with a new config version

    @property
    def shows_no_change(self) -> bool:
        """The levels are equal, or the change rounds to 0.0 %."""
        if self.before == self.after:
            return True
        return self.rel_change is not None and rounds_to_zero(self.rel_change)


def rounds_to_zero(rel_change: float) -> bool:
    """``rel_change`` reads ±0.0 % at one decimal of a percent."""
    return f"{abs(rel_change) * 100.0:.1f}" == "0.0"


def compute_level(values: Sequence[float]) -> float:
    """The level of one side: the geometric mean of positive values, else the mean. It is the
    value itself where every value is the same (a bit-constant side's level is exact)."""
    if not values:
        raise ValueError("a level needs at least one value")
    if all(v == values[0] for v in values):
        return float(values[0])
    if all(v > 0.0 for v in values):
        return math.exp(sum(math.log(v) for v in values) / len(values))
    return sum(values) / len(values)


def _nearest_boundary(values: Sequence[float], versions: Sequence[str], index: int,
                      start: int, end: int) -> int | None:
    """The config-version boundary within ``ATTRIBUTION_TOLERANCE`` runs of ``index`` (inside
    ``start``..``end``) that the values agree with, nearest first, or None when there is none."""
    around = sorted(range(max(start + 1, index - ATTRIBUTION_TOLERANCE),
                          min(end - 1, index + ATTRIBUTION_TOLERANCE) + 1),
                    key=lambda at: (abs(at - index), at))
    old = compute_level(values[start:index]) if index > start else None
    new = compute_level(values[index:end]) if end > index else None
    for at in around:
        if versions[at] == versions[at - 1]:
            continue
        if at == index or old is None or new is None:
            return at
        between = values[min(at, index):max(at, index)]
        wanted = new if at < index else old  # the side the boundary puts them on
        other = old if at < index else new
        if all(abs(v - wanted) < abs(v - other) for v in between):
            return at
    return None


def _before_side(versions: Sequence[str], split: int, start: int, on_boundary: bool) -> range:
    if not on_boundary:
        return range(start, split)
    first = split - 1
    while first > start and versions[first - 1] == versions[split - 1]:
        first -= 1
    return range(first, split)


def compute_change_size(values: Sequence[float], versions: Sequence[str], index: int,
                        metric: Metric, *, start: int = 0, end: int | None = None) -> ChangeSize:
    """The size of the change point at ``index`` of ``values`` (one value per run, oldest first).

    ``versions[i]`` is the config version of run ``i``. ``start`` is the previous change point
    (0: none) and ``end`` the next (None: the end of the series)."""
    stop = len(values) if end is None else end
    if len(versions) != len(values):
        raise ValueError(f"versions ({len(versions)}) and values ({len(values)}) must describe "
                         "the same runs")
    if not 0 <= start < index < stop <= len(values):
        raise ValueError(f"need 0 <= start < index < end <= {len(values)} "
                         f"(got start={start}, index={index}, end={stop})")
    boundary = _nearest_boundary(values, versions, index, start, stop)
    split = index if boundary is None else boundary
    before_runs = _before_side(versions, split, start, boundary is not None)
    after_runs = range(split, stop)
    before = [values[i] for i in before_runs]
    after = [values[i] for i in after_runs]
    old, new = compute_level(before), compute_level(after)
    verdict = compare_samples([[v] for v in before], [[v] for v in after], metric)
    rel = verdict.rel_change
    if rel is None and old != 0.0:  # too few runs to estimate noise: the levels' ratio
        rel = new / old - 1.0
    return ChangeSize(split, old, new, rel, verdict.ci, before_runs, after_runs,
                      boundary is not None)
