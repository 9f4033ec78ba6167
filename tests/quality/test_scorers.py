"""Scorers and JSON Schema violations, on literal answers with known scores."""

from __future__ import annotations

from typing import Any

import pytest

from tracker.quality.scorers import find_violation, parse_choice, parse_last_number, score_output
from tracker.quality.sets import QualityItem


def item(scorer: str, expected: Any, **params: Any) -> QualityItem:
    return QualityItem(id="x", prompt="q", expected=expected, scorer=scorer,  # type: ignore[arg-type]
                       params=params)


@pytest.mark.parametrize(("output", "score"), [
    ("Paris", 1.0), ("  paris. ", 1.0), ('"Paris"', 1.0), ("Paris, France", 0.0), ("Lyon", 0.0)])
def test_exact_ignores_case_quotes_and_a_final_period(output: str, score: float) -> None:
    assert score_output(item("exact", "Paris"), output) == score


def test_exact_case_sensitive_tells_au_from_au() -> None:
    assert score_output(item("exact", "Au", case_sensitive=True), "Au") == 1.0
    assert score_output(item("exact", "Au", case_sensitive=True), "AU") == 0.0


def test_contains_finds_the_answer_inside_a_sentence() -> None:
    assert score_output(item("contains", "Shakespeare"), "It was William Shakespeare.") == 1.0
    assert score_output(item("contains", "Shakespeare"), "Marlowe") == 0.0


def test_regex_is_searched_case_insensitively_by_default() -> None:
    assert score_output(item("regex", r"^\s*0*101\s*$"), "101") == 1.0
    assert score_output(item("regex", r"^\s*0*101\s*$"), "1010") == 0.0
    assert score_output(item("regex", r"paris"), "PARIS") == 1.0
    assert score_output(item("regex", r"paris", case_sensitive=True), "PARIS") == 0.0


@pytest.mark.parametrize(("output", "score"), [
    ("42", 1.0), ("17 + 25 = 42", 1.0), ("The answer is 42.", 1.0), ("42.0", 1.0),
    ("41", 0.0), ("forty-two", 0.0), ("", 0.0)])
def test_numeric_reads_the_last_number(output: str, score: float) -> None:
    assert score_output(item("numeric", 42), output) == score


def test_numeric_tolerances_and_thousands_separators() -> None:
    assert score_output(item("numeric", 1.75, tolerance=0.001), "1.7504") == 1.0
    assert score_output(item("numeric", 1.75, tolerance=0.001), "1.76") == 0.0
    assert score_output(item("numeric", 300000, relative_tolerance=0.01), "299,792") == 1.0
    assert score_output(item("numeric", 300000, relative_tolerance=0.01), "290,000") == 0.0
    assert score_output(item("numeric", -7), "-7") == 1.0
    assert parse_last_number("1e3 then 2.5e-1") == 0.25


@pytest.mark.parametrize(("output", "letter"), [
    ("B", "B"), ("(B)", "B"), ("B) Jupiter", "B"), ("B.", "B"), ("The answer is b", "B"),
    ("Answer: (C)", "C"), ("Jupiter (B)", "B"), ("Jupiter", None), ("E", None)])
def test_choice_reads_the_letter_picked(output: str, letter: str | None) -> None:
    assert parse_choice(output, "ABCD") == letter


def test_choice_scores_only_the_expected_letter() -> None:
    assert score_output(item("choice", "B"), "B) Jupiter") == 1.0
    assert score_output(item("choice", "B"), "A") == 0.0


SCHEMA = {"type": "object", "required": ["name", "n"], "additionalProperties": False,
          "properties": {"name": {"const": "oxygen"}, "n": {"type": "integer", "minimum": 1}}}


@pytest.mark.parametrize(("output", "score"), [
    ('{"name": "oxygen", "n": 8}', 1.0),
    ('```json\n{"name": "oxygen", "n": 8}\n```', 1.0),
    ('{"name": "oxygen", "n": 8.0}', 1.0),  # 8.0 is an integer in JSON Schema
    ('{"name": "oxygen", "n": true}', 0.0),  # true is not
    ('{"name": "oxygen"}', 0.0),
    ('{"name": "oxygen", "n": 8, "extra": 1}', 0.0),
    ('{"name": "nitrogen", "n": 7}', 0.0),
    ('{"name": "oxygen", "n": 0}', 0.0),
    ("name: oxygen", 0.0),
    ("[" * 5000, 0.0),  # a degenerate model repeating "[" to max_tokens: too deep, not a crash
    ('{"n": ' * 3000 + "1" + "}" * 3000, 0.0)])
def test_json_parses_and_matches_the_schema(output: str, score: float) -> None:
    assert score_output(item("json", SCHEMA), output) == score


def test_a_violation_names_the_json_path_and_the_reason() -> None:
    schema = {"type": "array", "minItems": 1, "maxItems": 2,
              "items": {"type": "string", "enum": ["a", "b"], "maxLength": 1}}
    assert find_violation(["a", "b"], schema) is None
    assert find_violation([], schema) == "$: [] should be non-empty"
    assert find_violation(["a", "c"], schema) == "$[1]: 'c' is not one of ['a', 'b']"
    assert find_violation("a", schema) == "$: 'a' is not of type 'array'"
    assert find_violation({"name": "oxygen", "n": 0}, SCHEMA) == "$.n: 0 is less than the minimum of 1"
    assert find_violation({"name": "oxygen", "n": 8, "x": 1}, SCHEMA) == (
        "$: Additional properties are not allowed ('x' was unexpected)")


def test_true_is_not_an_integer_and_one_point_zero_is() -> None:
    assert find_violation(True, {"type": "integer"}) == "$: True is not of type 'integer'"
    assert find_violation(1.0, {"type": "integer"}) is None
    assert find_violation(1.5, {"type": "integer"}) == "$: 1.5 is not of type 'integer'"
    assert find_violation(True, {"const": 1}) == "$: 1 was expected"


def test_json_scores_with_keywords_past_the_old_subset() -> None:
    schema = {"$defs": {"element": {"enum": ["H", "He", "Li"]}},
              "type": "object", "required": ["symbol"],
              "properties": {"symbol": {"$ref": "#/$defs/element"},
                             "mass": {"oneOf": [{"type": "integer"}, {"type": "null"}]}}}
    assert score_output(item("json", schema), '{"symbol": "He", "mass": 4}') == 1.0
    assert score_output(item("json", schema), '{"symbol": "He", "mass": null}') == 1.0
    assert score_output(item("json", schema), '{"symbol": "Ne"}') == 0.0
    assert score_output(item("json", schema), '{"symbol": "He", "mass": "4"}') == 0.0
