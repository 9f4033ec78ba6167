"""Every answer leaves through ``to_json``: strings redacted (keys too), times in UTC ISO 8601,
a value that is not a number becomes null (not measured), and nothing unknown slips through."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from tracker.inputs.config_diff import compute_config_diff
from tracker.mcp.shapes import changes_json, shown, to_json
from tracker.redaction import MARK

TOKEN = "sk-proj-ShapesTest1234567890abcd"  # hidden by its shape


def test_strings_and_keys_are_redacted_and_times_are_utc_iso() -> None:
    east = timezone(timedelta(hours=2))
    shaped = to_json({f"said {TOKEN}": [f"key {TOKEN}", (1, 2.5)],
                      "at": datetime(2026, 5, 1, 14, 0, tzinfo=east),
                      "naive": datetime(2026, 5, 1, 12, 0)})
    assert shaped == {f"said {MARK}": [f"key {MARK}", [1, 2.5]],
                      "at": "2026-05-01T12:00:00Z", "naive": "2026-05-01T12:00:00Z"}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_value_that_is_not_a_number_is_null_never_a_stand_in(value: float) -> None:
    assert to_json({"rel_change": value, "count": 0}) == {"rel_change": None, "count": 0}
    assert shown(value, "ttft_p99_s") is None


def test_an_unknown_type_is_a_bug_not_a_silent_string() -> None:
    with pytest.raises(TypeError, match="no JSON shape for object"):
        to_json({"x": object()})


def test_values_are_shown_in_the_metrics_display_unit() -> None:
    assert shown(0.48368, "ttft_p99_s") == "483.68 ms"
    assert shown(2242.98, "output_throughput_tokens_per_s") == "2242.98 tokens/s"


def test_a_config_diff_keeps_its_markers_and_hides_a_secret_value() -> None:
    changes = compute_config_diff({"engine": {"max_num_seqs": 256}},
                                  {"engine": {"max_num_seqs": 4, "block_size": 16},
                                   "target": {"api_key": TOKEN}})
    assert to_json(changes_json(changes)) == [
        {"path": "engine.block_size", "kind": "added", "old": "(default)", "new": 16},
        {"path": "engine.max_num_seqs", "kind": "changed", "old": 256, "new": 4},
        {"path": "target.api_key", "kind": "added", "old": "(default)", "new": "(hidden)"},
    ]
