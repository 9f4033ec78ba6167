"""Score one answer against one quality item: 1.0 right, 0.0 wrong (pure).

- ``exact``: equal after trimming whitespace, surrounding quotes or backticks and a final period,
  collapsing inner whitespace and (unless ``case_sensitive``) ignoring case.
- ``contains``: the expected text appears in the answer (same normalisation).
- ``regex``: the pattern is found in the answer (case-insensitive unless ``case_sensitive``).
- ``numeric``: the answer's *last* number (thousands separators allowed) is within
  ``tolerance`` + ``relative_tolerance`` x |expected| of the expected number — the last, because
  models write "17 + 25 = 42".
- ``choice``: the letter the answer picks ("B", "(B)", "B) Jupiter", "Answer: B") is the expected.
- ``json``: the answer (optionally inside a ```json fence) parses and matches the JSON Schema
  (2020-12), and ``find_violation`` says how it does not.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.quality.sets import (
    LOCAL_SCHEMA_REFS,
    ChoiceParams,
    NumericParams,
    QualityItem,
    TextParams,
)

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def normalise_text(text: str, case_sensitive: bool = False) -> str:
    value = " ".join(text.split())
    value = value.strip().strip("`\"'").strip()
    value = value.rstrip(".").strip()
    return value if case_sensitive else value.casefold()


def _text_params(item: QualityItem) -> TextParams:
    return TextParams.model_validate(item.params)


def _score_exact(item: QualityItem, output: str) -> bool:
    case = _text_params(item).case_sensitive
    return normalise_text(output, case) == normalise_text(str(item.expected), case)


def _score_contains(item: QualityItem, output: str) -> bool:
    case = _text_params(item).case_sensitive
    return normalise_text(str(item.expected), case) in normalise_text(output, case)


def _score_regex(item: QualityItem, output: str) -> bool:
    flags = 0 if _text_params(item).case_sensitive else re.IGNORECASE
    return re.search(str(item.expected), output, flags) is not None


def parse_last_number(text: str) -> float | None:
    found = _NUMBER.findall(text)
    if not found:
        return None
    value = float(found[-1].replace(",", ""))
    return value if math.isfinite(value) else None


def _score_numeric(item: QualityItem, output: str) -> bool:
    params = NumericParams.model_validate(item.params)
    value = parse_last_number(output)
    if value is None or isinstance(item.expected, str | dict):
        return False
    expected = float(item.expected)
    allowed = params.tolerance + params.relative_tolerance * abs(expected) + 1e-12
    return abs(value - expected) <= allowed


def parse_choice(text: str, options: str) -> str | None:
    """The option letter an answer picks, or None when it picks none clearly."""
    letters = f"[{options}]"
    patterns = (
        (rf"^\W*({letters})(?:\W|$)", 0),  # "B", "(B)", "B) Jupiter", "B."
        (rf"answer\W*(?:is\W*)?\(?({letters})\b", re.IGNORECASE),  # "The answer is B"
        (rf"\(({letters})\)", 0),  # "Jupiter (B)"
    )
    for pattern, flags in patterns:
        match = re.search(pattern, text.strip(), flags)
        if match is not None:
            return match.group(1).upper()
    return None


def _score_choice(item: QualityItem, output: str) -> bool:
    options = ChoiceParams.model_validate(item.params).options
    return parse_choice(output, options) == str(item.expected)


def find_violation(value: Any, schema: Mapping[str, Any]) -> str | None:
    """How ``value`` breaks ``schema`` (one checked at load), the error ``best_match`` ranks first,
    as ``JSON path: reason``, or None when it matches."""
    validator = Draft202012Validator(schema, registry=LOCAL_SCHEMA_REFS)
    error = best_match(validator.iter_errors(value))
    return None if error is None else f"{error.json_path}: {error.message}"


def _score_json(item: QualityItem, output: str) -> bool:
    text = output.strip()
    fenced = _FENCE.match(text)
    if fenced is not None:
        text = fenced.group(1)
    try:
        value = parse_untrusted_json(text)
    except UntrustedJSONError:  # a degenerate answer: "[[[[…" to max_tokens
        return False
    assert isinstance(item.expected, dict)  # the item was checked at load
    return find_violation(value, item.expected) is None


SCORERS: dict[str, Callable[[QualityItem, str], bool]] = {
    "exact": _score_exact,
    "contains": _score_contains,
    "regex": _score_regex,
    "numeric": _score_numeric,
    "choice": _score_choice,
    "json": _score_json,
}


def score_output(item: QualityItem, output: str) -> float:
    return 1.0 if SCORERS[item.scorer](item, output) else 0.0
