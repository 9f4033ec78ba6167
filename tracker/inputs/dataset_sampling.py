"""Seeded choices over a data file: which items a workload sends, and how long each answer is.

Both draw from ``SplitMix64`` streams seeded through ``derive_seed`` (tracker.inputs.prompts), so
the same suite file and data file always give the same sample and the same lengths, on any
machine. The sample is a reservoir (one pass, memory for ``count`` items only) put in a seeded
random order. A file with fewer usable items than the workload needs is an error, never a
silent repeat (a repeated prompt would be a prefix-cache hit no production sees).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from pydantic import BaseModel

from tracker.errors import ConfigError
from tracker.inputs.prompt_sources import OutputLengths
from tracker.inputs.prompts import SplitMix64

T = TypeVar("T")
_UNIT = 2.0**-53


def compute_unit(rng: SplitMix64) -> float:
    """A float in [0, 1) from the top 53 bits of the next draw."""
    return (rng.next_u64() >> 11) * _UNIT


def sample_items(items: Iterable[T], keep: Callable[[T], bool], count: int, seed: int,
                 where: str, filters: str) -> list[T]:
    """``count`` of the ``items`` that ``keep`` accepts, uniformly at random (seeded), in random
    order. Fewer than ``count`` is a ConfigError naming ``where`` and the ``filters``."""
    rng = SplitMix64(seed)
    chosen: list[T] = []
    seen = kept = 0
    for item in items:
        seen += 1
        if not keep(item):
            continue
        kept += 1
        if len(chosen) < count:
            chosen.append(item)
        else:
            slot = rng.below(kept)
            if slot < count:
                chosen[slot] = item
    if kept < count:
        raise ConfigError(_too_few(where, seen, kept, count, filters))
    for i in range(len(chosen) - 1, 0, -1):  # Fisher-Yates: the reservoir keeps file order
        j = rng.below(i + 1)
        chosen[i], chosen[j] = chosen[j], chosen[i]
    return chosen


def _too_few(where: str, seen: int, kept: int, count: int, filters: str) -> str:
    if seen == 0:
        return f"{where}: the file holds no items; add some, or check the file and its format"
    passing = f"pass the filters ({filters})" if filters else "have a question to send"
    if kept == 0:
        return (f"{where}: none of the {seen} items {passing}; "
                + ("loosen the filters" if filters else "check the file and its format"))
    return (f"{where}: {kept} of {seen} items {passing}, but the workload needs {count} "
            "(warm-up included); lower num_requests or warmup_requests"
            + (", or loosen the filters" if filters else ", or use a larger file"))


def describe_filters(source: BaseModel, keys: Sequence[str]) -> str:
    """The filters a source sets, for an error message (``min_turns 2, max_input_tokens 900``)."""
    given = [f"{key} {getattr(source, key)}" for key in keys if key in source.model_fields_set]
    return ", ".join(given)


class OutputDraws:
    """Each request's ``max_tokens`` under an ``OutputLengths`` (None: the workload's own)."""

    def __init__(self, spec: OutputLengths, workload_max_tokens: int, seed: int) -> None:
        self.spec = spec
        self.low = spec.min_tokens
        self.high = max(spec.max_tokens or workload_max_tokens, self.low)
        self.rng = SplitMix64(seed)

    def next(self, recorded: int | None) -> int | None:
        kind = self.spec.distribution
        if kind == "recorded":
            return recorded
        if kind == "fixed":
            return None
        if kind == "uniform":
            return self.low + self.rng.below(self.high - self.low + 1)
        assert self.spec.median_tokens is not None and self.spec.sigma is not None
        u1 = 1.0 - compute_unit(self.rng)  # (0, 1]: log is finite
        u2 = compute_unit(self.rng)
        normal = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)  # Box-Muller
        value = round(self.spec.median_tokens * math.exp(self.spec.sigma * normal))
        return min(max(value, self.low), self.high)
