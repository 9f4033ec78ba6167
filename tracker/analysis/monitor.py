"""The nightly form of change-point detection: one value in, only new change points out.

``ChangeMonitor.observe(value)`` appends the night's value, runs ``detect_change_points`` over
the last ``window`` nights and returns the change points it has not alerted before. A change
point whose estimated location moves by up to ``tolerance`` nights as more data arrives is the
same change and is not alerted again. A change is alerted only once it persists: the median of
the last ``confirm`` nights must sit nearer the new level than the old one, so a spike that is
already reverting is never alerted.

When that finds nothing new, the tail test (``changepoint_tail.py``) looks for a step among the
newest ``TAIL_REACH`` nights only, against the 60 nights before it: it pays for a handful of
splits instead of every split of the window, so a step is alerted about as soon as it has
``min_segment`` nights, and it asks that the step persist (its first night and nearly every one
since past the midpoint of the two levels). It spends some of the monitor's quietness on
recall: ``TAIL_ALPHA`` was picked on the fleet generator's tuning seed (``bench/detection.py``).

The window's re-scan uses ``detect_change_points``' own ``alpha`` (0.001 since short segments
get the permutation p-value, 0.005 before), which makes it quieter. Some of that quietness is
spent on the tail test (``TAIL_ALPHA`` 0.005 instead of 0.003), which alerts a step sooner. On
the tuning seed it alerts 62.6 % of steps within 7 nights at 0.244 false alerts per 100 nights,
against 59.0 % at 0.254 before (0.003 gives 58.6 % at 0.190, and 0.006 gives 63.1 % at 0.279).
A stricter re-scan (0.0002) was quieter still, but a short history whose newest level follows
another within ten nights (the demo's) then waited two more nights for its alert: the tail test
needs ten nights before a split.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from tracker.analysis.changepoint_tail import TAIL_BEFORE, detect_recent_step
from tracker.analysis.changepoints import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_REL_CHANGE,
    DEFAULT_MIN_SEGMENT,
    ChangePoint,
    detect_change_points,
)

DEFAULT_WINDOW = 120
DEFAULT_TOLERANCE = 3
DEFAULT_CONFIRM = 3
TAIL_ALPHA = 0.005  # of the tail test for a step among the newest nights (0: off)


class ChangeMonitor:
    """Streaming change-point alerts for one metric's nightly series."""

    def __init__(
        self,
        *,
        window: int = DEFAULT_WINDOW,
        min_segment: int = DEFAULT_MIN_SEGMENT,
        alpha: float = DEFAULT_ALPHA,
        min_rel_change: float = DEFAULT_MIN_REL_CHANGE,
        tolerance: int = DEFAULT_TOLERANCE,
        confirm: int = DEFAULT_CONFIRM,
        lower_is_better: bool | None = None,
    ) -> None:
        if window < 2 * min_segment:
            raise ValueError(f"window must be >= 2 * min_segment = {2 * min_segment} "
                             f"(got {window})")
        if not 1 <= confirm <= min_segment:
            raise ValueError(f"confirm must be between 1 and min_segment={min_segment} "
                             f"(got {confirm})")
        self.window = window
        self.min_segment = min_segment
        self.alpha = alpha
        self.min_rel_change = min_rel_change
        self.tolerance = tolerance
        self.confirm = confirm
        self.lower_is_better = lower_is_better
        self._values: list[float | None] = []
        self._alerted: list[ChangePoint] = []

    @property
    def values(self) -> tuple[float | None, ...]:
        return tuple(self._values)

    def observe(self, value: float | None) -> list[ChangePoint]:
        """Add one night's value (``None``: not measured) and return the change points that are new.

        Indices of the returned change points count every value observed, ``None`` included.
        """
        if value is not None and not math.isfinite(value):
            raise ValueError(f"value must be a finite number or None (got {value})")
        self._values.append(value)
        start = max(0, len(self._values) - self.window)
        found = detect_change_points(self._values[start:], min_segment=self.min_segment,
                                     alpha=self.alpha, min_rel_change=self.min_rel_change,
                                     lower_is_better=self.lower_is_better)
        new: list[ChangePoint] = []
        for position, point in enumerate(found):
            located = replace(point, index=point.index + start)
            if self._known(located.index):
                continue
            if position == len(found) - 1 and not self._persists(located):
                continue
            self._alerted.append(located)
            new.append(located)
        if not new and TAIL_ALPHA > 0.0:
            new += self._recent_step()
        return new

    def _recent_step(self) -> list[ChangePoint]:
        """A step among the newest nights, by the tail test (``changepoint_tail``), counted
        from the last alerted change so an older step is not compared with."""
        positions = [i for i, v in enumerate(self._values) if v is not None]
        latest = max((p.index for p in self._alerted), default=0)
        start = max(latest, len(self._values) - self.window)
        kept = [i for i in positions if i >= start]
        series = np.array([self._values[i] for i in kept], dtype=np.float64)
        found = detect_recent_step(series, self.min_segment, TAIL_ALPHA, self.min_rel_change)
        if found is None or self._known(kept[found[0]]):
            return []
        split = found[0]
        before = float(np.median(series[max(0, split - TAIL_BEFORE):split]))
        after = float(np.median(series[split:]))
        point = ChangePoint(kept[split], before, after,
                            None if before == 0.0 else after / before - 1.0, found[1])
        self._alerted.append(point)
        return [point]

    def _known(self, index: int) -> bool:
        return any(abs(index - point.index) <= self.tolerance for point in self._alerted)

    def _persists(self, point: ChangePoint) -> bool:
        """The latest nights sit nearer the new level than the old (the change did not revert)."""
        recent = [v for v in self._values[point.index:] if v is not None][-self.confirm:]
        latest = float(np.median(recent))
        return abs(latest - point.after) < abs(latest - point.before)
