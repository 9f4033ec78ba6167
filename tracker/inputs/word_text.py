"""``generate_words`` for many seeds at once, with numpy: the same text, a hundred times faster.

``generate_words(seed, count)`` draws ``count`` words from a SplitMix64 stream in Python (about a
microsecond a word). A trace of 10,000 rows needs millions of words, so here the streams of a
whole batch of seeds are computed as uint64 arrays (SplitMix64's arithmetic wraps modulo 2**64
exactly as numpy's uint64 does), giving byte-identical text. A test compares the two.

Keyed seeds (a hash id's, a trace row's) are the outputs of one SplitMix64 stream: key ``k`` of
``base`` is the stream's output number ``k + 1``, distinct for distinct keys (the mix is a
bijection), computed for all keys at once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from tracker.inputs.prompts import VOCABULARY

U64 = npt.NDArray[np.uint64]
_MASK = (1 << 64) - 1
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_WORDS = np.array([f"{word} " for word in VOCABULARY], dtype=object)  # each with its space
_WORD_CHARS = np.array([len(word) + 1 for word in VOCABULARY], dtype=np.int64)
_BATCH_WORDS = 1 << 21  # words per batch, to bound the temporary arrays


def _mix(z: U64) -> U64:
    """SplitMix64's output function, in place."""
    shifted = np.empty_like(z)
    for shift, multiplier in ((30, _MIX1), (27, _MIX2)):
        np.right_shift(z, np.uint64(shift), out=shifted)
        z ^= shifted
        z *= multiplier
    np.right_shift(z, np.uint64(31), out=shifted)
    z ^= shifted
    return z


def compute_keyed_seeds(base: int, keys: Sequence[int]) -> U64:
    """For each key k, SplitMix64(base)'s output number k + 1 (a seed per hash id, per row)."""
    steps = np.array([key & _MASK for key in keys], dtype=np.uint64) + np.uint64(1)
    return _mix(np.uint64(base & _MASK) + steps * _GAMMA)


def compute_word_indices(seeds: U64, counts: npt.NDArray[np.int64]) -> U64:
    """The vocabulary indices of generate_words(seeds[i], counts[i]) for every i, concatenated."""
    starts = np.cumsum(counts) - counts
    steps = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts) + 1
    z = np.repeat(seeds, counts) + steps.astype(np.uint64) * _GAMMA
    return np.remainder(_mix(z), np.uint64(len(VOCABULARY)))


def generate_word_runs(seeds: Sequence[int] | U64, counts: Sequence[int],
                       cuts: Mapping[int, Collection[int]] | None = None
                       ) -> tuple[list[str], dict[tuple[int, int], str]]:
    """For each i, ``generate_words(seeds[i], counts[i])``, and for each k in ``cuts[i]`` its
    first k words (``generate_words(seeds[i], k)``), keyed (i, k)."""
    seed_array = np.asarray(seeds, dtype=np.uint64)
    count_array = np.maximum(np.asarray(counts, dtype=np.int64), 0)
    texts: list[str] = []
    cut_texts: dict[tuple[int, int], str] = {}
    for start, end in _batches(count_array):
        batch = count_array[start:end]
        indices = compute_word_indices(seed_array[start:end], batch)
        joined = "".join(_WORDS[indices].tolist())  # one string; each run is a slice of it
        offsets = np.concatenate(([0], np.cumsum(_WORD_CHARS[indices])))  # chars before word j
        firsts = np.cumsum(batch) - batch
        bounds = zip(offsets[firsts].tolist(), offsets[firsts + batch].tolist(), strict=True)
        for i, (begin, stop) in enumerate(bounds, start=start):
            texts.append(joined[begin:stop - 1] if stop > begin else "")
            for k in (cuts or {}).get(i, ()):
                cut_end = int(offsets[firsts[i - start] + min(k, int(batch[i - start]))])
                cut_texts[i, k] = joined[begin:cut_end - 1] if cut_end > begin else ""
    return texts, cut_texts


def _batches(counts: npt.NDArray[np.int64]) -> list[tuple[int, int]]:
    """[start, end) ranges of runs holding at most ``_BATCH_WORDS`` words (or one run)."""
    ranges: list[tuple[int, int]] = []
    start, total = 0, 0
    for i, count in enumerate(counts.tolist()):
        if i > start and total + count > _BATCH_WORDS:
            ranges.append((start, i))
            start, total = i, 0
        total += count
    if start < len(counts):
        ranges.append((start, len(counts)))
    return ranges
