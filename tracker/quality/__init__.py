"""Output quality: fixed JSONL sets of prompts with one right answer, scorers, accuracy, drift.

``sets`` (the item model) → ``loading`` (a file) → ``client`` (ask the target) → ``scorers`` →
``stats`` (accuracy with a Wilson interval, drift from a baseline run's answers).
"""

from tracker.errors import QualitySetError
from tracker.quality.accuracy import compute_drift, compute_quality_result, compute_wilson_interval
from tracker.quality.scorers import score_output
from tracker.quality.set_files import load_quality_set
from tracker.quality.sets import QualityItem, QualitySet

__all__ = [
    "QualityItem",
    "QualitySet",
    "QualitySetError",
    "compute_drift",
    "compute_quality_result",
    "compute_wilson_interval",
    "load_quality_set",
    "score_output",
]
