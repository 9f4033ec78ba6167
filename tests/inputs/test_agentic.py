"""``prompts: {source: agentic}``: seeded agent sessions with tool rounds, think time and
sub-agent branches; the same suite gives the same sessions, and what they send is versioned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracker.errors import ConfigError
from tracker.inputs.agentic import SUBAGENT_TOOL, TOOL_NAMES
from tracker.inputs.suites import LoadedSuite, load_suite
from tracker.inputs.word_tokenizer import count_tokens

ROOT = Path(__file__).resolve().parents[2]
AGENTIC = ("{source: agentic, system_prompt_tokens: 40, user_turns: 2, user_tokens: 6, "
           "tool_rounds: 2, tool_result_tokens: 9, tool_latency_s: 0.25, think_time_s: 0.5, "
           "branches: {count: 3, turns: 2, task_tokens: 5}")


def agentic_suite(tmp_path: Path, prompts: str = AGENTIC + "}", *, seed: int = 3,
                  extra: str = "") -> LoadedSuite:
    path = tmp_path / "suite.yaml"
    path.write_text(f"""\
name: s
seed: {seed}
workloads:
  - name: agent
    prompts: {prompts}
    max_tokens: 7
    concurrency: 2
    num_requests: 2
    warmup_requests: 1
{extra}""", encoding="utf-8")
    return load_suite(path)


def test_a_session_is_user_turns_tool_rounds_and_a_fork_of_sub_agents(tmp_path: Path) -> None:
    traffic = agentic_suite(tmp_path).traffic["agent"]
    assert len(traffic.sessions) == 3 and traffic.think_time_s == 0.5
    session = traffic.sessions[0]
    assert session.system is not None and count_tokens(session.system) == 40
    # user turn 1: the question, a fork of three sub-agents, two tool rounds, the answer;
    # user turn 2: the question, two tool rounds, the answer
    users = [turn.user is not None for turn in session.turns]
    assert users == [True, False, False, False, True, False, False]
    calls = [[c.call.name for c in turn.tool_calls] for turn in session.turns]
    assert calls == [[SUBAGENT_TOOL] * 3, [TOOL_NAMES[0]], [TOOL_NAMES[1]], [],
                     [TOOL_NAMES[1]], [TOOL_NAMES[2]], []]
    for call in session.turns[0].tool_calls:
        first, second = call.branch
        assert first.user is not None and count_tokens(first.user) == 5
        assert json.loads(call.call.arguments) == {"task": first.user}
        assert second.user is None and not second.tool_calls
        (tool,) = first.tool_calls
        assert tool.result is not None and count_tokens(tool.result) == 9
        assert call.result is None and call.latency_s == tool.latency_s == 0.25
    ids = [c.call.call_id for turn in session.turns for c in turn.tool_calls]
    ids += [c.call.call_id for call in session.turns[0].tool_calls for turn in call.branch
            for c in turn.tool_calls]
    assert len(set(ids)) == len(ids) == 3 + 4 + 3
    assert all(count_tokens(turn.recorded_answer or "") == 7 for turn in session.turns)


def test_the_same_suite_gives_the_same_sessions_and_another_seed_others(tmp_path: Path) -> None:
    one, two = agentic_suite(tmp_path), agentic_suite(tmp_path)
    assert one.traffic == two.traffic and one.version == two.version
    other = agentic_suite(tmp_path, seed=4)
    assert other.traffic["agent"].sessions[0].turns != one.traffic["agent"].sessions[0].turns
    sessions = one.traffic["agent"].sessions
    assert sessions[0].system == sessions[1].system  # shared by every session
    assert sessions[0].turns[0].user != sessions[1].turns[0].user


@pytest.mark.parametrize("change", [
    "tool_latency_s: 0.25", "think_time_s: 0.5", "tool_result_tokens: 9",
    "branches: {count: 3, turns: 2, task_tokens: 5}"])
def test_what_a_session_sends_and_when_is_part_of_the_suite_version(
        tmp_path: Path, change: str) -> None:
    base = agentic_suite(tmp_path)
    changed = AGENTIC.replace(change, change.replace("0.25", "0.3").replace("0.5", "0.75")
                              .replace(": 9", ": 10").replace("count: 3", "count: 2"))
    assert changed != AGENTIC
    assert agentic_suite(tmp_path, changed + "}").version != base.version


def test_the_shipped_multi_turn_suite_keeps_its_version() -> None:
    """Sessions without tool calls hash as they did before agentic sessions existed (the value
    the tracker computed for this suite then), so their stored runs stay comparable."""
    suite = load_suite(ROOT / "baselines" / "multi-turn-chat.yaml")
    assert not any(s.agentic for t in suite.traffic.values() for s in t.sessions)
    assert suite.prompts_digest == \
        "fb857c8d76e5e3618803f5efcd117f7565c304d12607afc6bedb170eed514537"


@pytest.mark.parametrize(("prompts", "message"), [
    (AGENTIC.replace("task_tokens: 5", "task_tokens: 5, user_turn: 3") + "}",
     "branches.user_turn 3 is past the last user turn"),
    (AGENTIC + ", tool_calls: 2}", "tool_calls"),
    (AGENTIC.replace("count: 3", "count: 0") + "}", "branches.count"),
    (AGENTIC.replace("tool_latency_s: 0.25", "tool_latency_s: -1") + "}", "tool_latency_s"),
])
def test_a_bad_agentic_source_is_refused_with_the_field(tmp_path: Path, prompts: str,
                                                        message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        agentic_suite(tmp_path, prompts)
