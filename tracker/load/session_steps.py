"""A session's requests laid out in plan order, and the messages each one carries (pure).

A plain conversation is one line of turns. An agentic session's answer may call tools
(``PlannedToolCall``): the next turn of its line carries the assistant message with those calls
and one ``tool`` message per call, with the tool's result. A call may be a sub-agent: a branch,
a line of turns of its own, forked from the session's context when the calling answer ended.

- **Plan order** (``Step.position``, the offset of a request's record index within its session):
  depth first: a turn, then the branches its answer calls (each whole, in call order), then the
  next turn of its line. It does not depend on timing, so a request has the same index every run.
- **Depth** (``Step.depth``, the record's ``turn``): 1 + the requests before it on its path from
  the session's start. Turn ``k`` of the main line has depth ``k``. Turn ``j`` of a branch
  forked by turn ``k`` has depth ``k + j``, since it carries that turn's request and answer. So a
  branch's requests count among the later turns (``/turns-2+``), where the prefix is shared.
- **Messages** of a step: its line's opening, then for each earlier turn of the line what that
  turn sent and the answer (an ``assistant`` message, with the tool calls it made), then what
  this turn sends: the results of the previous turn's calls (a plain tool's recorded result, a
  sub-agent's last answer), then the user's message, if any. The main line opens with the system
  prompt. A branch opens with the whole request of the turn that called it and that turn's
  answer (its text, without the calls), so every branch of a fork shares that prefix with its
  siblings and with the next turn of the calling line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tracker.inputs.traffic import Message, PlannedSession, PlannedTurn

Answers = Mapping[int, str] | Sequence[str]  # by step position (a list: positions 0, 1, ...)


@dataclass(frozen=True, slots=True)
class Step:
    position: int  # plan order within the session
    line: int  # 0: the main line; then each branch, in plan order
    number: int  # 0-based within its line
    depth: int  # 1 + the requests before it on its path: the record's ``turn``
    turn: PlannedTurn


@dataclass(frozen=True, slots=True)
class Line:
    """A run of turns: the main line (``parent`` None) or a sub-agent's branch, forked by the
    answer of step ``parent`` (its call number ``call``)."""

    parent: int | None
    call: int | None
    steps: tuple[int, ...]  # positions, in order


@dataclass(frozen=True, slots=True)
class SessionSteps:
    session: PlannedSession
    steps: tuple[Step, ...]
    lines: tuple[Line, ...]
    branches: Mapping[tuple[int, int], int]  # (calling step, call number) -> its line

    @property
    def depths(self) -> tuple[int, ...]:
        return tuple(step.depth for step in self.steps)

    @property
    def width(self) -> int:
        """The most requests of the session that can be in flight at once."""
        return _width(self, 0)

    def last_of(self, line: int) -> int:
        return self.lines[line].steps[-1]

    def previous(self, position: int) -> Step | None:
        """The step before ``position`` on its line (None: the line's first)."""
        step = self.steps[position]
        return self.steps[self.lines[step.line].steps[step.number - 1]] if step.number else None


def layout_session(session: PlannedSession) -> SessionSteps:
    steps: list[Step] = []
    lines: list[Line | None] = []
    branches: dict[tuple[int, int], int] = {}

    def add_line(turns: Sequence[PlannedTurn], parent: int | None, call: int | None,
                 depth: int) -> int:
        number = len(lines)
        lines.append(None)
        positions = []
        for k, turn in enumerate(turns):
            position = len(steps)
            steps.append(Step(position, number, k, depth + k + 1, turn))
            positions.append(position)
            for c, tool in enumerate(turn.tool_calls):
                if tool.branch:
                    branches[position, c] = add_line(tool.branch, position, c, depth + k + 1)
        lines[number] = Line(parent, call, tuple(positions))
        return number

    add_line(session.turns, None, None, 0)
    return SessionSteps(session, tuple(steps), tuple(line for line in lines if line is not None),
                        branches)


def _width(steps: SessionSteps, line: int) -> int:
    widest = 1
    for position in steps.lines[line].steps:
        calls = steps.steps[position].turn.tool_calls
        fork = sum(_width(steps, steps.branches[position, c])
                   for c, call in enumerate(calls) if call.branch)
        widest = max(widest, fork)
    return widest


def needs_answer(steps: SessionSteps, position: int) -> bool:
    """Whether a later request carries the answer to ``position``: every answer but the main
    line's last (a branch's last answer is its call's result)."""
    return position != steps.last_of(0)


def compute_step_messages(steps: SessionSteps, position: int,
                          answers: Answers) -> tuple[Message, ...]:
    """The messages request ``position`` sends, given the answers to the requests before it
    (``answers[p]`` for step ``p``: the model's, or the recorded one)."""
    step = steps.steps[position]
    line = steps.lines[step.line]
    if line.parent is None:
        system = steps.session.system
        messages = [Message("system", system)] if system else []
    else:
        messages = [*compute_step_messages(steps, line.parent, answers),
                    Message("assistant", answers[line.parent])]
    for earlier in line.steps[: step.number]:
        messages += _sent_by(steps, earlier, answers)
        calls = tuple(call.call for call in steps.steps[earlier].turn.tool_calls)
        messages.append(Message("assistant", answers[earlier], tool_calls=calls))
    messages += _sent_by(steps, position, answers)
    return tuple(messages)


def _sent_by(steps: SessionSteps, position: int, answers: Answers) -> list[Message]:
    """What request ``position`` adds: the results of the previous turn's calls, then the
    user's message."""
    step, before = steps.steps[position], steps.previous(position)
    out = []
    if before is not None:
        for c, call in enumerate(before.turn.tool_calls):
            result = call.result if call.result is not None \
                else answers[steps.last_of(steps.branches[before.position, c])]
            out.append(Message("tool", result, tool_call_id=call.call.call_id))
    if step.turn.user is not None:
        out.append(Message("user", step.turn.user))
    return out
