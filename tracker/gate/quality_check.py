"""The gate's quality check: base and head answered the same items, so compare them paired.

Each side's answers are those of its first run that stored the suite's quality set (with
``when: once_per_night`` later rounds reuse that run's answers, so the gate asks the set once
per side). Items are matched by id (a sampled item's k-th ask with the other side's k-th: under
no change both are draws of the same chance, so the exact test holds). An item counts when both
sides answered it. A sampled ask's changed text is not drift. The verdict is
``tracker.analysis.compute_paired_quality``'s (exact McNemar, Newcombe's paired interval, the
smallest drop the set can detect). This module only picks the runs and the items, and keeps a
few flipped items with both answers for the report (the report redacts and escapes them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracker.analysis import Outcome, PairedItem, PairedQuality, compute_paired_quality
from tracker.analysis.paired_quality import DEFAULT_MIN_DROP
from tracker.metrics import get_metric
from tracker.quality.sets import is_sampled_ask
from tracker.results import QualityItemResult, QualityResult, RunResult

ACCURACY = get_metric("accuracy").name  # the registry's; the row's metric and --min-effect key
# (absolute there: 0.01 is a point)
EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class FlippedItem:
    item_id: str
    base_right: bool  # True: right on base, wrong on head
    base_answer: str | None  # outside text: redact and escape before showing
    head_answer: str | None


@dataclass(frozen=True, slots=True)
class QualityComparison:
    set_name: str
    base_run_id: int | None  # the run whose answers stand for the side; None: no answers
    head_run_id: int | None
    base_asked_by: int | None  # the run that asked them, when they were reused
    head_asked_by: int | None
    paired: PairedQuality | None  # None: not compared (``note`` says why)
    examples: tuple[FlippedItem, ...] = ()
    note: str | None = None


def _first_quality(runs: Sequence[RunResult]) -> tuple[int, QualityResult] | None:
    for run in runs:
        if run.quality is not None and run.quality.answered:
            return run.run_id, run.quality
    return None


def _same_text(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and " ".join(a.split()) == " ".join(b.split())


def compute_pairs(base: QualityResult, head: QualityResult
                  ) -> tuple[list[PairedItem], list[FlippedItem]]:
    """The items both sides answered, in base's order, and the ones whose score flipped."""
    heads: dict[str, QualityItemResult] = {item.item_id: item for item in head.items}
    pairs: list[PairedItem] = []
    flipped: list[FlippedItem] = []
    for item in base.items:
        other = heads.get(item.item_id)
        if other is None or item.score is None or other.score is None:
            continue
        base_right, head_right = item.score == 1.0, other.score == 1.0
        changed = not is_sampled_ask(item.item_id) and not _same_text(item.output, other.output)
        pairs.append(PairedItem(item.item_id, base_right, head_right, changed))
        if base_right != head_right:
            flipped.append(FlippedItem(item.item_id, base_right, item.output, other.output))
    return pairs, flipped


def compute_quality_comparison(base_runs: Sequence[RunResult], head_runs: Sequence[RunResult],
                               min_drop: float | None, confidence: float
                               ) -> QualityComparison | None:
    """The paired comparison of the two sides' answers, or None when neither side has any."""
    base, head = _first_quality(base_runs), _first_quality(head_runs)
    found = base if base is not None else head
    if found is None:
        return None

    def build(paired: PairedQuality | None, examples: tuple[FlippedItem, ...] = (),
              note: str | None = None) -> QualityComparison:
        return QualityComparison(
            found[1].set_name, base_run_id=None if base is None else base[0],
            head_run_id=None if head is None else head[0],
            base_asked_by=None if base is None else base[1].reused_from_run_id,
            head_asked_by=None if head is None else head[1].reused_from_run_id,
            paired=paired, examples=examples, note=note)

    if base is None or head is None:
        return build(None, note=f"no quality answers in the {'base' if base is None else 'head'}"
                                " run(s)")
    pairs, flipped = compute_pairs(base[1], head[1])
    if not pairs:
        return build(None, note="no item was answered on both sides")
    note = None
    if base[1].set_version != head[1].set_version:
        note = (f"the sides asked different items ({base[1].set_version[:12]} vs "
                f"{head[1].set_version[:12]}): compared on the {len(pairs)} both answered")
    paired = compute_paired_quality(pairs, min_effect=DEFAULT_MIN_DROP if min_drop is None
                                    else min_drop, confidence=confidence)
    worse_first = sorted(flipped, key=lambda item: not item.base_right)
    return build(paired, tuple(worse_first[:EXAMPLES]), note)


def compute_row_note(quality: QualityComparison) -> str | None:
    """The accuracy row's note: why it was not compared, or, when the verdict is open, the drop
    the set could have detected."""
    paired = quality.paired
    if paired is None or paired.verdict.outcome is not Outcome.INCONCLUSIVE:
        return quality.note
    power = f"this set detects a drop of {paired.detectable_drop * 100:.1f} points at 80% power"
    return power if quality.note is None else f"{quality.note}; {power}"
