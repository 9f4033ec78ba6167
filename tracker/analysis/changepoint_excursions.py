"""Excursions: nights that stand out from the level both before and after them (a spike of a
few nights, a noisy neighbour), so they are no evidence about where the level is.

A change point moves the level for good: the nights after it sit at the new level, the nights
before it at the old one, so each night agrees with at least one of its two neighbourhoods. A
spike (1-3 nights that always revert) or an outlier disagrees with *both*: it is far from the
median of the ``EXCURSION_REACH`` nights before it and from the median of the ones after it, on
the same side. Such nights are set aside before the detector ranks, locates and checks a split;
the change points keep their indices. Far means more than ``EXCURSION_Z`` times the series'
robust noise scale (the median absolute first difference, which a step barely moves); with the
metric's direction known, only the bad way (spikes, slow neighbours and slow hosts only ever
make a metric worse). The first and last ``EXCURSION_REACH`` nights have no neighbourhood on
one side and are never set aside. Pure, no I/O.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

EXCURSION_REACH = 7  # nights on each side whose median is the local level
EXCURSION_Z = 4.0  # robust noise scales from both neighbourhoods, on the same side
MAD_TO_SD = 1.4826  # a median absolute deviation of Gaussian noise, in sd


def compute_noise_scale(values: NDArray[np.float64]) -> float:
    """Robust sd of one night's noise: the median absolute first difference, rescaled (a
    difference of two nights has twice the variance of one)."""
    if len(values) < 3:
        return 0.0
    steps = np.abs(np.diff(values))
    return float(np.median(steps)) * MAD_TO_SD / float(np.sqrt(2.0))


def find_excursions(values: NDArray[np.float64], lower_is_better: bool | None) -> NDArray[np.bool_]:
    """True for each night far from both neighbourhoods' medians on the same side (only the bad
    side when ``lower_is_better`` is known)."""
    n, reach = len(values), EXCURSION_REACH
    out = np.zeros(n, dtype=bool)
    scale = compute_noise_scale(values)
    if n < 2 * reach + 1 or scale <= 0.0:
        return out
    windows = np.median(sliding_window_view(values, reach), axis=1)  # windows[i]: values[i:i+r]
    middle = values[reach:n - reach]
    before, after = windows[:n - 2 * reach], windows[reach + 1:]
    limit = EXCURSION_Z * scale
    high = (middle - before > limit) & (middle - after > limit)
    low = (before - middle > limit) & (after - middle > limit)
    flagged = high if lower_is_better else low if lower_is_better is False else high | low
    out[reach:n - reach] = flagged
    return out
