"""The one config diff: changed, added and removed keys, the markers, redaction built in."""

from __future__ import annotations

from tracker import redaction
from tracker.inputs.config_diff import (
    ABSENT,
    HIDDEN,
    Change,
    ChangeKind,
    compute_config_diff,
    render_value,
)
from tracker.redaction import MARK

OLD = {"engine": {"max_num_seqs": 8, "block_size": 16}, "target": {"model": "m"}}
NEW = {"engine": {"max_num_seqs": 4, "kv_cache_dtype": "fp8"}, "target": {"model": "m"}}


def test_a_diff_names_each_changed_added_and_removed_leaf_by_its_path() -> None:
    changes = compute_config_diff(OLD, NEW)
    assert [(c.path, c.old, c.new, c.kind) for c in changes] == [
        ("engine.block_size", 16, ABSENT, ChangeKind.REMOVED),
        ("engine.kv_cache_dtype", ABSENT, "fp8", ChangeKind.ADDED),
        ("engine.max_num_seqs", 8, 4, ChangeKind.CHANGED)]
    assert [c.render() for c in changes] == [
        "engine.block_size: 16 → (default)", "engine.kv_cache_dtype: (default) → fp8",
        "engine.max_num_seqs: 8 → 4"]
    assert compute_config_diff(OLD, OLD) == []


def test_a_value_spelled_like_the_default_marker_is_a_value_not_an_absent_key() -> None:
    (change,) = compute_config_diff({}, {"description": "(default)"})
    assert change.kind is ChangeKind.ADDED and change.old is ABSENT
    assert change.new is not ABSENT and change.new == "(default)"
    (changed,) = compute_config_diff({"description": "(default)"}, {})
    assert changed.kind is ChangeKind.REMOVED


def test_ignored_keys_are_left_out_at_any_depth() -> None:
    old = {"pid": 1, "gpu": {"pid": 2, "name": "H100"}}
    new = {"pid": 3, "gpu": {"pid": 4, "name": "H200"}}
    assert [c.path for c in compute_config_diff(old, new, ignore=frozenset({"pid"}))] == [
        "gpu.name"]


def test_values_render_as_yaml_and_json_show_them() -> None:
    assert [render_value(v) for v in (True, False, None, 0.5, 8, "fp8", ["a", "b"], {})] == [
        "true", "false", "null", "0.5", "8", "fp8", '["a", "b"]', "{}"]
    assert (render_value(ABSENT), render_value(HIDDEN)) == ("(default)", "(hidden)")
    assert Change("engine.swap_space", ABSENT, 8.0).render() == "engine.swap_space: (default) → 8.0"


def test_secret_values_and_values_under_secret_keys_are_hidden() -> None:
    changes = compute_config_diff(
        {"target": {"auth_token": "abc"}, "x": "Bearer abc.def", "args": ["--x"]},
        {"target": {"auth_token": "xyz"}, "x": "Bearer zzz.yyy", "args": ["Bearer q.r"]})
    assert [(c.path, c.old, c.new) for c in changes] == [
        ("args", ["--x"], HIDDEN), ("target.auth_token", HIDDEN, HIDDEN), ("x", HIDDEN, HIDDEN)]
    assert all(c.new is HIDDEN for c in changes)


def test_a_key_inside_a_longer_text_is_redacted_and_the_text_kept() -> None:
    token = "hf_" + "a1" * 15
    (change,) = compute_config_diff({"served_by": "x"}, {"served_by": f"<b>x</b> key {token}"})
    assert change.new == f"<b>x</b> key {MARK}"  # shown as text by each renderer
    (listed,) = compute_config_diff({"c": ["vllm", "serve"]}, {"c": ["sh", "-c", f"T={token}"]})
    assert listed.new == ["sh", "-c", f"T={MARK}"]


def test_a_known_secret_inside_an_ordinary_string_is_redacted() -> None:
    secret = "correct-horse-battery-staple"
    redaction.register_secret(secret)
    (change,) = compute_config_diff({"description": "old"},
                                    {"description": f"uses {secret} for now"})
    assert change.new == f"uses {MARK} for now"
    (listed,) = compute_config_diff({"args": ["a"]}, {"args": ["a", f"--note={secret}"]})
    assert listed.new == ["a", f"--note={MARK}"]
