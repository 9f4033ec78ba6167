"""Dataset prompt sources: ShareGPT JSON, OpenAI chat JSONL, plain JSONL; sampling, filters,
output lengths, the file in the suite's version, and every bad input as one clear line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tracker.errors import ConfigError
from tracker.inputs.suites import Suite, build_loaded_suite, load_suite
from tracker.inputs.word_tokenizer import count_tokens

SHAREGPT = [
    {"id": "a", "conversations": [
        {"from": "system", "value": "you are terse"},
        {"from": "human", "value": "what is a cache"},
        {"from": "gpt", "value": "a place that keeps things near"}]},
    {"id": "b", "conversations": [
        {"from": "gpt", "value": "dropped: an answer before any question"},
        {"from": "human", "value": "first part"}, {"from": "user", "value": "second part"},
        {"from": "gpt", "value": "one two three"}, {"from": "human", "value": "later turn"}]},
    {"id": "c", "conversations": [{"from": "human", "value": "no answer here"}]},
    {"id": "d", "conversations": [{"from": "gpt", "value": "only an answer: no question"}]},
]


def suite_text(prompts: str, *, num: int = 3, warmup: int = 0, extra: str = "") -> str:
    return f"""\
name: s
seed: 5
workloads:
  - name: w
    prompts: {prompts}
    max_tokens: 50
    concurrency: 2
    num_requests: {num}
    warmup_requests: {warmup}
{extra}"""


def write_suite(tmp_path: Path, prompts: str, **kwargs: object) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(suite_text(prompts, **kwargs), encoding="utf-8")  # type: ignore[arg-type]
    return path


def write_data(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def sharegpt_suite(tmp_path: Path, options: str = "", **kwargs: object) -> Path:
    write_data(tmp_path, "chat.json", json.dumps(SHAREGPT, indent=2))
    return write_suite(tmp_path, "{source: dataset, path: chat.json, format: sharegpt"
                       + options + "}", **kwargs)


def test_sharegpt_items_become_first_questions_with_their_recorded_answer_lengths(
    tmp_path: Path,
) -> None:
    loaded = load_suite(sharegpt_suite(tmp_path))
    requests = {r.messages[-1].content: r for r in loaded.traffic["w"].requests}
    assert set(requests) == {"what is a cache", "first part\n\nsecond part", "no answer here"}
    cache = requests["what is a cache"]
    assert [(m.role, m.content) for m in cache.messages] == [
        ("system", "you are terse"), ("user", "what is a cache")]
    assert cache.max_tokens == 6 and cache.requested_input_tokens == 3 + 4
    assert requests["first part\n\nsecond part"].max_tokens == 3
    assert requests["no answer here"].max_tokens is None  # nothing recorded: the workload's
    assert loaded.data_files["w"] == hashlib.sha256((tmp_path / "chat.json").read_bytes()).hexdigest()


def test_openai_chat_lines_and_text_parts_are_read(tmp_path: Path) -> None:
    lines = [
        {"messages": [{"role": "user", "content": "hello there"},
                      {"role": "assistant", "content": "hi"}]},
        {"messages": [{"role": "system", "content": "be kind"},
                      {"role": "user", "content": [{"type": "text", "text": "part one"},
                                                   {"type": "text", "text": "part two"}]}],
         "id": "ignored key"},
    ]
    write_data(tmp_path, "chat.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    loaded = load_suite(write_suite(tmp_path, "{source: dataset, path: chat.jsonl, "
                                    "format: openai-chat}", num=2))
    got = sorted(tuple((m.role, m.content) for m in r.messages) for r in loaded.traffic["w"].requests)
    assert got == [(("system", "be kind"), ("user", "part one\npart two")),
                   (("user", "hello there"),)]


def test_plain_jsonl_prompts_ask_for_their_output_tokens(tmp_path: Path) -> None:
    write_data(tmp_path, "p.jsonl", '{"prompt": "one two", "output_tokens": 7}\n'
                                    '{"prompt": "three"}\n')
    loaded = load_suite(write_suite(tmp_path, "{source: dataset, path: p.jsonl, format: jsonl}",
                                    num=2))
    got = {r.messages[0].content: r.max_tokens for r in loaded.traffic["w"].requests}
    assert got == {"one two": 7, "three": None}


def _many_prompts(tmp_path: Path, count: int) -> None:
    write_data(tmp_path, "p.jsonl", "".join(json.dumps({"prompt": f"prompt number {i}"}) + "\n"
                                            for i in range(count)))


def test_sampling_is_seeded_and_draws_from_the_whole_file(tmp_path: Path) -> None:
    _many_prompts(tmp_path, 200)
    path = write_suite(tmp_path, "{source: dataset, path: p.jsonl, format: jsonl}", num=20,
                       warmup=2)

    def sample(suite: Path) -> list[str]:
        return [r.messages[0].content for r in load_suite(suite).traffic["w"].requests]

    first = sample(path)
    assert first == sample(path) and len(first) == 22 == len(set(first))
    numbers = [int(text.rsplit(" ", 1)[1]) for text in first]
    assert max(numbers) >= 100 and numbers != sorted(numbers)  # not the file's first lines
    path.write_text(path.read_text(encoding="utf-8").replace("seed: 5", "seed: 6"),
                    encoding="utf-8")
    assert sample(path) != first


def test_length_filters_keep_only_items_in_range(tmp_path: Path) -> None:
    """Inputs: a 7 tokens (system included), b 4, c 3; recorded outputs: a 6, b 3, c none."""
    def users(options: str, num: int) -> set[str]:
        loaded = load_suite(sharegpt_suite(tmp_path, options, num=num))
        return {r.messages[-1].content for r in loaded.traffic["w"].requests}

    assert users(", max_input_tokens: 5", 2) == {"first part\n\nsecond part", "no answer here"}
    assert users(", min_input_tokens: 4, max_output_tokens: 5", 1) == {"first part\n\nsecond part"}
    assert users(", min_output_tokens: 5", 2) == {"what is a cache", "no answer here"}


def test_fixed_and_drawn_output_lengths(tmp_path: Path) -> None:
    _many_prompts(tmp_path, 60)
    fixed = load_suite(write_suite(tmp_path, "{source: dataset, path: p.jsonl, format: jsonl, "
                                   "output_tokens: fixed}", num=5))
    assert {r.max_tokens for r in fixed.traffic["w"].requests} == {None}
    uniform = load_suite(write_suite(tmp_path, "{source: dataset, path: p.jsonl, format: jsonl, "
                                     "output_tokens: {distribution: uniform, min_tokens: 10, "
                                     "max_tokens: 12}}", num=40))
    assert {r.max_tokens for r in uniform.traffic["w"].requests} == {10, 11, 12}
    lognormal = load_suite(write_suite(
        tmp_path, "{source: dataset, path: p.jsonl, format: jsonl, output_tokens: "
        "{distribution: lognormal, median_tokens: 20, sigma: 0.5, min_tokens: 5}}", num=60))
    lengths = sorted(r.max_tokens or 0 for r in lognormal.traffic["w"].requests)
    assert lengths[0] >= 5 and lengths[-1] <= 50  # clipped to the workload's max_tokens
    assert 14 <= lengths[30] <= 28 and len(set(lengths)) > 10


def test_a_changed_data_file_is_a_new_suite_version(tmp_path: Path) -> None:
    path = sharegpt_suite(tmp_path, num=2)
    before = load_suite(path)
    data = tmp_path / "chat.json"
    data.write_text(data.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # one byte more
    after = load_suite(path)
    assert before.prompts_digest == after.prompts_digest  # the same prompts are sent ...
    assert before.version != after.version  # ... but the file is not the same file
    assert after.canonical["workloads"][0]["prompts"]["sha256"] == after.data_files["w"]


def test_a_pinned_sha256_refuses_another_file(tmp_path: Path) -> None:
    path = sharegpt_suite(tmp_path, ', sha256: "' + "0" * 64 + '"', num=2)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'chat.json'}: its sha256 is ")
    assert f"workloads[0].prompts.sha256 in {path} pins: the file changed" in message
    actual = load_suite(sharegpt_suite(tmp_path, num=2)).data_files["w"]
    assert load_suite(sharegpt_suite(tmp_path, f", sha256: {actual}", num=2)).data_files["w"] \
        == actual


def test_a_large_sharegpt_file_is_streamed_across_chunks(tmp_path: Path) -> None:
    long_answer = "word " * 450_000  # one item spans several 1 MiB chunks
    items = [{"conversations": [{"from": "human", "value": f"question {i}"},
                                {"from": "gpt", "value": long_answer if i == 3 else "ok"}]}
             for i in range(12)]
    write_data(tmp_path, "big.json", json.dumps(items, indent=1))
    assert (tmp_path / "big.json").stat().st_size > 2 * 2**20
    loaded = load_suite(write_suite(tmp_path, "{source: dataset, path: big.json, "
                                    "format: sharegpt}", num=12))
    lengths = {r.messages[-1].content: r.max_tokens for r in loaded.traffic["w"].requests}
    assert lengths["question 3"] == 450_000 and lengths["question 11"] == 1


BAD_LINES = [
    ("jsonl", '{"prompt": "fine"}\n{"prompt": 5}\n', ":2: prompt: must be a non-empty string (got '5')"),
    ("jsonl", '{"prompt": "fine"}\n\n{"prompt": "x", "output_tokens": -3}\n',
     ":3: output_tokens: must be a positive integer (got '-3')"),
    ("jsonl", '{"prompt": "a"}\n{"prompt": "b"\n', ":2: not JSON (Expecting ',' delimiter"),
    ("jsonl", '["a list"]\n', ":1: each line must be a JSON object"),
    ("jsonl", '{"text": "wrong key"}\n', ":1: prompt: must be a non-empty string (got null or "
                                         "nothing)"),
    ("openai-chat", '{"messages": [{"role": "robot", "content": "x"}]}\n',
     ":1: messages[0].role: must be system, user or assistant (got 'robot')"),
    ("openai-chat", '{"messages": [{"role": "user", "content": {"a": 1}}]}\n',
     ':1: messages[0].content: must be a string or a list of text parts (got \'{"a": 1}\')'),
    ("openai-chat", '{"msgs": []}\n', ":1: messages: must be a list of messages"),
    ("sharegpt", '[\n {"conversations": [{"from": "human", "value": "x"}]},\n'
                 ' {"conversations": [{"from": "wizard", "value": "x"}]}\n]',
     ":3: conversations[0].from: must be human or gpt (or user, assistant, system) (got 'wizard')"),
    ("sharegpt", '[\n {"conversations": [{"from": "human", "value": 3}]}\n]',
     ":2: conversations[0].value: must be a string (got '3')"),
    ("sharegpt", '[\n {"conversations": []},\n {"conversations": [\n  {"from": "human",,}]}]',
     ":4: invalid JSON (Expecting property name enclosed in double quotes)"),
    ("sharegpt", '{"conversations": []}', ":1: expected a JSON array ([...]) of ShareGPT"),
    ("sharegpt", '[{"conversations": []}] [1]', ":1: text after the JSON array"),
    ("sharegpt", '[\n {"conversations": []}\n {"conversations": []}\n]',
     ":3: expected ',' or ']' after an item"),
    ("sharegpt", '[\n "a string"\n]', ":2: (item): each item must be an object"),
]


@pytest.mark.parametrize(("fmt", "text", "fragment"), BAD_LINES)
def test_a_malformed_record_names_the_file_the_line_and_the_field(
    tmp_path: Path, fmt: str, text: str, fragment: str
) -> None:
    data = write_data(tmp_path, "data.txt", text)
    path = write_suite(tmp_path, f"{{source: dataset, path: data.txt, format: {fmt}}}", num=1)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    message = str(info.value)
    assert message.startswith(f"{data}:") and fragment in message, message
    assert "\n" not in message


@pytest.mark.parametrize(("prompts", "fragment"), [
    ("{source: dataset, path: missing.json, format: sharegpt}",
     "missing.json: dataset file not found; check workloads[0].prompts.path in "),
    ("{source: dataset, path: ., format: sharegpt}", ": is not a file; "),
    ("{source: dataset, path: empty.jsonl, format: jsonl}",
     "empty.jsonl: the file holds no items; add some"),
    ("{source: dataset, path: two.jsonl, format: jsonl}",
     "two.jsonl: 2 of 2 items have a question to send, but the workload needs 3 (warm-up "
     "included); lower num_requests or warmup_requests, or use a larger file"),
    ("{source: dataset, path: two.jsonl, format: jsonl, min_input_tokens: 9}",
     "two.jsonl: none of the 2 items pass the filters (min_input_tokens 9); loosen the filters"),
    ("{source: dataset, path: latin1.jsonl, format: jsonl}",
     "latin1.jsonl:1: not UTF-8 text (byte 15 of the line); save the file as UTF-8"),
])
def test_missing_empty_and_short_files_are_one_line(tmp_path: Path, prompts: str,
                                                     fragment: str) -> None:
    write_data(tmp_path, "empty.jsonl", "\n")
    write_data(tmp_path, "two.jsonl", '{"prompt": "a b"}\n{"prompt": "c d"}\n')
    (tmp_path / "latin1.jsonl").write_bytes('{"prompt": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_suite(write_suite(tmp_path, prompts))
    assert fragment in str(info.value) and "\n" not in str(info.value), str(info.value)


@pytest.mark.parametrize(("prompts", "fragment"), [
    ("{source: dataset, path: a.json, format: csv}", "Input should be 'sharegpt', 'openai-chat'"),
    ("{source: dataset, path: a.json, format: jsonl, output_tokens: {distribution: lognormal}}",
     "lognormal needs median_tokens and sigma"),
    ("{source: dataset, path: a.json, format: jsonl, output_tokens: {distribution: fixed, "
     "max_tokens: 3}}", "max_tokens apply to distribution uniform or lognormal only"),
    ("{source: dataset, path: a.json, format: jsonl, min_input_tokens: 9, max_input_tokens: 3}",
     "max_input_tokens 3 is below min_input_tokens 9"),
    ("{source: dataset, path: a.json, format: jsonl, sha256: abc}", "sha256"),
])
def test_bad_dataset_settings_are_config_errors(tmp_path: Path, prompts: str,
                                                fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_suite(write_suite(tmp_path, prompts))
    assert fragment in str(info.value), str(info.value)


def test_requested_input_tokens_count_the_system_prompt_and_question(tmp_path: Path) -> None:
    loaded = load_suite(sharegpt_suite(tmp_path))
    for request in loaded.traffic["w"].requests:
        assert request.requested_input_tokens == sum(count_tokens(m.content)
                                                     for m in request.messages)


def test_the_stored_canonical_form_rebuilds_the_suite_and_pins_its_file(tmp_path: Path) -> None:
    """What a queued run does: validate the stored canonical suite, rebuild it beside its file."""
    path = sharegpt_suite(tmp_path, num=2)
    loaded = load_suite(path)
    rebuilt = build_loaded_suite(Suite.model_validate(loaded.canonical), str(path))
    assert rebuilt.version == loaded.version and rebuilt.traffic == loaded.traffic
    (tmp_path / "chat.json").write_text(json.dumps(SHAREGPT[:3]), encoding="utf-8")
    with pytest.raises(ConfigError, match="the file changed"):
        build_loaded_suite(Suite.model_validate(loaded.canonical), str(path))
