"""Session traces (``prompts: {source: trace, format: sessions}``): agentic sessions, one JSON
line per request, become sessions that start at their times; every bad row is one line that
names the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tracker.errors import ConfigError
from tracker.inputs.suites import LoadedSuite, load_suite
from tracker.inputs.word_tokenizer import count_tokens

ROOT = Path(__file__).resolve().parents[2]
Row = dict[str, Any]


def session(sid: str, timestamp: float, **first: Any) -> list[Row]:
    """Turn 1 calls a tool and two sub-agents; the first sub-agent calls a tool too; turn 2
    carries the three results; turn 3 is the user's next message after a think time."""
    return [
        {"session_id": sid, "turn": 1, "timestamp": timestamp, "system_length": 12,
         "system_id": "app", "user": f"{sid} question", "output_length": 4,
         "tool_calls": [{"name": "search", "arguments": {"q": "x"}, "result": f"{sid} found",
                         "latency_ms": 250},
                        {"name": "subagent", "arguments": "{\"task\": 1}", "branch": 1},
                        {"name": "subagent", "branch": 2, "latency_ms": 10}], **first},
        {"session_id": sid, "branch": 1, "turn": 1, "user_length": 5, "answer": "b1 first",
         "tool_calls": [{"name": "read", "result_length": 6, "id": "r1"}]},
        {"session_id": sid, "branch": 2, "turn": 1, "user": f"{sid} task two", "answer": "b2"},
        {"session_id": sid, "branch": 1, "turn": 2, "answer": "b1 done"},
        {"session_id": sid, "turn": 2, "output_length": 3},
        {"session_id": sid, "turn": 3, "user_length": 2, "delay_ms": 1500},
    ]


def write_rows(tmp_path: Path, rows: list[Row]) -> None:
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows),
                                      encoding="utf-8")


def trace_suite(tmp_path: Path, rows: list[Row], options: str = "", *, num: int = 2,
                warmup: int = 0) -> LoadedSuite:
    write_rows(tmp_path, rows)
    path = tmp_path / "suite.yaml"
    path.write_text(f"""\
name: s
seed: 5
workloads:
  - name: w
    prompts: {{source: trace, format: sessions, path: t.jsonl{options}}}
    max_tokens: 9
    num_requests: {num}
    warmup_requests: {warmup}
""", encoding="utf-8")
    return load_suite(path)


def test_a_session_trace_becomes_sessions_with_tools_branches_and_think_time(
        tmp_path: Path) -> None:
    rows = [*session("a", 1000), *session("b", 3500)]
    traffic = trace_suite(tmp_path, rows).traffic["w"]
    a, b = traffic.sessions
    assert (a.arrival_s, b.arrival_s) == (0.0, 2.5)
    assert a.system == b.system and a.system is not None and count_tokens(a.system) == 12
    first, second, third = a.turns
    assert first.user == "a question" and first.max_tokens == 4
    search, one, two = first.tool_calls
    assert (search.call.call_id, search.call.name, search.call.arguments) == \
        ("call_0_1_1", "search", '{"q":"x"}')
    assert (search.result, search.latency_s) == ("a found", 0.25)
    assert one.call.arguments == '{"task":1}' and one.result is None
    assert [t.recorded_answer for t in one.branch] == ["b1 first", "b1 done"]
    assert one.branch[0].tool_calls[0].call.call_id == "r1"
    assert count_tokens(one.branch[0].tool_calls[0].result or "") == 6
    assert [t.user for t in two.branch] == ["a task two"] and two.latency_s == 0.01
    assert second.user is None and second.max_tokens == 3 and second.think_time_s is None
    assert third.think_time_s == 1.5 and third.user is not None and count_tokens(third.user) == 2
    assert third.max_tokens is None  # nothing recorded: the workload's max_tokens
    assert count_tokens(third.recorded_answer or "") == 9
    assert one.branch[0].max_tokens == 2  # the recorded answer's word count


def test_sessions_replay_from_the_offset_in_time_order_scaled(tmp_path: Path) -> None:
    rows = [*session("late", 9000), *session("a", 1000), *session("b", 3000),
            *session("c", 4000)]
    traffic = trace_suite(tmp_path, rows, ", start_offset_s: 1.5, time_scale: 0.5",
                          warmup=1).traffic["w"]
    assert [s.turns[0].user for s in traffic.sessions] == \
        ["b question", "c question", "late question"]
    assert [s.arrival_s for s in traffic.sessions] == [None, 0.0, 2.5]


def test_the_shipped_session_trace_is_replayed_by_the_agentic_suite() -> None:
    suite = load_suite(ROOT / "baselines" / "agentic-sessions.yaml")
    traffic = suite.traffic["agent-trace"]
    assert traffic.history == "recorded"
    assert [s.arrival_s for s in traffic.sessions] == [None, 0.0, 0.15, 0.3]
    assert all(len(s.turns) == 4 for s in traffic.sessions)


def replace_row(rows: list[Row], index: int, **changes: Any) -> list[Row]:
    row = {k: v for k, v in rows[index].items() if changes.get(k, 0) is not None}
    row.update({k: v for k, v in changes.items() if v is not None})
    return [*rows[:index], row, *rows[index + 1:]]


BASE = session("a", 0)


@pytest.mark.parametrize(("rows", "message"), [
    (replace_row(BASE, 0, timestamp=None),
     ":1: timestamp: required on a session's turn 1"),
    (replace_row(BASE, 4, timestamp=5), ":5: timestamp: only a session's turn 1 has one"),
    (replace_row(BASE, 3, turn=3), ":4: turn: expected 2 \\(got 3\\); the requests of session "
     "'a' branch 1 come in turn order"),
    (replace_row(BASE, 5, user_length=None), ":6: the request sends nothing"),
    (replace_row(BASE, 4, delay_ms=5), ":5: delay_ms: the turn before called tools"),
    (replace_row(BASE, 5, tool_calls=[{"name": "t", "result": "r"}]),
     ":6: tool_calls: the last request of its line calls tools"),
    (replace_row(BASE, 2, branch=3), ":1: tool_calls: branch 2: session 'a' has no rows"),
    ([*BASE, {"session_id": "a", "branch": 7, "turn": 1, "user": "x"}],
     ":7: branch 7: no tool call of session 'a' forks it"),
    (replace_row(BASE, 0, tool_calls=[{"name": "t", "result": "r", "branch": 1}]),
     ":1: tool_calls: a call 't' needs exactly one of result"),
    (replace_row(BASE, 0, tool_calls=[{"name": "t", "result": "r", "latency_ms": -1}]),
     ":1: latency_ms: must be a number of milliseconds"),
    (replace_row(BASE, 0, tool_calls=[{"name": "t", "arguments": "[1]", "result": "r"}]),
     ":1: tool_calls\\[\\].arguments: must be a JSON object"),
    (replace_row(BASE, 0, user_length=3), ":1: give user or user_length, not both"),
    (replace_row(BASE, 1, system="s"), ":2: system: only a session's turn 1 sets it"),
    (replace_row(BASE, 0, session_id=None), ":1: session_id: required"),
    (replace_row(BASE, 1, user_length=0), ":2: user_length: must be a positive integer"),
    ([row for row in BASE if row.get("branch") != 0 and "branch" in row],
     "session 'a' has branch rows but no main line"),
])
def test_a_bad_row_is_refused_with_its_line_and_field(tmp_path: Path, rows: list[Row],
                                                      message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        trace_suite(tmp_path, rows, num=1)


def test_a_trace_with_too_few_sessions_says_how_many_it_has(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"the trace has 1 sessions \(of 1\), but the "
                                          r"workload replays 2"):
        trace_suite(tmp_path, BASE, num=2)


def test_history_applies_to_session_traces_only(tmp_path: Path) -> None:
    (tmp_path / "m.jsonl").write_text('{"timestamp": 0, "input_length": 3, "output_length": 2}\n',
                                      encoding="utf-8")
    path = tmp_path / "suite.yaml"
    path.write_text("""\
name: s
workloads:
  - name: w
    prompts: {source: trace, format: mooncake, path: m.jsonl, history: recorded}
    max_tokens: 9
    num_requests: 1
""", encoding="utf-8")
    with pytest.raises(ConfigError, match="history applies to format sessions only"):
        load_suite(path)
