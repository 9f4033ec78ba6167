"""Speculative decoding in a serving config: ``engine.speculative_config``, validated as vLLM's
``SpeculativeConfig`` validates it, and passed to the server as ``--speculative-config JSON``.

The rules are vLLM's (``vllm/config/speculative.py``, 0.32):

- ``num_speculative_tokens`` (> 0) is how many tokens the drafter proposes per step.
- ``ngram`` drafts from the prompt (prompt lookup). It takes ``prompt_lookup_min`` and
  ``prompt_lookup_max`` (each >= 1, min <= max, where one given stands for both and neither
  means 5 and 5) and no ``model``.
- ``eagle``, ``eagle3`` and ``draft_model`` need a ``model`` (the draft model, or the EAGLE
  head). ``mtp`` uses the target model's own multi-token-prediction layers unless ``model``
  names others.
- The prompt-lookup window is ngram's only: vLLM zeroes it for the other methods, so a value
  there is a mistake and is refused.

Where the tracker is stricter than vLLM, it says so: ``method`` is always given (vLLM guesses
``draft_model`` from a ``model`` alone, and reads the draft's depth from its config when
``num_speculative_tokens`` is left out), so that a config's version says what it runs.
Whether the vLLM that runs the config has the method is checked against that version's
``--spec-method`` choices (``tracker.inputs.vllm_args``).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

SpecMethod = Literal["ngram", "eagle", "eagle3", "mtp", "draft_model"]
DRAFT_METHODS = frozenset({"eagle", "eagle3", "draft_model"})  # need a model
NGRAM_DEFAULT_LOOKUP = 5  # vLLM's prompt_lookup_min and _max when neither is given


class SpeculativeConfig(BaseModel):
    """``engine.speculative_config``: which drafter proposes tokens and how many per step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: SpecMethod
    num_speculative_tokens: PositiveInt
    model: str | None = Field(default=None, min_length=1)  # the draft model or EAGLE head
    prompt_lookup_max: PositiveInt | None = None  # ngram: the longest n-gram looked up
    prompt_lookup_min: PositiveInt | None = None  # ngram: the shortest

    @field_validator("model")
    @classmethod
    def _model_not_a_flag(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("-") or not value.strip()):
            raise ValueError("must be the draft model's id or path (not empty, not starting "
                             "with '-')")
        return value

    @model_validator(mode="after")
    def _fits_method(self) -> SpeculativeConfig:
        if self.method == "ngram":
            return self._fits_ngram()
        lookup = [k for k in ("prompt_lookup_max", "prompt_lookup_min")
                  if getattr(self, k) is not None]
        if lookup:
            raise ValueError(f"{lookup[0]} is the ngram method's prompt-lookup window; "
                             f"method {self.method} takes none (vLLM sets it to 0): remove it")
        if self.method in DRAFT_METHODS and self.model is None:
            raise ValueError(f"method {self.method} needs model: the draft model's id or path "
                             "(vLLM: num_speculative_tokens was provided but without "
                             "speculative model)")
        return self

    def _fits_ngram(self) -> SpeculativeConfig:
        if self.model is not None:
            raise ValueError("method ngram drafts from the prompt and takes no model; remove "
                             "model (or pick a draft method: eagle, eagle3, mtp, draft_model)")
        low, high = self.lookup_window
        if low > high:
            raise ValueError(f"prompt_lookup_min={low} must be <= prompt_lookup_max={high}")
        return self

    @property
    def lookup_window(self) -> tuple[int, int]:
        """ngram's (min, max) n-gram lengths as vLLM resolves them (one given stands for both,
        and neither means 5 and 5), or (0, 0) for the other methods."""
        if self.method != "ngram":
            return 0, 0
        low, high = self.prompt_lookup_min, self.prompt_lookup_max
        if low is None and high is None:
            return NGRAM_DEFAULT_LOOKUP, NGRAM_DEFAULT_LOOKUP
        return (low or high or NGRAM_DEFAULT_LOOKUP), (high or low or NGRAM_DEFAULT_LOOKUP)

    def as_flag_value(self) -> str:
        """The JSON ``vllm serve --speculative-config`` takes: the keys that were set."""
        return json.dumps(self.model_dump(exclude_none=True), separators=(",", ":"),
                          sort_keys=True)
