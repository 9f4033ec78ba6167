"""Seeded synthetic prompts: the same suite file always gives byte-identical prompts.

The generator is a SplitMix64 stream of our own (not ``random``), seeded from the suite's seed and
a label through sha256, so no interpreter version, hash seed or platform can change a prompt.
"""

from __future__ import annotations

import hashlib

_MASK = (1 << 64) - 1

VOCABULARY: tuple[str, ...] = tuple(dict.fromkeys(
    """
    the of and to in is that for it as was with be by on not he this are or his from at which
    but have an they you were her she there can all their has been if more when will would who
    so no one time people year way day man thing woman life child world school state family
    student group country problem hand part place case week company system program question
    work government number night point home water room mother area money story fact month lot
    right study book eye job word business issue side kind head house service friend father
    power hour game line end member law car city community name president team minute idea kid
    body back parent face others level office door health person art war history party result
    change morning reason research girl guy moment air teacher force education foot boy age
    policy process music market sense nation plan college interest death experience effect use
    class control care field development role effort rate heart drug show leader light voice
    wife police mind price report decision son view relationship town road arm difference
    value building action model season society tax director position player record paper space
    ground form event official matter center couple site project activity star table need
    court oil situation cost industry figure street image phone data picture practice piece
    land product doctor wall patient worker news test movie north love support technology step
    baby computer type attention film tree source organization hair window evidence population
    site truth good new first last long great little own other old big high different small
    large next early young important few public bad same able make get know take see come
    think look want give find tell ask seem feel try leave call keep let begin help talk turn
    start run move live believe hold bring happen write provide sit stand lose pay meet
    include continue set learn lead understand watch follow stop create speak read allow add
    spend grow open walk win offer remember consider appear buy wait serve die send expect
    build stay fall cut reach kill remain suggest raise pass sell require decide return
    explain hope develop carry break receive agree river mountain garden bridge engine signal
    memory cache token batch queue layer kernel block stream server client request window
    budget latency measure careful steady quiet bright simple clear quick slow warm cold green
    blue red white black golden silver wooden stone
    """.split()  # noqa: SIM905 (a word list reads better as text)
))


class SplitMix64:
    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK

    def next_u64(self) -> int:
        self._state = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """A number in [0, n). The modulo bias is below 1e-16 for our small n."""
        return self.next_u64() % n


def derive_seed(seed: int, *labels: str | int) -> int:
    text = "\x1f".join([str(seed), *(str(label) for label in labels)])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def generate_words(seed: int, count: int) -> str:
    """``count`` vocabulary words (one token each for the tracker's tokenizer), space-separated."""
    rng = SplitMix64(seed)
    size = len(VOCABULARY)
    return " ".join(VOCABULARY[rng.below(size)] for _ in range(count))
