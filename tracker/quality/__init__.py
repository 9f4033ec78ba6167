"""Output quality: fixed JSONL sets of prompts with one right answer, scorers, accuracy, drift.

``sets`` (the item model, seeded samples) ← ``formats`` (GSM8K-style and multiple-choice lines)
→ ``set_files`` (a file) → ``scorers`` → ``accuracy`` (accuracy with a Wilson interval, drift
from a baseline run's answers). Asking the target is ``tracker.runner.quality_client``, and base
vs head paired is ``tracker.analysis.paired_quality``.
"""

from tracker.errors import QualitySetError
from tracker.quality.accuracy import compute_drift, compute_quality_result, compute_wilson_interval
from tracker.quality.scorers import score_output
from tracker.quality.set_files import load_quality_set
from tracker.quality.sets import QualityItem, QualitySet, compute_sample

__all__ = [
    "QualityItem",
    "QualitySet",
    "QualitySetError",
    "compute_drift",
    "compute_quality_result",
    "compute_sample",
    "compute_wilson_interval",
    "load_quality_set",
    "score_output",
]
