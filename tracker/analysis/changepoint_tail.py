"""A step in the newest nights of a series, tested with the few splits it can have.

The change-point scan pays for every split of a long history, so a step only a few nights old
must be large to clear it. The nightly monitor knows where a new step can be: among the last
``TAIL_REACH`` nights. This test compares the nights from each such split on with the
``TAIL_BEFORE`` nights before it (rank-sum, Bonferroni over those few splits), and accepts a
step only when it persists (nearly every night since the split sits past the midpoint of the
two levels, so a spike that is already returning is not a step), it is large enough, and it is
more than a drift within the nights before. Pure, no I/O.
"""

from __future__ import annotations

import math

import numpy as np

from tracker.analysis.changepoint_constant import is_bit_constant
from tracker.analysis.changepoint_scan import Array, compute_trend_z, rank_sum_p_value

TAIL_REACH = 7  # the oldest split tested is this many nights back
TAIL_BEFORE = 60  # nights before a split that it is compared with
TAIL_TREND_Z = 2.5  # a trend this strong within the nights before: no tail step


def _persists(before: Array, after: Array) -> bool:
    """The first night past the midpoint of the two medians, and at most a quarter of the
    nights since the split short of it (a spike that is already returning does not persist)."""
    old, new = float(np.median(before)), float(np.median(after))
    middle = (old + new) / 2.0
    past = after > middle if new > old else after < middle
    return bool(past[0]) and int(np.sum(~past)) <= (len(after) - 1) // 4


def detect_recent_step(values: Array, min_segment: int, alpha: float,
                       min_rel_change: float) -> tuple[int, float] | None:
    """(index of the split, Bonferroni p-value) of a step within the last ``TAIL_REACH``
    nights of ``values``, or None."""
    n = len(values)
    if is_bit_constant(values):
        return None  # read exactly by detect_change_points
    splits = range(max(min_segment, n - TAIL_REACH), n - min_segment + 1)
    best: tuple[int, float] | None = None
    for k in splits:
        before, after = values[max(0, k - TAIL_BEFORE):k], values[k:]
        if len(before) < 2 * min_segment:
            continue
        p_value = min(1.0, rank_sum_p_value(before, after) * len(splits))
        if best is None or p_value < best[1]:
            best = (k, p_value)
    if best is None or best[1] >= alpha:
        return None
    k = best[0]
    before, after = values[max(0, k - TAIL_BEFORE):k], values[k:]
    old, new = float(np.median(before)), float(np.median(after))
    if old != 0.0 and abs(new / old - 1.0) < min_rel_change:
        return None
    if not _persists(before, after):
        return None
    if abs(compute_trend_z(before, len(before) // 2)) >= TAIL_TREND_Z:
        return None
    return best if math.isfinite(best[1]) else None
