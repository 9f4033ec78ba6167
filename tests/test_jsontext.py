"""The one parser of JSON from outside: a value, or one error that says what was wrong."""

from __future__ import annotations

import pytest

from tracker.jsontext import UntrustedJSONError, parse_untrusted_json


def test_a_document_parses_from_text_or_bytes() -> None:
    assert parse_untrusted_json('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    assert parse_untrusted_json(b'"caf\\u00e9"') == "café"


def test_invalid_json_says_where_as_the_decoder_does() -> None:
    with pytest.raises(UntrustedJSONError) as raised:
        parse_untrusted_json('{"a": }')
    assert (raised.value.msg, raised.value.lineno, raised.value.colno) == ("Expecting value", 1, 7)
    assert not raised.value.too_deep


@pytest.mark.parametrize("hostile", ["[" * 100_000, "{\"a\":" * 100_000])
def test_nesting_past_the_recursion_limit_is_refused_as_too_deep(hostile: str) -> None:
    with pytest.raises(UntrustedJSONError) as raised:
        parse_untrusted_json(hostile)
    assert raised.value.too_deep


@pytest.mark.parametrize("text", [b"\xff\xfe\x00", "1" * 5000])
def test_undecodable_bytes_and_huge_integers_are_the_same_error(text: str | bytes) -> None:
    with pytest.raises(UntrustedJSONError, match=r"codec|digits"):
        parse_untrusted_json(text)
