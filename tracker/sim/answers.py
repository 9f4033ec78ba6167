"""The simulator's answers to quality items: a seeded model of a model that is mostly right.

The simulated model "knows" the items of the quality sets shipped in ``baselines/quality/``
(their reference answers, see ``tracker.quality.sets``): the 40 of ``basic.jsonl`` and the
1,000 of ``mixed-1k.jsonl``. When the last message of a request (or
the completions prompt) is exactly an item's prompt, it answers that item instead of emitting
vocabulary words: the reference answer, or — with probability ``error_rate`` — a wrong one (a
nearby number, another option letter, another item's answer). A prompt it does not know gets the
usual words, which no scorer accepts, so a user's own set scores near zero on the simulator.

The error rate grows with what costs accuracy on a real engine: ``BASE_ERROR_RATE``, plus
``QUANTIZATION_PENALTY`` for a 4-bit weight scheme (AWQ, GPTQ, …) or ``OTHER_QUANT_PENALTY`` for
any other ``quantization``, plus ``KV_FP8_PENALTY`` for an fp8 ``kv_cache_dtype``. Each item's
draw is seeded by (simulator seed, prompt) only, so the items a 4-bit config gets wrong include
every item the 16-bit config gets wrong: accuracy can only drop, and the flipped items show as
drift. A degraded config also rephrases some right answers (a trailing period): the accuracy holds
but the text changes, as a quantized model's wording does. With temperature > 0 the request's
ordinal joins the seed, so repeated asks vary.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tracker.errors import ConfigError
from tracker.inputs.configs import EngineArgs, ServingConfig
from tracker.inputs.package_data import shipped_quality_sets
from tracker.inputs.prompts import SplitMix64, derive_seed
from tracker.quality.set_files import load_quality_set
from tracker.quality.sets import ChoiceParams, NumericParams, QualityItem
from tracker.sim.sampling import OutputWords, compute_unit_interval

BASE_ERROR_RATE = 0.03
QUANTIZATION_PENALTY = 0.12
OTHER_QUANT_PENALTY = 0.04
KV_FP8_PENALTY = 0.05
REPHRASE_RATE = {"4bit": 0.25, "quant": 0.10, "kv_fp8": 0.15}
FOUR_BIT = frozenset({"awq", "awq_marlin", "gptq", "gptq_marlin", "marlin", "bitsandbytes", "gguf"})
UNKNOWN_ANSWER = "I do not know."
_PIECE = re.compile(r"\s*\S+")
_log = logging.getLogger(__name__)


def compute_error_rate(args: EngineArgs) -> float:
    rate = BASE_ERROR_RATE
    if args.quantization in FOUR_BIT:
        rate += QUANTIZATION_PENALTY
    elif args.quantization is not None:
        rate += OTHER_QUANT_PENALTY
    if args.kv_cache_dtype is not None and args.kv_cache_dtype.startswith("fp8"):
        rate += KV_FP8_PENALTY
    return rate


def compute_rephrase_rate(args: EngineArgs) -> float:
    rate = 0.0
    if args.quantization is not None:
        rate += REPHRASE_RATE["4bit" if args.quantization in FOUR_BIT else "quant"]
    if args.kv_cache_dtype is not None and args.kv_cache_dtype.startswith("fp8"):
        rate += REPHRASE_RATE["kv_fp8"]
    return min(rate, 1.0)


class AnswerWords(OutputWords):
    """An answer's pieces, one a token, in the shape the scheduler reads ``OutputWords``."""

    __slots__ = ("_next", "_pieces")

    def __init__(self, pieces: Sequence[str]) -> None:
        super().__init__(SplitMix64(0))
        self._pieces = tuple(pieces)
        self._next = 0

    def next_piece(self) -> str:
        piece = self._pieces[min(self._next, len(self._pieces) - 1)]
        self._next += 1
        return piece


def format_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(round(value, 6))


def _wrong_number(item: QualityItem, rng: SplitMix64) -> str:
    assert isinstance(item.expected, int | float)
    params = NumericParams.model_validate(item.params)
    allowed = params.tolerance + params.relative_tolerance * abs(item.expected)
    step = max(1.0, 2.0 * allowed) if isinstance(item.expected, int) else max(0.25, 2 * allowed)
    offset = (1 + rng.below(9)) * step * (1 if rng.below(2) else -1)
    return format_number(item.expected + offset)


def _wrong_answer(item: QualityItem, others: Sequence[str], rng: SplitMix64) -> str:
    if item.scorer == "numeric":
        return _wrong_number(item, rng)
    if item.scorer == "choice":
        letters = [c for c in ChoiceParams.model_validate(item.params).options
                   if c != item.expected]
        return letters[rng.below(len(letters))]
    candidates = [text for text in others if text != item.reference_answer]
    return candidates[rng.below(len(candidates))] if candidates else UNKNOWN_ANSWER


@functools.lru_cache(maxsize=4)
def load_answer_key(directory: Path | None = None) -> Mapping[str, QualityItem]:
    """Prompt -> item, over every valid set in ``directory`` (default: the shipped sets). An
    invalid set is logged and skipped."""
    directory = directory if directory is not None else shipped_quality_sets()
    key: dict[str, QualityItem] = {}
    for path in sorted(directory.glob("*.jsonl")):
        try:
            quality_set = load_quality_set(path)
        except ConfigError as exc:
            _log.warning("the simulator skips quality set %s: %s", path, exc)
            continue
        for item in quality_set.items:
            key.setdefault(item.prompt, item)
    return key


@dataclass(frozen=True, slots=True)
class AnswerModel:
    seed: int
    error_rate: float
    rephrase_rate: float
    key: Mapping[str, QualityItem]

    @classmethod
    def from_config(cls, config: ServingConfig) -> AnswerModel:
        args = config.engine
        return cls(config.simulator.seed, compute_error_rate(args), compute_rephrase_rate(args),
                   load_answer_key())

    def answer(self, prompt: str, variation: int | None = None) -> str | None:
        """The answer text to a known item's prompt, or None for a prompt it does not know."""
        item = self.key.get(prompt)
        if item is None:
            return None
        labels: tuple[str | int, ...] = (prompt,) if variation is None else (prompt, variation)
        roll = compute_unit_interval(SplitMix64(derive_seed(self.seed, "sim-answer", *labels)))
        style = compute_unit_interval(SplitMix64(derive_seed(self.seed, "sim-style", *labels)))
        right = item.reference_answer
        if right is None or roll < self.error_rate:
            others = [i.reference_answer for i in self.key.values() if i.reference_answer]
            rng = SplitMix64(derive_seed(self.seed, "sim-wrong", *labels))
            return _wrong_answer(item, [o for o in others if o is not None], rng)
        if style < self.rephrase_rate and right[-1:].isalnum():
            return right + "."
        return right

    def plan(self, prompt_parts: Sequence[str], max_tokens: int, ignore_eos: bool,
             variation: int | None) -> tuple[int, OutputWords] | None:
        """(output tokens, words) when the request is a known quality item, else None."""
        if ignore_eos or not prompt_parts:
            return None
        text = self.answer(prompt_parts[-1], variation)
        if text is None:
            return None
        pieces = _PIECE.findall(text) or [text]
        return min(len(pieces), max_tokens), AnswerWords(pieces)
