"""Change points of a bit-constant series (peak memory, a config-derived count): exact levels.

A series that repeats exactly the same value night after night has no noise to test against:
any value that *persists* for ``min_run`` nights is a level, and a level that differs from the
one before it is a change point, at its first night. A value that lasts fewer nights (a one-night
blip, a two-night spike) is not a level and changes nothing. Pure, no I/O.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

CONSTANT_SHARE = 0.5  # of nights exactly equal to the night before, for a series to be constant
MIN_CONSTANT_NIGHTS = 8  # shorter series are never treated as constant


def is_bit_constant(values: NDArray[np.float64]) -> bool:
    """Whether most nights repeat the previous night's value exactly.

    Noisy floats essentially never do, while a binomial score over hundreds of items repeats on a
    few percent of nights."""
    if len(values) < MIN_CONSTANT_NIGHTS:
        return False
    return float(np.mean(values[1:] == values[:-1])) >= CONSTANT_SHARE


def compute_runs(values: NDArray[np.float64]) -> list[tuple[int, int]]:
    """(start, length) of every run of identical consecutive values."""
    starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))
    lengths = np.diff(np.append(starts, len(values)))
    return [(int(s), int(n)) for s, n in zip(starts, lengths, strict=True)]


def detect_constant_steps(values: NDArray[np.float64], min_run: int) -> list[int]:
    """First night of each persistent level that differs from the previous persistent level:
    the first night showing the new value after the old level's last night (a spike right
    after a step does not move the step)."""
    runs = compute_runs(values)
    found: list[int] = []
    level: float | None = None
    level_end = 0  # index into ``runs`` just after the last run of the current level
    for position, (start, length) in enumerate(runs):
        value = float(values[start])
        if length < min_run:
            continue
        if level is not None and value != level:
            first = next(i for i in range(level_end, position + 1)
                         if float(values[runs[i][0]]) == value)
            found.append(runs[first][0])
        level, level_end = value, position + 1
    return found
