"""Conversation sources: multi-turn sessions from ShareGPT or OpenAI chat files, seeded, with
live or recorded history; num_requests counts sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracker.errors import ConfigError
from tracker.inputs.suites import load_suite
from tracker.inputs.traffic import PlannedSession, PlannedTurn


def chat(system: str | None, *turns: tuple[str, str | None]) -> dict[str, object]:
    messages = [{"role": "system", "content": system}] if system else []
    for user, answer in turns:
        messages.append({"role": "user", "content": user})
        if answer is not None:
            messages.append({"role": "assistant", "content": answer})
    return {"messages": messages}


CONVERSATIONS = [
    chat("be brief", ("hello", "hi there"), ("how are you", "fine thanks"), ("bye", "see you")),
    chat(None, ("one question", "one answer")),
    chat("be kind", ("first", "a b c d e f g h i j k l"), ("second", None)),
    chat("be brief", ("alpha", "beta"), ("gamma", "delta"), ("epsilon", "zeta"),
         ("eta", "theta"), ("iota", "kappa")),
]


def write_suite(tmp_path: Path, options: str = "", *, num: int, warmup: int = 0,
                shape: str = "    concurrency: 2\n", fmt: str = "openai-chat") -> Path:
    (tmp_path / "chats.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS),
                                          encoding="utf-8")
    path = tmp_path / "suite.yaml"
    path.write_text(f"""\
name: s
seed: 4
workloads:
  - name: w
    prompts: {{source: conversations, path: chats.jsonl, format: {fmt}{options}}}
    max_tokens: 16
    num_requests: {num}
    warmup_requests: {warmup}
{shape}""", encoding="utf-8")
    return path


def sessions_of(path: Path) -> tuple[PlannedSession, ...]:
    return load_suite(path).traffic["w"].sessions


def test_each_conversation_is_a_session_of_its_turns_with_recorded_answers(
    tmp_path: Path,
) -> None:
    traffic = load_suite(write_suite(tmp_path, num=4)).traffic["w"]
    assert not traffic.requests and len(traffic.sessions) == 4  # num_requests counts sessions
    assert traffic.history == "live" and traffic.think_time_s == 0.0
    by_first = {s.turns[0].user: s for s in traffic.sessions}
    brief = by_first["hello"]
    assert brief.system == "be brief"
    assert brief.turns == (PlannedTurn("hello", "hi there", 2), PlannedTurn("how are you",
                                                                            "fine thanks", 2),
                           PlannedTurn("bye", "see you", 2))
    assert by_first["first"].turns[-1] == PlannedTurn("second", None, None)  # nothing recorded
    assert by_first["one question"].system is None


def test_history_think_time_and_fixed_outputs_are_carried(tmp_path: Path) -> None:
    path = write_suite(tmp_path, ", history: recorded, think_time_s: 1.5, output_tokens: fixed",
                       num=2, warmup=1)
    traffic = load_suite(path).traffic["w"]
    assert (traffic.history, traffic.think_time_s, len(traffic.sessions)) == ("recorded", 1.5, 3)
    assert {t.max_tokens for s in traffic.sessions for t in s.turns} == {None}


def test_turn_filters_skip_short_conversations_and_cut_long_ones(tmp_path: Path) -> None:
    sessions = sessions_of(write_suite(tmp_path, ", min_turns: 2, max_turns: 3", num=3))
    assert sorted(len(s.turns) for s in sessions) == [2, 3, 3]
    assert {s.turns[0].user for s in sessions} == {"hello", "first", "alpha"}
    long = next(s for s in sessions if s.turns[0].user == "alpha")
    assert [t.user for t in long.turns] == ["alpha", "gamma", "epsilon"]


def test_max_input_tokens_skips_sessions_whose_last_request_is_too_long(tmp_path: Path) -> None:
    """The last request of 'first': system 2 + questions 2 + the first answer's 12 = 16."""
    sessions = sessions_of(write_suite(tmp_path, ", max_input_tokens: 15", num=3))
    assert "first" not in {s.turns[0].user for s in sessions}
    kept = sessions_of(write_suite(tmp_path, ", max_input_tokens: 16", num=4))
    assert "first" in {s.turns[0].user for s in kept}


def test_sessions_are_sampled_by_seed_and_identical_across_loads(tmp_path: Path) -> None:
    path = write_suite(tmp_path, ", history: recorded", num=3)
    first = load_suite(path)
    again = load_suite(path)
    assert first.traffic == again.traffic and first.version == again.version
    assert first.prompts_digest != load_suite(write_suite(tmp_path, num=3)).prompts_digest


def test_sharegpt_conversations_are_sessions_too(tmp_path: Path) -> None:
    items = [{"conversations": [{"from": "human", "value": "q1"}, {"from": "gpt", "value": "a1"},
                                {"from": "human", "value": "q2"}, {"from": "gpt", "value": "a2"}]}]
    (tmp_path / "c.json").write_text(json.dumps(items), encoding="utf-8")
    (tmp_path / "suite.yaml").write_text("""\
name: s
workloads:
  - name: w
    prompts: {source: conversations, path: c.json, format: sharegpt}
    max_tokens: 8
    concurrency: 1
    num_requests: 1
""", encoding="utf-8")
    [session] = load_suite(tmp_path / "suite.yaml").traffic["w"].sessions
    assert [(t.user, t.recorded_answer) for t in session.turns] == [("q1", "a1"), ("q2", "a2")]


def test_sessions_may_start_at_a_rate(tmp_path: Path) -> None:
    path = write_suite(tmp_path, num=2, shape="    request_rate: 2\n    max_concurrency: 2\n")
    assert load_suite(path).suite.workloads[0].request_rate == 2


@pytest.mark.parametrize(("options", "fmt", "shape", "fragment"), [
    (", min_turns: 9", "openai-chat", "    concurrency: 2\n",
     "none of the 4 items pass the filters (min_turns 9); loosen the filters"),
    (", min_turns: 3, max_turns: 2", "openai-chat", "    concurrency: 2\n",
     "max_turns 2 is below min_turns 3"),
    (", history: replayed", "openai-chat", "    concurrency: 2\n",
     "Input should be 'live' or 'recorded'"),
    ("", "jsonl", "    concurrency: 2\n", "Input should be 'sharegpt' or 'openai-chat'"),
    ("", "sharegpt", "    concurrency: 2\n", ":1: expected a JSON array ([...]) of ShareGPT"),
    ("", "openai-chat", "", "give exactly one load shape"),
])
def test_bad_conversation_settings_are_one_line(tmp_path: Path, options: str, fmt: str,
                                                shape: str, fragment: str) -> None:
    path = write_suite(tmp_path, options, num=2, shape=shape, fmt=fmt)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)
