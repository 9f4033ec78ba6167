"""Speculative decoding and LoRA adapters in configs and suites: validated as vLLM 0.32 validates
them, passed as its flags, part of the version; a suite's adapter shares are dealt and drawn
reproducibly."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tracker.errors import ConfigError
from tracker.inputs.adapters import AdapterMix, check_adapters_served, compute_adapter_plan
from tracker.inputs.configs import EngineArgs, load_config
from tracker.inputs.suites import load_suite
from tracker.inputs.vllm_args import KNOWN, VllmTarget, check_engine_args

BASE = """\
name: prod
target:
  kind: sim
  model: m
engine:
  max_num_seqs: 64
"""
GPU_0_32 = VllmTarget("0.32.0+cu129", "test", KNOWN["0.32.0"])


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_speculative_config_becomes_vllms_json_flag_and_a_new_version(tmp_path: Path) -> None:
    spec = BASE + "  speculative_config: {method: ngram, num_speculative_tokens: 4, " \
                  "prompt_lookup_max: 4}\n"
    loaded = load_config(write(tmp_path, spec))
    flags = loaded.config.engine.as_flags()
    assert flags[2] == "--speculative-config"
    assert json.loads(flags[3]) == {"method": "ngram", "num_speculative_tokens": 4,
                                    "prompt_lookup_max": 4}
    assert loaded.config.engine.speculative_config is not None
    assert loaded.config.engine.speculative_config.lookup_window == (4, 4)  # min = max
    assert loaded.version != load_config(write(tmp_path, BASE, "d.yaml")).version
    check_engine_args(loaded.config.engine, GPU_0_32, "c.yaml")


@pytest.mark.parametrize(("spec", "expected"), [
    ("{method: eagle3, num_speculative_tokens: 3}",
     "method eagle3 needs model: the draft model's id or path"),
    ("{method: draft_model, num_speculative_tokens: 3}", "method draft_model needs model"),
    ("{method: ngram, num_speculative_tokens: 3, model: x}", "method ngram drafts from the "
                                                             "prompt and takes no model"),
    ("{method: ngram, num_speculative_tokens: 3, prompt_lookup_min: 5, prompt_lookup_max: 2}",
     "prompt_lookup_min=5 must be <= prompt_lookup_max=2"),
    ("{method: eagle, model: h, num_speculative_tokens: 3, prompt_lookup_max: 3}",
     "prompt_lookup_max is the ngram method's prompt-lookup window"),
    ("{method: ngram, num_speculative_tokens: 0}", "num_speculative_tokens"),
    ("{method: ngram}", "num_speculative_tokens"),
    ("{method: medusa, model: h, num_speculative_tokens: 3}", "method"),
    ("{method: ngram, num_speculative_tokens: 2, lookahead: 3}", "lookahead: unknown key"),
])
def test_bad_speculative_configs_are_refused_with_vllms_rule(tmp_path: Path, spec: str,
                                                             expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(write(tmp_path, BASE + f"  speculative_config: {spec}\n"))
    assert "engine.speculative_config" in str(error.value) and expected in str(error.value)


def test_mtp_uses_the_target_model_without_a_draft_model() -> None:
    engine = EngineArgs.model_validate(
        {"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}})
    check_engine_args(engine, GPU_0_32, "c.yaml")


def test_a_method_the_vllm_does_not_have_is_refused_for_that_version() -> None:
    options = dict(KNOWN["0.32.0"].options)
    options["--spec-method"] = ("ngram", "None")
    older = VllmTarget("0.30.0", "test", type(KNOWN["0.32.0"])("0.30.0", options))
    engine = EngineArgs.model_validate({"speculative_config": {
        "method": "eagle3", "model": "h", "num_speculative_tokens": 2}})
    with pytest.raises(ConfigError, match=r"has no speculative method eagle3; use one of ngram$"):
        check_engine_args(engine, older, "c.yaml")


def test_lora_adapters_become_vllms_flags(tmp_path: Path) -> None:
    text = BASE + ("  enable_lora: true\n  max_loras: 2\n  max_lora_rank: 16\n"
                   "  lora_modules: {sql: /adapters/sql, chat: /adapters/chat}\n")
    engine = load_config(write(tmp_path, text)).config.engine
    assert engine.as_flags() == ["--max-num-seqs", "64", "--enable-lora", "--max-loras", "2",
                                 "--max-lora-rank", "16", "--lora-modules",
                                 "chat=/adapters/chat", "sql=/adapters/sql"]
    check_engine_args(engine, GPU_0_32, "c.yaml")


@pytest.mark.parametrize(("lines", "expected"), [
    ("  max_loras: 2\n", "max_loras needs enable_lora: true"),
    ("  enable_lora: false\n  lora_modules: {a: /x}\n", "lora_modules needs enable_lora"),
    ("  enable_lora: true\n  max_lora_rank: 12\n", "must be one of 1, 8, 16, 32, 64"),
    ("  enable_lora: true\n  lora_modules: {}\n", "lists no adapter"),
    ("  enable_lora: true\n  lora_modules: {'a b': /x}\n", "adapter name 'a b' must be"),
    ("  enable_lora: true\n  lora_modules: {a: --evil}\n", "not starting with '-'"),
])
def test_bad_lora_settings_are_refused(tmp_path: Path, lines: str, expected: str) -> None:
    with pytest.raises(ConfigError, match="engine") as error:
        load_config(write(tmp_path, BASE + lines))
    assert expected in str(error.value)


def test_max_loras_in_extra_args_is_refused_now_that_it_has_its_own_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"set engine\.max_loras instead"):
        load_config(write(tmp_path, BASE + "  extra_args: {max-loras: 2}\n"))


def test_fixed_shares_are_dealt_in_proportion_and_interleaved() -> None:
    mix = AdapterMix.model_validate({"shares": {"sql": 3, "chat": 1}})
    plan = compute_adapter_plan(mix, 8)
    assert Counter(plan) == {"sql": 6, "chat": 2}
    assert plan[:4].count("chat") == 1  # spread out, not in a block
    reordered = AdapterMix.model_validate({"shares": {"chat": 1, "sql": 3}})
    assert compute_adapter_plan(reordered, 8) == plan  # key order changes nothing


def test_a_zipf_distribution_is_seeded_and_favours_the_first_name() -> None:
    mix = AdapterMix.model_validate({"names": ["a", "b", "c", "d"], "distribution": "zipf",
                                     "zipf_s": 1.2, "seed": 7})
    plan = compute_adapter_plan(mix, 2000)
    assert plan == compute_adapter_plan(mix, 2000)
    counts = Counter(plan)
    assert counts["a"] > counts["b"] > counts["c"] > counts["d"] > 0
    uniform = AdapterMix.model_validate({"names": ["a", "b", "c", "d"]})
    assert min(Counter(compute_adapter_plan(uniform, 2000)).values()) > 400


@pytest.mark.parametrize(("adapters", "expected"), [
    ("{shares: {a: 1}, names: [a]}", "give exactly one of shares"),
    ("{}", "give exactly one of shares"),
    ("{shares: {a: 1}, seed: 3}", "seed applies to names"),
    ("{names: [a, a]}", "lists an adapter twice"),
    ("{names: [a], zipf_s: 2}", "zipf_s applies to distribution: zipf only"),
    ("{shares: {a: 0}}", "greater than 0"),
])
def test_bad_adapter_mixes_are_refused(tmp_path: Path, adapters: str, expected: str) -> None:
    suite = f"""\
name: s
workloads:
  - name: w
    prompts: {{source: synthetic, input_tokens: 8}}
    max_tokens: 8
    concurrency: 1
    num_requests: 2
    adapters: {adapters}
"""
    with pytest.raises(ConfigError, match="adapters") as error:
        load_suite(write(tmp_path, suite, "suite.yaml"))
    assert expected in str(error.value)


def test_a_workload_asking_for_an_adapter_the_config_does_not_serve_is_refused() -> None:
    mix = AdapterMix.model_validate({"shares": {"sql": 1, "code": 1}})
    check_adapters_served([("w", mix)], None, "c.yaml")  # an attached server: not checked
    check_adapters_served([("w", mix)], {"sql": "/a", "code": "/b"}, "c.yaml")
    with pytest.raises(ConfigError, match=r"workload w: asks for LoRA adapter code, which "
                                          r"c\.yaml does not serve"):
        check_adapters_served([("w", mix)], {"sql": "/a"}, "c.yaml")
