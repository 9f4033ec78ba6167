"""The tracker's judgement: statistics, run-vs-run verdicts, change points. Pure: no I/O.

Public API (documented in docs/analysis.md and docs/changepoints.md):

- ``compare_samples(base, head, metric) -> Verdict`` (a ``tracker.metrics`` metric: its direction)
- ``judge_family(verdicts, alpha=0.05) -> FamilyJudgement`` (one false-alarm budget per gate: Holm)
- ``SequentialGate(rows, ...)``: base vs head judged after every round of one run a side,
  stopping when clear (``tracker.analysis.sequential``)
- ``compute_paired_quality(pairs) -> PairedQuality``: base vs head on the same quality items
  (exact McNemar, Newcombe's paired interval, the smallest drop the set can detect)
- ``detect_change_points(values) -> list[ChangePoint]``
- ``ChangeMonitor().observe(value) -> list[ChangePoint]``
- ``compute_attribution(...) -> Attribution`` (what changed around a change point)
"""

from tracker.analysis.attribution import Attribution, compute_attribution
from tracker.analysis.changepoints import ChangePoint, detect_change_points
from tracker.analysis.compare import Outcome, Verdict, compare_samples
from tracker.analysis.holm import FamilyJudgement, judge_family
from tracker.analysis.monitor import ChangeMonitor
from tracker.analysis.paired_quality import PairedItem, PairedQuality, compute_paired_quality
from tracker.analysis.sequential import RowStatus, SequentialGate, SequentialRow, SequentialState
from tracker.inputs.config_diff import Change

__all__ = [
    "Attribution",
    "Change",
    "ChangeMonitor",
    "ChangePoint",
    "FamilyJudgement",
    "Outcome",
    "PairedItem",
    "PairedQuality",
    "RowStatus",
    "SequentialGate",
    "SequentialRow",
    "SequentialState",
    "Verdict",
    "compare_samples",
    "compute_attribution",
    "compute_paired_quality",
    "detect_change_points",
    "judge_family",
]
