"""Trace sources: Mooncake JSONL and the Azure CSV, replayed at their times; equal hash ids give
byte-identical blocks; every bad row is one line that names the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracker.errors import ConfigError
from tracker.inputs.prompts import SplitMix64, derive_seed, generate_words
from tracker.inputs.suites import load_suite
from tracker.inputs.word_text import compute_keyed_seeds, generate_word_runs
from tracker.inputs.word_tokenizer import count_tokens

MOONCAKE = [
    {"timestamp": 0, "input_length": 20, "output_length": 5, "hash_ids": [1, 2, 3]},
    {"timestamp": 250, "input_length": 17, "output_length": 6, "hash_ids": [1, 2, 4]},
    {"timestamp": 250, "input_length": 12, "output_length": 7, "hash_ids": [5, 6]},
    {"timestamp": 1000, "input_length": 30, "output_length": 8, "hash_ids": [1, 2]},
    {"timestamp": 1500.5, "input_length": 3, "output_length": 9, "hash_ids": []},
]
AZURE = """\
TIMESTAMP,ContextTokens,GeneratedTokens,Extra
2023-11-16 18:15:46.6805900,40,7,x
2023-11-16 18:15:46.9305900,25,3,y

2023-11-16 18:15:48.1805900,8,11,z
"""


def write_trace(tmp_path: Path, rows: list[dict[str, object]], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_suite(tmp_path: Path, prompts: str, *, num: int, warmup: int = 0,
                shape: str = "") -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(f"""\
name: s
seed: 11
workloads:
  - name: w
    prompts: {prompts}
    max_tokens: 50
    num_requests: {num}
    warmup_requests: {warmup}
{shape}""", encoding="utf-8")
    return path


MOONCAKE_PROMPTS = "{source: trace, path: t.jsonl, format: mooncake, block_tokens: 8"


def mooncake_suite(tmp_path: Path, options: str = "", *, num: int, warmup: int = 0,
                   shape: str = "") -> Path:
    write_trace(tmp_path, MOONCAKE)
    return write_suite(tmp_path, MOONCAKE_PROMPTS + options + "}", num=num, warmup=warmup,
                       shape=shape)


def test_mooncake_rows_replay_at_their_times_with_their_lengths(tmp_path: Path) -> None:
    requests = load_suite(mooncake_suite(tmp_path, num=5)).traffic["w"].requests
    assert [r.arrival_s for r in requests] == [0.0, 0.25, 0.25, 1.0, 1.5005]
    assert [r.max_tokens for r in requests] == [5, 6, 7, 8, 9]
    assert [r.requested_input_tokens for r in requests] == [20, 17, 12, 30, 3]
    assert [count_tokens(r.messages[0].content) for r in requests] == [20, 17, 12, 30, 3]
    assert all(len(r.messages) == 1 and r.messages[0].role == "user" for r in requests)


def test_equal_hash_ids_give_byte_identical_blocks_and_different_ids_do_not(
    tmp_path: Path,
) -> None:
    prompts = [r.messages[0].content.encode("utf-8")
               for r in load_suite(mooncake_suite(tmp_path, num=5)).traffic["w"].requests]
    block = len(b" ".join(prompts[0].split(b" ")[:16]))  # ids 1 and 2: 16 words
    assert prompts[0][:block] == prompts[1][:block] == prompts[3][:block]
    assert prompts[0].split(b" ")[16:] != prompts[1].split(b" ")[16:]  # ids 3 and 4 differ
    assert prompts[2].split(b" ")[:8] != prompts[0].split(b" ")[:8]  # id 5 is not id 1
    words = prompts[3].split(b" ")  # ids 1, 2, then 14 words of the row's own
    assert len(words) == 30 and words[16:] != prompts[0].split(b" ")[16:30]


def test_the_last_block_is_cut_to_the_input_length(tmp_path: Path) -> None:
    """Block h is generate_words of h's keyed seed; a row's last block is its first words."""
    prompts = [r.messages[0].content.split(" ")
               for r in load_suite(mooncake_suite(tmp_path, num=5)).traffic["w"].requests]
    seed_of = dict(zip([1, 2, 3, 4], compute_keyed_seeds(derive_seed(11, "trace-block"),
                                                         [1, 2, 3, 4]).tolist(), strict=True))
    assert prompts[0] == " ".join([generate_words(seed_of[1], 8), generate_words(seed_of[2], 8),
                                   generate_words(seed_of[3], 4)]).split(" ")
    assert prompts[1][16:] == [generate_words(seed_of[4], 1)]  # 17 = 8 + 8 + 1


def test_time_scale_start_offset_and_warmup_shape_the_replay(tmp_path: Path) -> None:
    path = mooncake_suite(tmp_path, ", time_scale: 2.0, start_offset_s: 0.2", num=2, warmup=1)
    requests = load_suite(path).traffic["w"].requests
    assert [r.max_tokens for r in requests] == [6, 7, 8]  # the row at 0 s is skipped
    assert [r.arrival_s for r in requests] == [None, 0.0, 1.5]  # (1.0 - 0.25) * 2


def test_the_same_trace_under_another_seed_has_other_words_but_the_same_shape(
    tmp_path: Path,
) -> None:
    path = mooncake_suite(tmp_path, num=5)
    first = load_suite(path)
    path.write_text(path.read_text(encoding="utf-8").replace("seed: 11", "seed: 12"),
                    encoding="utf-8")
    second = load_suite(path)
    a, b = (s.traffic["w"].requests for s in (first, second))
    assert [r.messages[0].content for r in a] != [r.messages[0].content for r in b]
    assert [r.arrival_s for r in a] == [r.arrival_s for r in b]
    assert first.version != second.version


def test_azure_rows_replay_at_their_times(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text(AZURE, encoding="utf-8")
    path = write_suite(tmp_path, "{source: trace, path: a.csv, format: azure}", num=3)
    requests = load_suite(path).traffic["w"].requests
    assert [r.arrival_s for r in requests] == [0.0, 0.25, 1.5]
    assert [(r.requested_input_tokens, r.max_tokens) for r in requests] == [(40, 7), (25, 3),
                                                                           (8, 11)]
    assert [count_tokens(r.messages[0].content) for r in requests] == [40, 25, 8]
    assert len({r.messages[0].content.split(" ")[0] for r in requests}) > 1  # rows share nothing


def test_a_changed_trace_is_a_new_suite_version(tmp_path: Path) -> None:
    path = mooncake_suite(tmp_path, num=2)
    before = load_suite(path)
    rows = [*MOONCAKE, {"timestamp": 2000, "input_length": 4, "output_length": 1}]
    write_trace(tmp_path, rows)  # a row the workload does not even replay
    after = load_suite(path)
    assert after.prompts_digest == before.prompts_digest and after.version != before.version


def test_the_vectorised_generator_writes_generate_words_byte_for_byte() -> None:
    seeds = [derive_seed(1, "x", i) for i in range(40)] + [0, (1 << 64) - 1]
    counts = [(i * 53) % 700 for i in range(len(seeds))]
    texts, cuts = generate_word_runs(seeds, counts, {5: {1, 9}, 41: {50}})
    assert texts == [generate_words(seed, count) for seed, count in zip(seeds, counts, strict=True)]
    assert cuts == {(5, 1): generate_words(seeds[5], 1), (5, 9): generate_words(seeds[5], 9),
                    (41, 50): generate_words(seeds[41], 50)}
    stream = SplitMix64(1234)
    assert compute_keyed_seeds(1234, [0, 1, 2]).tolist() == [stream.next_u64() for _ in range(3)]


BAD_ROWS = [
    ([{"timestamp": 0, "input_length": 4, "output_length": 1},
      {"timestamp": "soon", "input_length": 4, "output_length": 1}],
     ":2: timestamp: must be a number of milliseconds from 0 to 1e+15 (got 'soon')"),
    ([{"timestamp": 0, "input_length": 0, "output_length": 1}],
     ":1: input_length: must be a positive integer (got '0')"),
    ([{"timestamp": 0, "input_length": 4, "output_length": 10**12}],  # not a prompt to build
     ":1: output_length: must be at most 2,000,000 tokens (got '1000000000000')"),
    ([{"timestamp": 0, "input_length": 4}], ":1: output_length: must be a positive integer (got "
                                            "null or nothing)"),
    ([{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1, "x"]}],
     ":1: hash_ids: must be a list of integers >= 0"),
    ([{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1, 2, 3]}],
     ":1: hash_ids: 3 blocks of 8 tokens are more than input_length 4 fills (1); set "
     "prompts.block_tokens to the block size the trace was made with"),
    ([{"timestamp": 500, "input_length": 4, "output_length": 1},
      {"timestamp": 400, "input_length": 4, "output_length": 1}],
     ":2: timestamp: 0.1 s earlier than the row on line 1; a trace must be in time order"),
]


@pytest.mark.parametrize(("rows", "fragment"), BAD_ROWS)
def test_a_bad_mooncake_row_names_the_file_the_line_and_the_field(
    tmp_path: Path, rows: list[dict[str, object]], fragment: str
) -> None:
    trace = write_trace(tmp_path, rows)
    with pytest.raises(ConfigError) as info:
        load_suite(write_suite(tmp_path, MOONCAKE_PROMPTS + "}", num=1))
    message = str(info.value)
    assert message.startswith(f"{trace}:") and fragment in message, message
    assert "\n" not in message


@pytest.mark.parametrize(("text", "fragment"), [
    ("TIMESTAMP,ContextTokens\n2023-11-16 18:00:00,4\n",
     ":1: the header lacks GeneratedTokens; an Azure trace's first row names the columns"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,4,2\nyesterday,4,2\n",
     ":3: TIMESTAMP: must be a date-time like 2023-11-16 18:15:46.6805900, or seconds (got "
     "'yesterday')"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,many,2\n",
     ":2: ContextTokens: must be a positive integer (got 'many')"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,99999999999,2\n",
     ":2: ContextTokens: must be at most 2,000,000 tokens (got '99999999999')"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,4\n",
     ":2: 2 columns, the header has 3"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:01,4,2\n2023-11-16 18:00:00,4,2\n",
     ":3: TIMESTAMP: 1 s earlier than the row on line 2; a trace must be in time order: sort the "
     "file by TIMESTAMP"),
])
def test_a_bad_azure_row_names_the_file_the_line_and_the_field(tmp_path: Path, text: str,
                                                                fragment: str) -> None:
    (tmp_path / "a.csv").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_suite(write_suite(tmp_path, "{source: trace, path: a.csv, format: azure}", num=1))
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'a.csv'}:") and fragment in message, message


@pytest.mark.parametrize(("rows", "options", "fragment"), [
    ([], "", "the trace holds no rows; check the file and its format"),
    (MOONCAKE, "", "the trace has 5 rows (of 5), but the workload replays 6 (warm-up included)"),
    (MOONCAKE, ", start_offset_s: 1.2", "the trace has 1 rows from start_offset_s 1.2 (of 5)"),
])
def test_a_short_or_empty_trace_is_one_line(tmp_path: Path, rows: list[dict[str, object]],
                                            options: str, fragment: str) -> None:
    write_trace(tmp_path, rows)
    with pytest.raises(ConfigError) as info:
        load_suite(write_suite(tmp_path, MOONCAKE_PROMPTS + options + "}", num=5, warmup=1))
    assert fragment in str(info.value), str(info.value)


@pytest.mark.parametrize(("prompts", "shape", "fragment"), [
    (MOONCAKE_PROMPTS + "}", "    concurrency: 4\n",
     "a trace sets its own arrival times: remove concurrency (max_concurrency may cap"),
    (MOONCAKE_PROMPTS + "}", "    burstiness: 0.5\n", "burstiness does not apply to a trace"),
    ("{source: trace, path: a.csv, format: azure, block_tokens: 16}", "",
     "block_tokens applies to format mooncake only"),
    ("{source: trace, path: t.jsonl, format: sharegpt}", "",
     "Input should be 'mooncake', 'azure' or 'sessions'"),
    ("{source: trace, path: t.jsonl, format: mooncake, time_scale: 0}", "",
     "Input should be greater than 0"),
])
def test_a_trace_workload_takes_no_other_load_shape(tmp_path: Path, prompts: str, shape: str,
                                                    fragment: str) -> None:
    write_trace(tmp_path, MOONCAKE)
    with pytest.raises(ConfigError) as info:
        load_suite(write_suite(tmp_path, prompts, num=2, shape=shape))
    assert fragment in str(info.value), str(info.value)


def test_a_trace_workload_may_cap_the_requests_in_flight(tmp_path: Path) -> None:
    loaded = load_suite(mooncake_suite(tmp_path, num=5, shape="    max_concurrency: 2\n"))
    assert loaded.suite.workloads[0].max_concurrency == 2
