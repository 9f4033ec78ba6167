"""Session traces: agentic sessions recorded one request a line, replayed at their times.

``prompts: {source: trace, format: sessions}`` reads a JSONL file of one object per request:

- ``session_id`` (a string or an integer), ``turn`` (1, 2, ... along its line) and ``branch``
  (absent or 0 for the session's main line, ``b >= 1`` for the sub-agent that a tool call with
  ``"branch": b`` forks). A line's requests come in turn order, and sessions may interleave.
- ``timestamp`` (ms on the trace's clock): on the main line's turn 1 only, when the session
  starts. Every later request follows the answer before it: after ``delay_ms`` (think time) or,
  when that answer called tools, once every call is back.
- ``system`` (text) or ``system_length`` (tokens, words generated from the suite's seed and
  ``system_id``, so sessions with the same ``system_id`` share it): main line, turn 1 only.
- ``user`` or ``user_length``: the user's message. Without one, the request carries only the
  results of the tools the turn before called (a line's turn 1 must have one: a branch's is its
  task).
- ``answer`` (the recorded answer, sent back with ``history: recorded``) and ``output_length``
  (the request's ``max_tokens`` under ``output_tokens: recorded``). Where only the answer is
  given, it is the answer's word count, and where neither is, the workload's ``max_tokens``.
- ``tool_calls``: what the answer calls, each ``{"name", "arguments" (an object, or its JSON
  text), "id" (optional), "latency_ms", and "result" or "result_length", or "branch": b}``.

Texts given by length are words seeded by the suite's seed, the workload, the session, the
line, the turn (and the call), so a replay sends the same bytes every night. Sessions are
replayed in the order of their ``timestamp``: the first ``warmup_requests`` from
``start_offset_s`` warm up, the next ``num_requests`` are measured, each started at its time
after the first measured one's, times ``time_scale`` (delays and tool latencies are not scaled).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tracker.errors import ConfigError
from tracker.inputs.datafiles import DataFile, bad_field, parse_json_line
from tracker.inputs.dataset_sampling import OutputDraws
from tracker.inputs.prompt_sources import TracePrompts
from tracker.inputs.prompts import derive_seed, generate_words
from tracker.inputs.traces import MAX_TIMESTAMP_S, parse_token_count
from tracker.inputs.traffic import (
    MAX_PLANNED_S,
    PlannedSession,
    PlannedToolCall,
    PlannedTurn,
    ToolCall,
    WorkloadTraffic,
)
from tracker.inputs.word_tokenizer import count_tokens

WHAT = "a session trace row"
MAX_LATENCY_MS = 86_400_000  # a day: more is a typo of zeros


@dataclass(frozen=True, slots=True)
class TraceCall:
    where: str
    name: str
    arguments: str
    call_id: str | None
    result: str | None
    result_length: int | None
    latency_s: float
    branch: int | None


@dataclass(frozen=True, slots=True)
class TraceRow:
    where: str
    session: str
    branch: int
    turn: int
    timestamp_us: int | None
    system: str | None
    system_length: int | None
    system_id: str | None
    user: str | None
    user_length: int | None
    answer: str | None
    output_length: int | None
    delay_s: float | None
    calls: tuple[TraceCall, ...]


def _text(record: Mapping[str, Any], where: str, field: str) -> str | None:
    value = record.get(field)
    if value is not None and not isinstance(value, str):
        raise bad_field(where, field, "must be a string", value, "fix the row")
    return value


def _length(record: Mapping[str, Any], where: str, field: str) -> int | None:
    value = record.get(field)
    return None if value is None else parse_token_count(value, where, field)


def _either(record: Mapping[str, Any], where: str, text: str,
            length: str) -> tuple[str | None, int | None]:
    if text in record and length in record:
        raise ConfigError(f"{where}: give {text} or {length}, not both")
    return _text(record, where, text), _length(record, where, length)


def _whole(value: Any, where: str, field: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 1_000_000:
        raise bad_field(where, field, f"must be a whole number from {low}", value, "fix the row")
    return value


def _ms(value: Any, where: str, field: str, limit: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= limit:
        raise bad_field(where, field, f"must be a number of milliseconds from 0 to {limit:.0e}",
                        value, "fix the row")
    return float(value)


def parse_call(record: Any, where: str) -> TraceCall:
    if not isinstance(record, dict):
        raise bad_field(where, "tool_calls", "each must be an object", record, "fix the row")
    name = _text(record, where, "name")
    if not name:
        raise bad_field(where, "tool_calls[].name", "required, a non-empty string",
                        record.get("name"), "name the tool")
    arguments = record.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            arguments = None
    if not isinstance(arguments, dict):
        raise bad_field(where, "tool_calls[].arguments", "must be a JSON object (or its text)",
                        record.get("arguments"), "fix the row")
    result, result_length = _either(record, where, "result", "result_length")
    branch = None if record.get("branch") is None else _whole(record["branch"], where,
                                                              "tool_calls[].branch", 1)
    if (branch is None) == (result is None and result_length is None):
        raise ConfigError(f"{where}: tool_calls: a call {name!r} needs exactly one of result, "
                          "result_length (a tool's) or branch (a sub-agent's turns)")
    return TraceCall(where, name, json.dumps(arguments, ensure_ascii=False,
                                             separators=(",", ":")),
                     _text(record, where, "id"), result, result_length,
                     _ms(record.get("latency_ms", 0), where, "latency_ms", MAX_LATENCY_MS) / 1e3,
                     branch)


def parse_session_row(record: Mapping[str, Any], where: str) -> TraceRow:
    session = record.get("session_id")
    if isinstance(session, bool) or not isinstance(session, str | int) or session == "":
        raise bad_field(where, "session_id", "required, a string or an integer", session,
                        "name the session each request belongs to")
    stamp = record.get("timestamp")
    calls = record.get("tool_calls", [])
    if not isinstance(calls, list):
        raise bad_field(where, "tool_calls", "must be a list", calls, "fix the row")
    system, system_length = _either(record, where, "system", "system_length")
    user, user_length = _either(record, where, "user", "user_length")
    delay = record.get("delay_ms")
    return TraceRow(
        where, str(session), _whole(record.get("branch", 0), where, "branch", 0),
        _whole(record.get("turn"), where, "turn", 1),
        None if stamp is None else round(_ms(stamp, where, "timestamp",
                                             MAX_TIMESTAMP_S * 1e3) * 1e3),
        system, system_length, _text(record, where, "system_id"), user, user_length,
        _text(record, where, "answer"), _length(record, where, "output_length"),
        None if delay is None else _ms(delay, where, "delay_ms", MAX_LATENCY_MS) / 1e3,
        tuple(parse_call(call, where) for call in calls))


def read_session_rows(file: DataFile) -> Iterator[TraceRow]:
    for number, text in file.lines():
        if text.strip():
            where = f"{file.path}:{number}"
            yield parse_session_row(parse_json_line(text, where, WHAT), where)


def group_sessions(rows: Iterator[TraceRow]) -> dict[str, dict[int, list[TraceRow]]]:
    """Session id -> line (branch number) -> its rows in turn order (checked)."""
    sessions: dict[str, dict[int, list[TraceRow]]] = {}
    for row in rows:
        line = sessions.setdefault(row.session, {}).setdefault(row.branch, [])
        if row.turn != len(line) + 1:
            raise ConfigError(f"{row.where}: turn: expected {len(line) + 1} (got {row.turn}); "
                              f"the requests of session {row.session!r}"
                              f"{f' branch {row.branch}' if row.branch else ''} come in turn "
                              "order, from 1")
        line.append(row)
    return sessions


class _Builder:
    """One session's rows as a ``PlannedSession``, texts seeded, every rule checked."""

    def __init__(self, lines: dict[int, list[TraceRow]], draws: OutputDraws, max_tokens: int,
                 seed: int, name: str) -> None:
        self.lines, self.draws, self.max_tokens = lines, draws, max_tokens
        self.seed, self.name = seed, name
        self.used: set[int] = set()

    def words(self, count: int, *labels: str | int) -> str:
        return generate_words(derive_seed(self.seed, self.name, "session-trace", *labels), count)

    def build(self, session_id: str) -> tuple[PlannedSession, int]:
        """(the session, its start on the trace's clock in microseconds)."""
        main = self.lines.get(0)
        if main is None:
            first = next(iter(self.lines.values()))[0]
            raise ConfigError(f"{first.where}: session {session_id!r} has branch rows but no "
                              "main line (rows without branch); add its turn 1")
        opening = main[0]
        if opening.timestamp_us is None:
            raise ConfigError(f"{opening.where}: timestamp: required on a session's turn 1 "
                              "(when the session starts)")
        turns = self.line(0)
        unused = sorted(set(self.lines) - self.used - {0})
        if unused:
            raise ConfigError(f"{self.lines[unused[0]][0].where}: branch {unused[0]}: no tool "
                              f"call of session {session_id!r} forks it (\"branch\": "
                              f"{unused[0]}); add the call or remove the rows")
        return PlannedSession(turns, self.system(opening)), opening.timestamp_us

    def system(self, row: TraceRow) -> str | None:
        if row.system_length is None:
            return row.system
        key = row.system_id if row.system_id is not None else f"session {row.session}"
        return generate_words(derive_seed(self.seed, "session-trace-system", key,
                                          row.system_length), row.system_length)

    def line(self, branch: int) -> tuple[PlannedTurn, ...]:
        rows = self.lines[branch]
        turns = []
        for k, row in enumerate(rows):
            self.check(row, rows[k - 1] if k else None, last=k + 1 == len(rows))
            turns.append(self.turn(row, rows[k - 1] if k else None))
        return tuple(turns)

    def check(self, row: TraceRow, before: TraceRow | None, *, last: bool) -> None:
        first = row.branch == 0 and row.turn == 1
        if row.timestamp_us is not None and not first:
            raise ConfigError(f"{row.where}: timestamp: only a session's turn 1 has one; a later "
                              "request follows the answer before it (delay_ms: the wait)")
        if (row.system is not None or row.system_length is not None) and not first:
            raise ConfigError(f"{row.where}: system: only a session's turn 1 sets it")
        called = before is not None and bool(before.calls)
        if row.user is None and row.user_length is None and not called:
            raise ConfigError(f"{row.where}: the request sends nothing: give user or "
                              "user_length (only a request after tool calls carries their "
                              "results alone)")
        if called and row.delay_s is not None:
            raise ConfigError(f"{row.where}: delay_ms: the turn before called tools, so this "
                              "request waits for them (each call's latency_ms); remove delay_ms")
        if last and row.calls:
            raise ConfigError(f"{row.where}: tool_calls: the last request of its line calls "
                              "tools whose results no request sends; add the next turn")

    def turn(self, row: TraceRow, before: TraceRow | None) -> PlannedTurn:
        labels = (row.session, row.branch, row.turn)
        user = row.user if row.user_length is None else self.words(row.user_length, "user",
                                                                   *labels)
        recorded = row.output_length
        if recorded is None and row.answer is not None:
            recorded = count_tokens(row.answer)
        limit = self.draws.next(recorded)
        answer = row.answer if row.answer is not None else self.words(
            limit or recorded or self.max_tokens, "answer", *labels)
        calls = tuple(self.call(row, n, call) for n, call in enumerate(row.calls))
        return PlannedTurn(user, answer, limit, calls, row.delay_s)

    def call(self, row: TraceRow, number: int, call: TraceCall) -> PlannedToolCall:
        call_id = call.call_id or f"call_{row.branch}_{row.turn}_{number + 1}"
        tool = ToolCall(call_id, call.name, call.arguments)
        if call.branch is None:
            result = call.result if call.result_length is None else self.words(
                call.result_length, "result", row.session, row.branch, row.turn, number)
            return PlannedToolCall(tool, result, call.latency_s)
        if call.branch not in self.lines:
            raise ConfigError(f"{call.where}: tool_calls: branch {call.branch}: session "
                              f"{row.session!r} has no rows of that branch")
        if call.branch in self.used:
            raise ConfigError(f"{call.where}: tool_calls: branch {call.branch} is forked twice "
                              "(or by its own turns); each branch is one call's")
        self.used.add(call.branch)
        return PlannedToolCall(tool, None, call.latency_s, self.line(call.branch))


def select_sessions(sessions: list[tuple[PlannedSession, int]], source: TracePrompts,
                    total: int, where: str) -> list[tuple[PlannedSession, int]]:
    """The ``total`` sessions from ``start_offset_s`` on, in order of their start."""
    ordered = sorted(sessions, key=lambda item: item[1])
    if not ordered:
        raise ConfigError(f"{where}: the trace holds no sessions; check the file and its format")
    first = ordered[0][1]
    chosen = [item for item in ordered if item[1] - first >= source.start_offset_s * 1e6]
    if len(chosen) < total:
        after = f" from start_offset_s {source.start_offset_s:g}" if source.start_offset_s else ""
        raise ConfigError(f"{where}: the trace has {len(chosen)} sessions{after} (of "
                          f"{len(ordered)}), but the workload replays {total} (warm-up "
                          "included); lower num_requests or warmup_requests, or start_offset_s")
    return chosen[:total]


def build_session_trace_traffic(file: DataFile, source: TracePrompts, *, seed: int, name: str,
                                warmup: int, total: int, max_tokens: int) -> WorkloadTraffic:
    """``total`` sessions (the first ``warmup`` untimed), each starting at its time."""
    draws = OutputDraws(source.output_tokens, max_tokens, derive_seed(seed, name, "output"))
    built = [_Builder(lines, draws, max_tokens, seed, name).build(session_id)
             for session_id, lines in group_sessions(read_session_rows(file)).items()]
    chosen = select_sessions(built, source, total, str(file.path))
    origin = chosen[min(warmup, len(chosen) - 1)][1]
    span_s = (chosen[-1][1] - origin) / 1e6 * source.time_scale
    if span_s > MAX_PLANNED_S:
        raise ConfigError(f"{file.path}: the last session replayed starts {span_s:.3g} s after "
                          f"the first measured one (time_scale {source.time_scale:g}), past the "
                          f"limit of {MAX_PLANNED_S} s (31 days) for one workload; fix its "
                          "timestamp, or lower time_scale")
    sessions = tuple(
        session if i < warmup else PlannedSession(session.turns, session.system,
                                                  (start - origin) / 1e6 * source.time_scale)
        for i, (session, start) in enumerate(chosen))
    return WorkloadTraffic(sessions=sessions, history=source.history)
