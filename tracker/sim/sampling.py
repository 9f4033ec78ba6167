"""Seeded randomness of the simulator: output lengths, output words and step jitter.

Everything is drawn from ``SplitMix64`` streams seeded through ``derive_seed``, so a prompt sent
with temperature 0 always gets the same words and length. Temperature > 0 adds the request's
ordinal to the seed, so each request varies while the run as a whole stays reproducible.
"""

from __future__ import annotations

import math
import random

from tracker.inputs.prompts import VOCABULARY, SplitMix64, derive_seed

_UNIT = 2.0**-53
_JITTER_FLOOR = 0.5


def compute_unit_interval(rng: SplitMix64) -> float:
    """A float in [0, 1) from the top 53 bits of the next draw."""
    return (rng.next_u64() >> 11) * _UNIT


def compute_standard_normal(rng: SplitMix64) -> float:
    """One N(0, 1) draw by Box-Muller (the second value is dropped: simplicity over speed)."""
    u1 = 1.0 - compute_unit_interval(rng)  # (0, 1]: log is finite
    u2 = compute_unit_interval(rng)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


class StepJitter:
    """The multiplicative noise of each engine step: ``max(0.5, 1 + noise * N(0, 1))``."""

    def __init__(self, seed: int, noise: float) -> None:
        self._rng = SplitMix64(derive_seed(seed, "sim-step-jitter"))
        self._noise = noise

    def next_factor(self) -> float:
        if self._noise == 0.0:
            return 1.0
        return max(_JITTER_FLOOR, 1.0 + self._noise * compute_standard_normal(self._rng))


def draw_run_ordinal() -> int:
    """A fresh ordinal for a run nobody numbered: like a real server, no two runs alike."""
    return random.SystemRandom().randrange(2**31)


def draw_run_factor(seed: int, noise: float, ordinal: int) -> float:
    """The speed factor of a whole run (the ``ordinal``-th engine): ``max(0.5, 1 + noise * N)``."""
    if noise == 0.0:
        return 1.0
    rng = SplitMix64(derive_seed(seed, "sim-run", ordinal))
    return max(_JITTER_FLOOR, 1.0 + noise * compute_standard_normal(rng))


class OutputWords:
    """The words a request generates, one token each. Pieces after the first carry a space."""

    __slots__ = ("_rng", "_started")

    def __init__(self, rng: SplitMix64) -> None:
        self._rng = rng
        self._started = False

    def next_piece(self) -> str:
        word = VOCABULARY[self._rng.below(len(VOCABULARY))]
        if self._started:
            return " " + word
        self._started = True
        return word


def plan_output(
    seed: int, prompt_text: str, max_tokens: int, ignore_eos: bool, variation: int | None
) -> tuple[int, OutputWords]:
    """The request's output length and word source.

    With ``ignore_eos`` the length is exactly ``max_tokens``. Otherwise a "natural" stop is drawn
    uniformly from [ceil(max_tokens / 2), max_tokens]. ``variation`` (the request's ordinal when
    temperature > 0, else ``None``) makes repeated identical prompts differ.
    """
    labels: tuple[str | int, ...] = ("sim-output", prompt_text)
    if variation is not None:
        labels = (*labels, variation)
    rng = SplitMix64(derive_seed(seed, *labels))
    shortest = (max_tokens + 1) // 2
    natural = shortest + rng.below(max_tokens - shortest + 1)
    return (max_tokens if ignore_eos else natural), OutputWords(rng)
