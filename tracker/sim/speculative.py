"""Speculative decoding in the simulator: drafts, their acceptance, what they cost, and vLLM's
counters of them.

Each decode step, every request past its prompt gets a draft of ``num_speculative_tokens``
tokens. The target model verifies them in the same step and keeps the longest accepted run of
them plus one token of its own (the "bonus" token), so a step yields 1 to k + 1 tokens. Draft
position ``i`` (0-based) is accepted, given the ones before it were, with chance
``acceptance x decay^i``: a method's drafts get worse the further ahead they guess
(``METHODS``), and ``simulator.spec_acceptance`` replaces the first position's chance. The draws
come from a seeded stream, so a run repeats.

A step with drafts costs more than one without: the drafter runs k times per step
(``draft_cost`` of ``decode_base_s`` each: a small model's forward, while ngram's prompt lookup is
free) and the target verifies k + 1 positions per sequence instead of one (k more
``decode_per_seq_s`` per sequence). With drafts that are mostly accepted that buys several
tokens per step (a lower TPOT). With drafts that are mostly rejected, it is a step that costs
more for about one token, and the TPOT is worse than without speculation.

Counters, as vLLM's (``vllm/v1/spec_decode/metrics.py``): drafts (one per request per step),
draft tokens (k per draft), accepted tokens, and accepted tokens per position (``position``
label: the drafts whose position ``i`` was accepted). The draws differ from run to run (the
engine's ``run_ordinal``), as a real server's do, and repeat for a numbered run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tracker.inputs.configs import SimulatorSettings
from tracker.inputs.prompts import SplitMix64, derive_seed
from tracker.inputs.speculative import SpeculativeConfig
from tracker.sim.sampling import compute_unit_interval


@dataclass(frozen=True, slots=True)
class DraftQuality:
    """A method's drafts on the simulated model: the first position's chance of acceptance,
    each later position's chance relative to the one before, and one draft token's cost as a
    share of ``decode_base_s``."""

    acceptance: float
    decay: float
    draft_cost: float


# Simulated magnitudes in the order the methods are known for (EAGLE-3 and MTP heads above
# EAGLE, a separate small draft model costlier per token; n-gram prompt lookup free but rarely
# right on text that does not repeat its prompt), not a prediction for any model.
METHODS: dict[str, DraftQuality] = {
    "eagle3": DraftQuality(acceptance=0.85, decay=0.95, draft_cost=0.05),
    "eagle": DraftQuality(acceptance=0.75, decay=0.92, draft_cost=0.05),
    "mtp": DraftQuality(acceptance=0.85, decay=0.90, draft_cost=0.08),
    "draft_model": DraftQuality(acceptance=0.75, decay=0.97, draft_cost=0.15),
    "ngram": DraftQuality(acceptance=0.30, decay=0.80, draft_cost=0.0),
}


@dataclass(slots=True)
class SpecCounters:
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: list[int] | None = None


class Speculator:
    """Draws each draft's accepted tokens, counts them, and prices a step's drafting."""

    def __init__(self, config: SpeculativeConfig, settings: SimulatorSettings,
                 run_ordinal: int = 0) -> None:
        quality = METHODS[config.method]
        first = quality.acceptance if settings.spec_acceptance is None \
            else settings.spec_acceptance
        self.depth = config.num_speculative_tokens
        self.chances = tuple(first * quality.decay**i for i in range(self.depth))
        self._draft_cost = quality.draft_cost
        self._rng = SplitMix64(derive_seed(settings.seed, "sim-spec-decode", config.method,
                                           run_ordinal))
        self.counters = SpecCounters(accepted_per_position=[0] * self.depth)

    def draw_accepted(self) -> int:
        """One draft verified: how many of its tokens were accepted (counted)."""
        accepted = 0
        for chance in self.chances:
            if compute_unit_interval(self._rng) >= chance:
                break
            accepted += 1
        counters = self.counters
        counters.drafts += 1
        counters.draft_tokens += self.depth
        counters.accepted_tokens += accepted
        assert counters.accepted_per_position is not None
        for position in range(accepted):
            counters.accepted_per_position[position] += 1
        return accepted

    def snapshot(self) -> SpecCounters:
        """A copy of the counters, for ``/metrics``."""
        counters = self.counters
        return replace(counters, accepted_per_position=list(counters.accepted_per_position or ()))

    def compute_step_s(self, settings: SimulatorSettings, drafting: int) -> float:
        """What drafting adds to a step in which ``drafting`` sequences decode with drafts: the
        drafter's k passes and the target's k more positions per sequence."""
        if drafting == 0:
            return 0.0
        drafter_s = self.depth * self._draft_cost * settings.decode_base_s
        return drafter_s + self.depth * settings.decode_per_seq_s * drafting

    def expected_tokens_per_step(self) -> float:
        """1 + the expected accepted tokens of a draft (the mean acceptance length)."""
        total, reach = 1.0, 1.0
        for chance in self.chances:
            reach *= chance
            total += reach
        return total
