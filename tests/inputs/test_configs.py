"""Serving configs: validation at the boundary, content versions, and no secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracker.errors import ConfigError, SecretInConfigError
from tracker.inputs.configs import load_config

ROOT = Path(__file__).resolve().parents[2]

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
                  "    max-cpu-loras: 2\n"
    flags = load_config(write(tmp_path, text)).config.engine.as_flags()
    assert flags == ["--block-size", "16", "--max-num-seqs", "64", "--enable-prefix-caching",
                     "--swap-space", "4", "--enforce-eager", "--max-cpu-loras", "2"]


@pytest.mark.parametrize(("text", "expected"), [
    (BASE.replace("block_size: 16", "block_size: 12"),
     ["c.yaml:6: engine.block_size:", "(got 12)"]),
    (BASE.replace("max_num_seqs: 64", "max_num_seqs: many"),
     ["c.yaml:7: engine.max_num_seqs:", "(got 'many')"]),
    (BASE + "  kv_cache_dtype: fp16\n",
     ["c.yaml:9: engine.kv_cache_dtype: must be one of auto, bfloat16, float16,", "(got 'fp16')"]),
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


def test_the_schema_takes_the_block_sizes_and_kv_cache_dtypes_of_vllm_0_32(
        tmp_path: Path) -> None:
    for size, dtype in ((256, "bfloat16"), (48, "nvfp4"), (1, "int8_per_token_head")):
        text = BASE.replace("block_size: 16", f"block_size: {size}") + \
            f"  kv_cache_dtype: {dtype}\n"
        engine = load_config(write(tmp_path, text)).config.engine
        assert (engine.block_size, engine.kv_cache_dtype) == (size, dtype)


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


VLLM = """\
name: v
target:
  kind: vllm
  model: meta-llama/Llama-3.1-8B-Instruct
  launch:
    command: ["vllm", "serve"]
"""
KEY = "plain0key0that0is0long"  # shaped like no known token: only the name or flag betrays it


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(SecretInConfigError) as info:
        load_config(write(tmp_path, text))
    message = str(info.value)
    assert KEY not in message and "value hidden" in message and "\n" not in message
    return message


@pytest.mark.parametrize(("command", "flag", "variable"), [
    (f'["vllm", "serve", "--api-key", "{KEY}"]', "--api-key", "VLLM_API_KEY"),
    (f'["vllm", "serve", "--api-key={KEY}"]', "--api-key", "VLLM_API_KEY"),
    (f'["vllm", "serve", "--hf-token", "{KEY}"]', "--hf-token", "HF_TOKEN"),
    (f'["python", "-m", "vllm.entrypoints.openai.api_server", "--token", "{KEY}"]', "--token",
     "HF_TOKEN"),
])
def test_config_refuses_api_key_flag_in_launch_command(
    tmp_path: Path, command: str, flag: str, variable: str
) -> None:
    message = refused(tmp_path, VLLM.replace('["vllm", "serve"]', command))
    assert message.startswith(f"{tmp_path / 'c.yaml'}:6: target.launch.command[")
    assert f"{flag} with a literal value" in message
    assert f"launch.env_from: [{variable}]" in message


@pytest.mark.parametrize("extra", ["api-key", "--api-key", "hf_token", "openai_api_key"])
def test_config_refuses_key_bearing_extra_args(tmp_path: Path, extra: str) -> None:
    message = refused(tmp_path, VLLM + f"engine:\n  extra_args:\n    {extra}: {KEY}\n")
    assert f"c.yaml:9: engine.extra_args.{extra}:" in message
    assert "launch.env_from: [" in message


@pytest.mark.parametrize("name", ["OPENAI_KEY", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN",
                                  "DB_PASSWORD", "GCP_CREDENTIALS", "GITHUB_PAT", "auth"])
def test_config_refuses_a_literal_in_a_secret_named_env_variable(tmp_path: Path, name: str) -> None:
    text = VLLM + f"    env:\n      CUDA_VISIBLE_DEVICES: '0'\n      {name}: {KEY}\n"
    message = refused(tmp_path, text)
    assert f"c.yaml:9: target.launch.env.{name}:" in message
    assert f"launch.env_from: [{name}]" in message


def test_a_token_in_any_string_is_refused_even_inside_a_longer_one(tmp_path: Path) -> None:
    token = "hf_" + "a1" * 15
    text = VLLM.replace('["vllm", "serve"]', f'["sh", "-c", "HF_TOKEN={token} vllm serve"]')
    with pytest.raises(SecretInConfigError, match=r"command\[2\]: holds what looks like") as info:
        load_config(write(tmp_path, text))
    assert token not in str(info.value)


def test_what_a_vllm_user_puts_in_launch_env_and_flags_loads(tmp_path: Path) -> None:
    text = VLLM.replace('["vllm", "serve"]', '["vllm", "serve", "--hf-token", "--tokenizer", '
                        '"meta-llama/Llama-3.1-8B-Instruct"]') + """\
    env: {TOKENIZERS_PARALLELISM: "false", HF_HUB_OFFLINE: "1", VLLM_USE_V1: "1",
          CUDA_VISIBLE_DEVICES: "0,1", HF_TOKEN_PATH: /models/token, AUTH_ENABLED: "no"}
    env_from: [HF_TOKEN, VLLM_API_KEY]
engine:
  max_num_batched_tokens: 8192
  extra_args:
    tokenizer-mode: auto
    ssl-keyfile: /etc/tls/key.pem
    long-prefill-token-threshold: 131072
    allow-credentials: true
    hf-token: true
"""
    launch = load_config(write(tmp_path, text)).config.target.launch
    assert launch is not None and launch.env_from == ["HF_TOKEN", "VLLM_API_KEY"]
    assert launch.env["TOKENIZERS_PARALLELISM"] == "false"


def test_our_own_keys_are_never_secrets(tmp_path: Path) -> None:
    text = BASE + "  max_num_batched_tokens: 4096\n" \
                  "  extra_args: {sim-prefill-s-per-token: 0.0001}\n"
    text = text.replace("  model: m\n", "  model: m\n  simulator: {prefill_s_per_token: 0.0001}\n")
    assert load_config(write(tmp_path, text)).config.simulator.prefill_s_per_token == 0.0001


@pytest.mark.parametrize("value", [KEY, "my key 0123456789", "hf_" + "a1" * 15, "sk-a b"])
def test_api_key_env_value_is_never_echoed(tmp_path: Path, value: str) -> None:
    text = BASE.replace("  model: m\n", f"  model: m\n  api_key_env: '{value}'\n")
    if value == KEY:  # a valid variable name: accepted, it is looked up, never stored as a key
        assert load_config(write(tmp_path, text)).config.target.api_key_env == KEY
        return
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    message = str(info.value)
    assert "target.api_key_env" in message and "value hidden" in message
    assert value not in message and value.split()[0] not in message


@pytest.mark.parametrize("names", ["[HF-TOKEN]", f"['{KEY} x']", "[A, A]", "['1ABC']"])
def test_env_from_takes_variable_names_only(tmp_path: Path, names: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, VLLM + f"    env_from: {names}\n"))
    assert "target.launch.env_from" in str(info.value) and KEY not in str(info.value)


def test_a_variable_in_both_env_and_env_from_is_refused(tmp_path: Path) -> None:
    text = VLLM + "    env: {HF_HUB_OFFLINE: '1'}\n    env_from: [HF_HUB_OFFLINE]\n"
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE is in both env and env_from"):
        load_config(write(tmp_path, text))


@pytest.mark.parametrize(("text", "fragment"), [
    (VLLM.replace("model: meta-llama/Llama-3.1-8B-Instruct", "model: --trust-remote-code"),
     "target.model: a model id must not start with '-'"),
    (VLLM + "engine:\n  extra_args: {served-model-name: --trust-remote-code}\n",
     "engine.extra_args: extra_args 'served-model-name': a value starting with '-'"),
    (VLLM + "engine:\n  extra_args: {served-model-name: [a, --trust-remote-code]}\n",
     "a value starting with '-' would be read by the server as a flag"),
    (VLLM.replace('["vllm", "serve"]', '["--help"]'),
     "target.launch.command: the first item is the program to run"),
    (VLLM + "    env: {'A=B': '1'}\n", "'A=B' is not an environment variable name"),
    (VLLM.replace("meta-llama/Llama-3.1-8B-Instruct", '"m\\0x"'),
     "target.model: holds a NUL character"),
])
def test_values_that_become_arguments_cannot_become_flags(
    tmp_path: Path, text: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert fragment in str(info.value)


def test_negative_numbers_and_flags_in_the_command_are_arguments(tmp_path: Path) -> None:
    text = VLLM.replace('["vllm", "serve"]', '["python", "-m", "vllm.entrypoints.openai"]') + \
        "engine:\n  extra_args: {max-logprobs: -1, seed: '-7', scale: [-0.5, '-1e-3']}\n"
    flags = load_config(write(tmp_path, text)).config.engine.as_flags()
    assert flags == ["--max-logprobs", "-1", "--scale", "-0.5", "-1e-3", "--seed", "-7"]


def test_prose_about_tokens_loads_and_a_token_ending_a_sentence_does_not(tmp_path: Path) -> None:
    prose = BASE + "description: 'The gateway takes Bearer tokens; see TOKENS.md.'\n"
    assert "Bearer tokens" in load_config(write(tmp_path, prose)).config.description
    leaky = BASE + "description: 'our key: sk-abcdefghijklmnopqrstuvwx.'\n"
    with pytest.raises(SecretInConfigError, match="description: holds what looks like"):
        load_config(write(tmp_path, leaky))


# --- cost ------------------------------------------------------------------------------------

def test_a_price_is_part_of_the_config_and_its_version(tmp_path: Path) -> None:
    plain = load_config(write(tmp_path, BASE))
    priced = load_config(write(tmp_path, BASE + "cost: {usd_per_gpu_hour: 2.5, gpus: 1}\n", "p.yaml"))
    dearer = load_config(write(tmp_path, BASE + "cost: {usd_per_gpu_hour: 3.0, gpus: 1}\n", "q.yaml"))
    assert priced.config.cost is not None and priced.config.cost.as_params() == \
        {"usd_per_gpu_hour": 2.5, "gpus": 1}
    assert len({plain.version, priced.version, dearer.version}) == 3
    gateway = load_config(write(tmp_path, BASE + "cost:\n  usd_per_1m_input_tokens: 0\n"
                                "  usd_per_1m_output_tokens: 0.6\n", "g.yaml"))
    assert gateway.config.cost is not None
    assert gateway.config.cost.as_params() == {"usd_per_1m_input_tokens": 0.0,
                                               "usd_per_1m_output_tokens": 0.6}


@pytest.mark.parametrize(("block", "expected"), [
    ("cost:\n  usd_per_gpu_hour: 2.5\n  gpus: 1\n  usd_per_1m_output_tokens: 0.6\n",
     ["c.yaml:9: cost: ", "usd_per_gpu_hour: 2.5", "usd_per_1m_output_tokens: 0.6",
      "keep one kind"]),
    ("cost:\n  usd_per_gpu_hour: 2.5\n", ["c.yaml:9: cost: ", "needs both", "add gpus"]),
    ("cost:\n  usd_per_1m_input_tokens: 0.1\n",
     ["c.yaml:9: cost: ", "add usd_per_1m_output_tokens"]),
    ("cost:\n  usd_per_gpu_hour: 0\n  gpus: 1\n", ["c.yaml:10: cost.usd_per_gpu_hour", "0"]),
    ("cost:\n  usd_per_gpu_hour: 1\n  gpus: 0\n", ["c.yaml:11: cost.gpus"]),
    ("cost:\n  usd_per_1m_input_tokens: -1\n  usd_per_1m_output_tokens: 1\n",
     ["cost.usd_per_1m_input_tokens", "-1"]),
    ("cost:\n  usd_per_gpu_hr: 2\n  gpus: 1\n", ["cost.usd_per_gpu_hr", "usd_per_gpu_hour"]),
    ("cost: {}\n", ["cost: is empty", "remove the cost block"]),
])
def test_bad_cost_blocks_say_where_what_and_the_fix(
        tmp_path: Path, block: str, expected: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, BASE + block))
    message = str(info.value)
    for fragment in expected:
        assert fragment in message, message


def test_a_name_longer_than_the_stores_column_is_refused_at_the_boundary(tmp_path: Path) -> None:
    """Postgres refused a 250-character name in the middle of the run's first write, with the
    SQL as the message; the store's name columns hold 200 characters."""
    assert load_config(write(tmp_path, BASE.replace("name: prod", "name: " + "a" * 200))) \
        .config.name == "a" * 200
    with pytest.raises(ConfigError) as refused:
        load_config(write(tmp_path, BASE.replace("name: prod", "name: " + "a" * 201)))
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'c.yaml'}:1: name:") and "at most 200" in message
