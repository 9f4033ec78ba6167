"""Serving configs: validation at the boundary, content versions, and no secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.config import load_config
from tracker.errors import ConfigError, SecretInConfigError

ROOT = Path(__file__).resolve().parent.parent

BASE = """\
name: prod
target:
  kind: sim
  model: m
engine:
  block_size: 16
  max_num_seqs: 64
  enable_prefix_caching: true
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_every_shipped_config_loads() -> None:
    paths = sorted((ROOT / "configs").glob("*.yaml"))
    assert len(paths) >= 3
    versions = {load_config(p).version for p in paths}
    assert len(versions) == len(paths)


def test_key_order_and_formatting_do_not_change_the_version(tmp_path: Path) -> None:
    reordered = """\
# the same config, written differently
engine: {enable_prefix_caching: true, max_num_seqs: 64, block_size: 16}
target: {model: m, kind: sim}
name: prod
description: a comment-like description is not part of the version
"""
    assert load_config(write(tmp_path, BASE)).version == \
        load_config(write(tmp_path, reordered, "d.yaml")).version


def test_an_engine_arg_change_makes_a_new_version(tmp_path: Path) -> None:
    changed = BASE.replace("max_num_seqs: 64", "max_num_seqs: 32")
    assert load_config(write(tmp_path, BASE)).version != \
        load_config(write(tmp_path, changed, "d.yaml")).version


def test_an_explicit_default_equals_an_omitted_one(tmp_path: Path) -> None:
    explicit = BASE.replace("engine:\n", "engine:\n  extra_args: {}\n")
    assert load_config(write(tmp_path, BASE)).version == \
        load_config(write(tmp_path, explicit, "d.yaml")).version


def test_extra_args_pass_through_as_vllm_flags(tmp_path: Path) -> None:
    text = BASE + "  swap_space: 4\n  extra_args:\n    --enforce-eager: true\n" \
                  "    max-loras: 2\n"
    flags = load_config(write(tmp_path, text)).config.engine.as_flags()
    assert flags == ["--block-size", "16", "--max-num-seqs", "64", "--enable-prefix-caching",
                     "--swap-space", "4", "--enforce-eager", "--max-loras", "2"]


@pytest.mark.parametrize(("text", "expected"), [
    (BASE.replace("block_size: 16", "block_size: 12"),
     ["c.yaml:6: engine.block_size:", "(got 12)"]),
    (BASE.replace("max_num_seqs: 64", "max_num_seqs: many"),
     ["c.yaml:7: engine.max_num_seqs:", "(got 'many')"]),
    (BASE + "  blocksize: 16\n",
     ["c.yaml:9: engine.blocksize: unknown key", "(did you mean 'block_size'?)"]),
    (BASE.replace("kind: sim", "kind: tgi"), ["c.yaml:3: target.kind:", "'sim'"]),
    ("name: x\ntarget:\n  kind: openai\n  model: m\n", ["target:", "needs base_url"]),
    ("name: x\n", ["target: required key is missing"]),
    ("name: [x\n", ["c.yaml:2: invalid YAML"]),
    ("- just\n- a list\n", ["must be a YAML mapping", "list"]),
    ("", ["must be a YAML mapping", "empty file"]),
])
def test_bad_configs_say_where_what_and_the_value(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message
    for fragment in expected:
        assert fragment in message


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize("text", [
    BASE.replace("  model: m\n", "  model: m\n  api_key: sk-abcdefghijklmnopqrstuvwx\n"),
    BASE.replace("  model: m\n", "  model: m\n  api_key_env: sk-abcdefghijklmnopqrstuvwx\n"),
    BASE + "  extra_args:\n    hf-token: hf_abcdefghijklmnopqrstuvwxyz123456\n",
    BASE.replace("  model: m\n",
                 "  model: m\n  launch:\n    env: {OPENAI: 'Bearer abcdefghijklmnop'}\n"),
])
def test_a_literal_key_is_refused_and_never_echoed(tmp_path: Path, text: str) -> None:
    text = text.replace("kind: sim", "kind: vllm") if "launch" in text else text
    with pytest.raises(SecretInConfigError) as info:
        load_config(write(tmp_path, text))
    message = str(info.value)
    assert "abcdefghijklmnop" not in message
    assert "api_key_env" in message
    assert "c.yaml:" in message


def test_an_env_var_name_is_accepted(tmp_path: Path) -> None:
    text = "name: gw\ntarget:\n  kind: openai\n  model: m\n  base_url: https://taotoken.net/api\n" \
           "  api_key_env: TAOTOKEN_API_KEY\n"
    config = load_config(write(tmp_path, text)).config
    assert config.target.api_key_env == "TAOTOKEN_API_KEY"
