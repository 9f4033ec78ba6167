"""The line formats users bring: GSM8K-style and multiple-choice JSONL beside the tracker's own,
bad lines named by file and line, and seeded samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracker.cli.main import main
from tracker.quality import QualitySetError, load_quality_set, score_output
from tracker.quality.sets import compute_sample


def _write(tmp_path: Path, *rows: object) -> Path:
    path = tmp_path / "users.jsonl"
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GSM = {"question": "Ana has 3 boxes of 12 eggs and uses 5. How many are left?",
       "answer": "3 boxes hold 3 * 12 = <<3*12=36>>36 eggs.\n36 - 5 = <<36-5=31>>31\n#### 31"}
MC = {"question": "Which planet is largest?", "choices": ["Mars", "Jupiter", "Venus", "Mercury"],
      "answer": "B", "subject": "astronomy"}


def test_a_gsm8k_style_line_is_a_numeric_item_scored_on_the_final_number(tmp_path: Path) -> None:
    quality_set = load_quality_set(_write(tmp_path, GSM, {**GSM, "id": "eggs-2",
                                                          "answer": "so #### 1,250"}))
    first, second = quality_set.items
    assert first.id == "line-1" and first.scorer == "numeric" and first.expected == 31
    assert first.prompt == GSM["question"]
    assert second.id == "eggs-2" and second.expected == 1250
    assert score_output(first, "She has 36 - 5 = 31 eggs left.") == 1.0
    assert score_output(first, "30") == 0.0


def test_a_multiple_choice_line_lists_the_choices_and_takes_a_letter_or_an_index(
        tmp_path: Path) -> None:
    quality_set = load_quality_set(_write(tmp_path, MC, {**MC, "id": "mc-2", "answer": 3,
                                                         "choices": ["a", "b", "c", "d", "e"]}))
    first, second = quality_set.items
    assert first.scorer == "choice" and first.expected == "B"
    assert first.prompt == ("Which planet is largest?\nA. Mars\nB. Jupiter\nC. Venus\n"
                            "D. Mercury\nAnswer with the letter only.")
    assert "astronomy" not in first.prompt
    assert score_output(first, "B) Jupiter") == 1.0 and score_output(first, "A") == 0.0
    assert second.expected == "D" and second.params == {"options": "ABCDE"}


def test_the_three_formats_mix_in_one_file(tmp_path: Path) -> None:
    own = {"id": "own-1", "prompt": "2+2?", "expected": 4, "scorer": "numeric"}
    quality_set = load_quality_set(_write(tmp_path, own, GSM, MC))
    assert [item.scorer for item in quality_set.items] == ["numeric", "numeric", "choice"]


@pytest.mark.parametrize(("row", "message"), [
    ({**GSM, "answer": "31"}, r"users.jsonl:1: answer: .*must end with '#### <number>'.*"
                              r"put the final number after ####"),
    ({**GSM, "level": 3}, r"users.jsonl:1: level: unknown key; allowed: id, subject, question, "
                          r"answer \(a GSM8K-style line\)"),
    ({**MC, "answer": "E"}, r"users.jsonl:1: answer: 'E' is not one of the letters ABCD"),
    ({**MC, "answer": 4}, r"users.jsonl:1: answer: index 4 is not one of the 4 choices"),
    ({**MC, "choices": ["only"]}, r"users.jsonl:1: choices: .*at least 2 items.*"
                                  r"multiple-choice line"),
    ({**GSM, "question": ""}, r"users.jsonl:1: question: .*at least 1 character"),
])
def test_a_bad_line_names_the_file_line_field_and_fix(tmp_path: Path, row: object,
                                                      message: str) -> None:
    with pytest.raises(QualitySetError, match=message):
        load_quality_set(_write(tmp_path, row))


def test_a_bad_line_in_a_suite_exits_2_with_its_place(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, GSM, {**GSM, "answer": "no number"})
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: s\nworkloads:\n  - name: w\n    prompts: {source: synthetic, "
                     "input_tokens: 8}\n    max_tokens: 4\n    concurrency: 1\n"
                     "    num_requests: 2\n"
                     "quality: {path: users.jsonl}\n", encoding="utf-8")
    config = tmp_path / "c.yaml"
    config.write_text("name: c\ntarget: {kind: sim, model: m}\n", encoding="utf-8")
    code = main(["run", "--config", str(config), "--suite", str(suite),
                 "--db", str(tmp_path / "t.db"), "--quiet"])
    assert code == 2
    assert "users.jsonl:2: answer: a GSM8K-style answer must end with" in capsys.readouterr().err


def test_a_seeded_sample_is_repeatable_in_file_order_and_has_its_own_version(
        tmp_path: Path) -> None:
    rows = [{"id": f"q{i}", "prompt": f"{i}+1?", "expected": i + 1, "scorer": "numeric"}
            for i in range(50)]
    whole = load_quality_set(_write(tmp_path, *rows))
    one, again, other = (compute_sample(whole, 10, seed) for seed in (1, 1, 2))
    assert one == again and len(one.items) == 10
    assert [i.id for i in one.items] == sorted((i.id for i in one.items),
                                               key=lambda x: int(x[1:]))
    assert one.items != other.items and one.version != whole.version
    assert compute_sample(whole, None, 1) is whole and compute_sample(whole, 50, 1) is whole
