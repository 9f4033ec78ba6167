"""The tracker's judgement: statistics, run-vs-run verdicts, change points. Pure: no I/O.

Public API (documented in README.md):

- ``compare_samples(base, head, *, lower_is_better) -> Verdict``
- ``detect_change_points(values) -> list[ChangePoint]``
- ``ChangeMonitor().observe(value) -> list[ChangePoint]``
- ``compute_attribution(...) -> Attribution`` (what changed around a change point)
"""

from tracker.analysis.attribution import Attribution, Change, compute_attribution
from tracker.analysis.changepoints import ChangePoint, detect_change_points
from tracker.analysis.compare import Outcome, Verdict, compare_samples
from tracker.analysis.monitor import ChangeMonitor

__all__ = [
    "Attribution",
    "Change",
    "ChangeMonitor",
    "ChangePoint",
    "Outcome",
    "Verdict",
    "compare_samples",
    "compute_attribution",
    "detect_change_points",
]
