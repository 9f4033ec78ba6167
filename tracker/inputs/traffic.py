"""What a workload sends, before anything is timed: planned requests, or multi-turn sessions.

A suite's prompt source (synthetic words, a fixed prompt, a dataset, a production trace, or
conversations) is turned into one of two shapes, both pure values:

- ``PlannedRequest``s, one per request (warm-up first): the messages to send, an optional
  per-request ``max_tokens`` (a dataset's recorded answer length, a trace's output length) and,
  for a trace, the planned start on the trace's clock (``arrival_s``, after time scaling).
- ``PlannedSession``s: a conversation's user turns, sent one after another by the load generator,
  each request carrying the whole history. The history's assistant turns are the model's live
  answers (``history: live``, what production does) or the recorded ones (``history: recorded``,
  byte-identical requests every night). ``think_time_s`` passes between an answer and the next
  turn. An agentic session's answer may call tools (``PlannedToolCall``): the next request
  carries the assistant's tool calls and each tool's result, sent after the tool's latency. A
  call may be a sub-agent, a branch of turns forked from the session's context, run in parallel
  with the other calls, whose last answer is its result (tracker.load.session_steps lays the
  requests out).

The load generator (``tracker.load``) builds request bodies from these, and the simulator and real
engines see the same bytes. ``requested_input_tokens`` is what the suite asked for in the tokenizer
it was built with (``tokenizer`` names it: ``words`` for the tracker's own, or the target's), so a
run can record it beside the server's ``usage.prompt_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["system", "user", "assistant", "tool"]
# The longest a workload's plan may run (a trace's replay, requests at a planned rate): past any
# real nightly or gate run, so a typo (a rate of 1e-7, a row 10^12 ms late) cannot sleep for years.
MAX_PLANNED_S = 31 * 86_400


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as an assistant message carries it (OpenAI chat: ``tool_calls[i]``)."""

    call_id: str  # seeded: the same id every run
    name: str
    arguments: str  # JSON text, as OpenAI's ``function.arguments``


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()  # assistant: the tools its answer called
    tool_call_id: str | None = None  # tool: the call whose result this is


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request of a flat workload (synthetic, fixed, dataset, trace)."""

    messages: tuple[Message, ...]  # chat order; completions send them joined (system, then user)
    max_tokens: int | None = None  # None: the workload's max_tokens
    arrival_s: float | None = None  # trace replay: planned start, s after the trace's first row
    requested_input_tokens: int | None = None  # what the source asked for, in ``tokenizer``


@dataclass(frozen=True, slots=True)
class PlannedTurn:
    """One request of a session: the user's message (None: the request carries only the results
    of the tools the turn before called), the recorded answer and its length. ``tool_calls`` are
    the tools the answer calls (their results go into the next turn). ``think_time_s`` is the
    wait after the answer before, when that answer called no tools (None: the workload's)."""

    user: str | None
    recorded_answer: str | None = None  # the dataset's assistant turn (history: recorded)
    max_tokens: int | None = None  # None: the workload's max_tokens
    tool_calls: tuple[PlannedToolCall, ...] = ()
    think_time_s: float | None = None


@dataclass(frozen=True, slots=True)
class PlannedToolCall:
    """A tool the answer of a turn calls: a plain tool's ``result`` comes back ``latency_s`` after
    the answer ended. A sub-agent (``branch``: its turns) is forked then, ``latency_s`` after it,
    from the session's context (the request of the calling turn and its answer), and its last
    answer is the result. A turn's calls run in parallel, and the next turn waits for all of
    them."""

    call: ToolCall
    result: str | None = None  # None exactly for a sub-agent
    latency_s: float = 0.0
    branch: tuple[PlannedTurn, ...] = ()


@dataclass(frozen=True, slots=True)
class PlannedSession:
    """A conversation sent turn by turn, with ``system`` opening every request of it.

    ``arrival_s`` is a session trace's planned start, in s after the first measured session's
    (None: the shape's)."""

    turns: tuple[PlannedTurn, ...]
    system: str | None = None
    arrival_s: float | None = None

    @property
    def agentic(self) -> bool:
        """Whether any turn calls a tool or sets its own think time."""
        return any(t.tool_calls or t.think_time_s is not None for t in self.turns)


@dataclass(frozen=True, slots=True)
class WorkloadTraffic:
    """Exactly one of ``requests`` (flat) or ``sessions`` (multi-turn) is non-empty."""

    requests: tuple[PlannedRequest, ...] = ()
    sessions: tuple[PlannedSession, ...] = ()
    history: Literal["live", "recorded"] = "live"
    think_time_s: float = 0.0
    tokenizer: str = "words"  # whose token counts requested_input_tokens are

    def __post_init__(self) -> None:
        if bool(self.requests) == bool(self.sessions):
            raise ValueError("a workload's traffic is either requests or sessions, not both")


def describe_fallback(tokenizer: str, fallback: str) -> str:
    """The one line a run, ``tracker bench`` and the run report print when the prompt lengths
    are not in the model's tokenizer."""
    return f"prompt lengths are in {tokenizer}, not the model's tokenizer: {fallback}"
