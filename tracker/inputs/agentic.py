"""Seeded agent sessions (``prompts: {source: agentic}``): tool calls, think time, sub-agents.

A session is ``user_turns`` user messages behind one system prompt shared by every session (the
agent's instructions and tool definitions). After each user message the agent works in rounds:
the answer calls a tool, and the next request carries the assistant's call and the tool's
result (``tool_result_tokens`` words), sent ``tool_latency_s`` after the answer ended. After
``tool_rounds`` rounds it answers the user, and the user's next message comes ``think_time_s``
later. On user turn ``branches.user_turn`` a first round comes before the tools: the answer calls
``branches.count`` sub-agents at once, each forked from the session's context with a task of
its own and running ``branches.turns`` requests (the task, then one per result of its own tool
calls). The session goes on when the last of them is back, with their last answers as its
results.

Every text is ``generate_words`` of a seed derived from the suite's seed, the workload's name,
the session and the request's place in it (the system prompt: the suite's seed and its length
only, as synthetic prompts derive theirs), so the same suite sends the same bytes anywhere.
Recorded answers (``history: recorded``) are words of each request's ``max_tokens``. Lengths
are in the tracker's word tokens (sent as written, like conversations).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from tracker.inputs.dataset_sampling import OutputDraws
from tracker.inputs.prompt_sources import AgenticPrompts
from tracker.inputs.prompts import derive_seed, generate_words
from tracker.inputs.traffic import (
    PlannedSession,
    PlannedToolCall,
    PlannedTurn,
    ToolCall,
    WorkloadTraffic,
)

TOOL_NAMES = ("search", "read_file", "run_command")
SUBAGENT_TOOL = "subagent"
ARGUMENT_WORDS = 4  # a tool call's query


class _Session:
    """The texts and lengths of one session, each from its own seed."""

    def __init__(self, source: AgenticPrompts, draws: OutputDraws, max_tokens: int, seed: int,
                 name: str, number: int) -> None:
        self.source, self.draws, self.max_tokens = source, draws, max_tokens
        self.seed, self.name, self.number = seed, name, number

    def words(self, count: int, *labels: str | int) -> str:
        return generate_words(derive_seed(self.seed, self.name, "agentic", self.number, *labels),
                              count)

    def turn(self, user: str | None, calls: tuple[PlannedToolCall, ...],
             *labels: str | int) -> PlannedTurn:
        limit = self.draws.next(None)
        answer = self.words(limit or self.max_tokens, "answer", *labels)
        return PlannedTurn(user, answer, limit, calls)

    def tool(self, call_id: str, name: str, *labels: str | int) -> PlannedToolCall:
        arguments = json.dumps({"query": self.words(ARGUMENT_WORDS, "query", *labels)},
                               separators=(",", ":"))
        return PlannedToolCall(ToolCall(call_id, name, arguments),
                               result=self.words(self.source.tool_result_tokens, "result",
                                                 *labels),
                               latency_s=self.source.tool_latency_s)

    def subagent(self, call_id: str, number: int, *labels: str | int) -> PlannedToolCall:
        branches = self.source.branches
        assert branches is not None
        task = self.words(branches.task_tokens, "task", number, *labels)
        turns = []
        for t in range(branches.turns):
            last = t + 1 == branches.turns
            calls = () if last else (self.tool(f"{call_id}_{t + 1}", TOOL_NAMES[t % 3],
                                               "branch", number, t, *labels),)
            turns.append(self.turn(task if t == 0 else None, calls, "branch", number, t,
                                   *labels))
        arguments = json.dumps({"task": task}, separators=(",", ":"))
        return PlannedToolCall(ToolCall(call_id, SUBAGENT_TOOL, arguments),
                               latency_s=self.source.tool_latency_s, branch=tuple(turns))

    def user_turn(self, u: int) -> Iterator[PlannedTurn]:
        """The requests after user message ``u`` (0-based): one per round, then the answer."""
        source, branches = self.source, self.source.branches
        rounds: list[tuple[PlannedToolCall, ...]] = []
        if branches is not None and branches.user_turn == u + 1:
            rounds.append(tuple(self.subagent(f"call_{u + 1}_0_{b + 1}", b, u)
                                for b in range(branches.count)))
        rounds += [(self.tool(f"call_{u + 1}_{r + 1}", TOOL_NAMES[(u + r) % 3], u, r),)
                   for r in range(source.tool_rounds)]
        user: str | None = self.words(source.user_tokens, "user", u)
        for r in range(len(rounds) + 1):
            yield self.turn(user, rounds[r] if r < len(rounds) else (), u, r)
            user = None


def build_agentic_traffic(source: AgenticPrompts, *, seed: int, name: str, total: int,
                          max_tokens: int) -> WorkloadTraffic:
    """``total`` sessions (warm-up first)."""
    tokens = source.system_prompt_tokens
    system = generate_words(derive_seed(seed, "system", tokens), tokens) if tokens else None
    draws = OutputDraws(source.output_tokens, max_tokens, derive_seed(seed, name, "output"))
    sessions = []
    for number in range(total):
        session = _Session(source, draws, max_tokens, seed, name, number)
        turns = tuple(t for u in range(source.user_turns) for t in session.user_turn(u))
        sessions.append(PlannedSession(turns, system))
    return WorkloadTraffic(sessions=tuple(sessions), history=source.history,
                           think_time_s=source.think_time_s)


def iter_agentic_fields(turn: PlannedTurn) -> Iterator[tuple[object, ...] | str | None]:
    """What a turn adds to the prompts digest beyond its question, answer and length: its think
    time, then each call (id, name, arguments, latency, result, and a sub-agent's turns, nested).
    A tuple is hashed as fields, a string or None as a text (tracker.inputs.suites)."""
    yield ("agentic", turn.think_time_s, len(turn.tool_calls))
    for tool in turn.tool_calls:
        yield (tool.latency_s, len(tool.branch))
        yield tool.call.call_id
        yield tool.call.name
        yield tool.call.arguments
        yield tool.result
        for inner in tool.branch:
            yield (inner.max_tokens,)
            yield inner.user
            yield inner.recorded_answer
            yield from iter_agentic_fields(inner)
