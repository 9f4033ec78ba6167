"""Accuracy with a Wilson score interval, and the drift of answers from a baseline run (pure).

- Accuracy: right answers / answered items. An item whose request failed is not answered: it
  shows in ``items`` with its error and counts in neither.
- The Wilson interval (95 % by default) stays inside [0, 1] and is honest for 0 or n successes,
  where the normal approximation collapses to a point.
- Drift: among items answered both now and in the baseline run (matched by id), the share whose
  answer text changed (compared after collapsing whitespace). It shows answers that flipped even
  when the accuracy holds — an fp8 KV cache that turns "Paris" into "Lyon" on one item and "Lyon"
  into "Paris" on another. A sampled item's asks (temperature > 0) vary by design: no drift.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from tracker.quality.sets import QualitySet, is_sampled_ask
from tracker.results import QualityItemResult, QualityResult


def compute_wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (SciPy's), for n > 0."""
    # a second to import, and the simulator imports this package: loaded only when needed
    from scipy import stats  # type: ignore[import-untyped]

    interval = stats.binomtest(successes, n).proportion_ci(confidence, method="wilson")
    return float(interval.low), float(interval.high)


def compute_quality_result(quality_set: QualitySet,
                           items: Sequence[QualityItemResult]) -> QualityResult:
    answered = [item for item in items if item.score is not None]
    correct = sum(1 for item in answered if item.score == 1.0)
    accuracy = low = high = None
    if answered:
        accuracy = correct / len(answered)
        low, high = compute_wilson_interval(correct, len(answered))
    return QualityResult(
        set_name=quality_set.name, set_version=quality_set.version, items=tuple(items),
        answered=len(answered), correct=correct, accuracy=accuracy,
        accuracy_ci_low=low, accuracy_ci_high=high,
    )


def _same_answer(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def compute_drift(result: QualityResult, baseline: Mapping[str, str | None],
                  baseline_run_id: int) -> QualityResult:
    """``result`` with each item's ``changed`` and the run's drift against a baseline's answers.

    ``baseline`` maps item id to that run's answer (None when it was not answered there).
    """
    items: list[QualityItemResult] = []
    compared = changed = 0
    for item in result.items:
        before = baseline.get(item.item_id)
        if item.output is None or before is None or is_sampled_ask(item.item_id):
            items.append(replace(item, changed=None))
            continue
        differs = not _same_answer(item.output, before)
        compared += 1
        changed += differs
        items.append(replace(item, changed=differs))
    drift = changed / compared if compared else None
    return replace(result, items=tuple(items), drift=drift,
                   drift_baseline_run_id=baseline_run_id if compared else None,
                   drift_compared=compared)
