"""A workload's prompt source, as a suite file writes it (``prompts:``), validated at the boundary.

- ``synthetic``: seeded words of ``input_tokens`` each, behind an optional shared system prompt.
- ``fixed``: one prompt sent by every request.
- ``dataset``: single-turn prompts sampled from a file (ShareGPT JSON, OpenAI chat JSONL or plain
  JSONL, read by tracker.inputs.datasets).
- ``trace``: a production trace replayed at its recorded times (Mooncake JSONL or Azure CSV,
  read by tracker.inputs.traces).
- ``conversations``: multi-turn sessions from a file (ShareGPT JSON or OpenAI chat JSONL, read
  by tracker.inputs.conversations).
- ``agentic``: seeded agent sessions: tool calls whose results come back after the tool's
  latency, think time, a context that grows with every result, sub-agents forked in parallel
  from the session's context (tracker.inputs.agentic). A ``trace`` of ``format: sessions``
  replays recorded ones at their times (tracker.inputs.session_traces).

A file's ``path`` is relative to the suite file. Its sha256 is part of the suite's version, and
``sha256:`` pins it (a file with other content is refused).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
# More than any model's context or any suite's requests: a value past these is a typo of zeros,
# refused with the limit instead of a prompt built until memory runs out.
MAX_REQUEST_TOKENS = 2_000_000
MAX_REQUESTS = 10_000_000
MAX_CONCURRENCY = 100_000
RequestTokens = Annotated[int, Field(gt=0, le=MAX_REQUEST_TOKENS)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SyntheticPrompts(_Strict):
    """Seeded prompts of ``input_tokens`` words each, unique per request."""

    source: Literal["synthetic"]
    input_tokens: RequestTokens
    system_prompt_tokens: Annotated[int, Field(ge=0, le=MAX_REQUEST_TOKENS)] = 0  # shared by all


class FixedPrompt(_Strict):
    """One prompt sent by every request (the hand-written load script's shape)."""

    source: Literal["fixed"]
    text: str = Field(min_length=1)
    system_prompt: str | None = None


class OutputLengths(_Strict):
    """Each request's ``max_tokens``: the ``recorded`` length (a dataset's answer or a trace's
    output length, or the workload's ``max_tokens`` where none is recorded), the workload's
    ``max_tokens`` for all (``fixed``), or a seeded draw: ``uniform`` in [min_tokens,
    max_tokens], or ``lognormal`` around ``median_tokens`` with shape ``sigma``, clipped to
    [min_tokens, max_tokens]. ``max_tokens`` defaults to the workload's. A plain string is the
    distribution: ``output_tokens: fixed``."""

    distribution: Literal["recorded", "fixed", "uniform", "lognormal"] = "recorded"
    min_tokens: RequestTokens = 1
    max_tokens: RequestTokens | None = None
    median_tokens: PositiveFloat | None = None
    sigma: PositiveFloat | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        return {"distribution": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _parameters_fit(self) -> OutputLengths:
        drawn = self.distribution in ("uniform", "lognormal")
        given = self.model_fields_set - {"distribution"}
        if not drawn and given:
            raise ValueError(f"{', '.join(sorted(given))} apply to distribution uniform or "
                             f"lognormal only, not {self.distribution}")
        if self.distribution == "lognormal" and (self.median_tokens is None or self.sigma is None):
            raise ValueError("lognormal needs median_tokens and sigma, e.g. {distribution: "
                             "lognormal, median_tokens: 128, sigma: 0.7}")
        if self.distribution == "uniform" and (self.median_tokens or self.sigma):
            raise ValueError("median_tokens and sigma apply to lognormal only")
        if self.max_tokens is not None and self.max_tokens < self.min_tokens:
            raise ValueError(f"max_tokens {self.max_tokens} is below min_tokens {self.min_tokens}")
        return self


def _check_range(low: int, high: int | None, what: str) -> None:
    if high is not None and high < low:
        raise ValueError(f"max_{what} {high} is below min_{what} {low}")


class DatasetPrompts(_Strict):
    """Single-turn prompts sampled (seeded) from a dataset file: one request per item, the
    item's first question (behind its system prompt, if any)."""

    source: Literal["dataset"]
    path: str = Field(min_length=1)
    format: Literal["sharegpt", "openai-chat", "jsonl"]
    sha256: Sha256 | None = None
    min_input_tokens: PositiveInt = 1  # filters, in the tracker's word tokens
    max_input_tokens: PositiveInt | None = None
    min_output_tokens: PositiveInt = 1  # on the recorded answer, where there is one
    max_output_tokens: PositiveInt | None = None
    output_tokens: OutputLengths = OutputLengths()

    @model_validator(mode="after")
    def _ranges(self) -> DatasetPrompts:
        _check_range(self.min_input_tokens, self.max_input_tokens, "input_tokens")
        _check_range(self.min_output_tokens, self.max_output_tokens, "output_tokens")
        return self


class TracePrompts(_Strict):
    """A trace replayed at its recorded times: a Mooncake JSONL (``hash_ids`` blocks of
    ``block_tokens``, equal ids equal content), an Azure LLM inference trace CSV, or a JSONL of
    agentic sessions (``sessions``: each session starts at its time and its turns follow their
    answers, with ``history`` as for conversations)."""

    source: Literal["trace"]
    path: str = Field(min_length=1)
    format: Literal["mooncake", "azure", "sessions"]
    sha256: Sha256 | None = None
    block_tokens: PositiveInt = 512  # mooncake: tokens per hash id
    time_scale: PositiveFloat = 1.0  # gaps are multiplied by it: 0.5 replays twice as fast
    start_offset_s: NonNegativeFloat = 0.0  # skip the trace's first seconds
    output_tokens: OutputLengths = OutputLengths()
    history: Literal["live", "recorded"] = "live"  # sessions: the assistant turns sent back

    @model_validator(mode="after")
    def _blocks_for_mooncake(self) -> TracePrompts:
        if self.format != "mooncake" and "block_tokens" in self.model_fields_set:
            raise ValueError("block_tokens applies to format mooncake only (the other "
                             "formats have no hash ids)")
        if self.format != "sessions" and "history" in self.model_fields_set:
            raise ValueError("history applies to format sessions only (a trace of single "
                             "requests sends no history)")
        return self


class ConversationPrompts(_Strict):
    """Multi-turn sessions sampled (seeded) from a file of conversations: each user turn sent
    after the previous answer, every request carrying the whole history."""

    source: Literal["conversations"]
    path: str = Field(min_length=1)
    format: Literal["sharegpt", "openai-chat"]
    sha256: Sha256 | None = None
    history: Literal["live", "recorded"] = "live"  # the assistant turns sent back
    think_time_s: NonNegativeFloat = 0.0  # between an answer and the next user turn
    min_turns: PositiveInt = 1  # shorter conversations are skipped
    max_turns: PositiveInt | None = None  # longer ones are cut to this many user turns
    max_input_tokens: PositiveInt | None = None  # skip sessions whose last request is longer
    output_tokens: OutputLengths = OutputLengths()

    @model_validator(mode="after")
    def _turns(self) -> ConversationPrompts:
        _check_range(self.min_turns, self.max_turns, "turns")
        return self


class AgenticBranches(_Strict):
    """Sub-agents forked in parallel by the first answer to user turn ``user_turn``: each gets
    the session's context (that request and its answer) and its own task, then runs ``turns``
    requests (the task, then one per result of its own tool calls). Their last answers come back
    as the calls' results."""

    count: Annotated[int, Field(ge=1, le=256)]
    turns: Annotated[int, Field(ge=1, le=1000)] = 2
    task_tokens: RequestTokens = 64
    user_turn: PositiveInt = 1


class AgenticPrompts(_Strict):
    """Seeded agent sessions, with no data file: ``user_turns`` user messages.

    After each, the answer calls a tool ``tool_rounds`` times in a row. Each result
    (``tool_result_tokens`` words) comes back ``tool_latency_s`` after the answer, and the next
    request carries it. Then comes the answer to the user, ``think_time_s`` before the next user
    message. Every request carries the whole session: the context grows by each question, answer
    and result."""

    source: Literal["agentic"]
    system_prompt_tokens: Annotated[int, Field(ge=0, le=MAX_REQUEST_TOKENS)] = 0  # shared by all
    user_turns: Annotated[int, Field(ge=1, le=1000)] = 1
    user_tokens: RequestTokens
    tool_rounds: Annotated[int, Field(ge=0, le=1000)] = 1
    tool_result_tokens: RequestTokens = 128
    tool_latency_s: NonNegativeFloat = 0.0
    think_time_s: NonNegativeFloat = 0.0
    branches: AgenticBranches | None = None
    history: Literal["live", "recorded"] = "live"
    output_tokens: OutputLengths = OutputLengths()

    @model_validator(mode="after")
    def _branch_turn(self) -> AgenticPrompts:
        if self.branches is not None and self.branches.user_turn > self.user_turns:
            raise ValueError(f"branches.user_turn {self.branches.user_turn} is past the last "
                             f"user turn ({self.user_turns})")
        return self


FileSource = DatasetPrompts | TracePrompts | ConversationPrompts
PromptSource = Annotated[SyntheticPrompts | FixedPrompt | DatasetPrompts | TracePrompts
                         | ConversationPrompts | AgenticPrompts, Field(discriminator="source")]
