"""Speculative decoding as the server counts it: vLLM's ``spec_decode_*`` counters over a
workload, and the acceptance they give. Pure.

vLLM (``vllm/v1/spec_decode/metrics.py``) counts, per engine: ``spec_decode_num_drafts`` (one
per request per step that drafted), ``spec_decode_num_draft_tokens`` (the tokens proposed),
``spec_decode_num_accepted_tokens`` (those the target model accepted) and
``spec_decode_num_accepted_tokens_per_pos`` (label ``position``: the drafts whose token at that
position was accepted). From their deltas over the workload (from the end of its warm-up, as
every counter: ``tracker.telemetry.server_metrics``), with vLLM's own formulas:

- ``spec_decode_acceptance_rate`` = accepted tokens / draft tokens (vLLM's "draft acceptance
  rate").
- ``spec_decode_mean_acceptance_length`` = 1 + accepted tokens / drafts (vLLM's "mean
  acceptance length", counting the bonus token the target adds to every step).
- ``spec_decode_acceptance_rate_pos_<i>`` = drafts whose position ``i`` was accepted / drafts
  (vLLM's "per-position acceptance rate").

A server without speculative decoding exposes none of these: they are absent, never 0. A
workload in which nothing was drafted has counters of 0 and no rates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# (kept as, the vLLM names without prefix): counters, read like every other
COUNTERS: dict[str, tuple[str, ...]] = {
    "spec_decode_drafts": ("spec_decode_num_drafts_total", "spec_decode_num_drafts"),
    "spec_decode_draft_tokens": ("spec_decode_num_draft_tokens_total",
                                 "spec_decode_num_draft_tokens"),
    "spec_decode_accepted_tokens": ("spec_decode_num_accepted_tokens_total",
                                    "spec_decode_num_accepted_tokens"),
}
PER_POSITION_NAMES = ("spec_decode_num_accepted_tokens_per_pos_total",
                      "spec_decode_num_accepted_tokens_per_pos")
POSITION_KEY = "spec_decode_accepted_tokens_pos_"  # + the position: a parsed sample, a delta
RATE_KEY = "spec_decode_acceptance_rate"
LENGTH_KEY = "spec_decode_mean_acceptance_length"
POSITION_RATE_KEY = "spec_decode_acceptance_rate_pos_"  # + the position
_POSITION = re.compile(r"^\d{1,4}$")


def compute_sample_key(name: str, labels: Mapping[str, str]) -> str | None:
    """The key a parsed sample is kept under: the per-position counter by its ``position``
    label (``spec_decode_accepted_tokens_pos_0``, or None for a position that is not a small
    number), any other name as it is."""
    if name not in PER_POSITION_NAMES:
        return name
    position = labels.get("position", "")
    return f"{POSITION_KEY}{int(position)}" if _POSITION.fullmatch(position) else None


def is_position_key(key: str) -> bool:
    return key.startswith(POSITION_KEY)


def compute_position_deltas(before: Mapping[str, float],
                            after: Mapping[str, float]) -> dict[str, float]:
    """Each position's counter delta over the workload (one that first appears counts from 0,
    and one that went down, a restarted server, is left out)."""
    deltas: dict[str, float] = {}
    for key, end in after.items():
        if is_position_key(key):
            start = before.get(key, 0.0)
            if end >= start:
                deltas[key] = end - start
    return deltas


def compute_acceptance(counters: Mapping[str, float]) -> dict[str, float]:
    """The acceptance rate, the mean acceptance length and each position's rate from counter
    deltas (``spec_decode_drafts`` and the rest), or {} when nothing was drafted or the server does
    not count drafts."""
    drafts = counters.get("spec_decode_drafts")
    draft_tokens = counters.get("spec_decode_draft_tokens")
    accepted = counters.get("spec_decode_accepted_tokens")
    values: dict[str, float] = {}
    if accepted is not None and draft_tokens:
        values[RATE_KEY] = accepted / draft_tokens
    if accepted is not None and drafts:
        values[LENGTH_KEY] = 1.0 + accepted / drafts
    if drafts:
        for key, count in counters.items():
            if is_position_key(key):
                values[POSITION_RATE_KEY + key.removeprefix(POSITION_KEY)] = count / drafts
    return values


def compute_position_rates(values: Mapping[str, float]) -> list[float]:
    """The per-position acceptance rates of a summary, position 0 first ([] without them)."""
    found = {int(key.removeprefix(POSITION_RATE_KEY)): value for key, value in values.items()
             if key.startswith(POSITION_RATE_KEY)}
    return [found[i] for i in sorted(found)]
