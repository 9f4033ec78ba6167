"""Baseline suites: seeded, byte-identical prompts and content versions."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracker.errors import ConfigError
from tracker.inputs.suites import Suite, load_suite
from tracker.inputs.word_tokenizer import count_tokens
from tracker.load.bodies import build_request_specs

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {"chat-short", "batch-throughput", "long-context", "classic-load"}

SUITE = """\
name: s
seed: 3
workloads:
  - name: w
    prompts: {source: synthetic, input_tokens: 50, system_prompt_tokens: 20}
    max_tokens: 8
    concurrency: 2
    num_requests: 5
    warmup_requests: 1
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_suites_exist_and_load() -> None:
    suites = {load_suite(p).suite.name: load_suite(p) for p in (ROOT / "baselines").glob("*.yaml")}
    assert set(suites) >= SHIPPED
    classic = suites["classic-load"].suite.workloads[0]
    assert (classic.num_requests, classic.concurrency, classic.max_tokens) == (256, 32, 256)
    assert classic.temperature == 0.7
    last = suites["classic-load"].traffic[classic.name].requests[-1]
    assert last.messages[-1].content == "请用 200 字解释什么是 KV Cache。"
    chat = suites["chat-short"]
    assert all(r.messages[0].role == "system" and r.messages[0].content
               for w in chat.suite.workloads for r in chat.traffic[w.name].requests)


def test_synthetic_prompts_have_the_asked_length_and_share_the_system_prompt(
    tmp_path: Path,
) -> None:
    loaded = load_suite(write(tmp_path, SUITE))
    requests = loaded.traffic["w"].requests
    users = [r.messages[-1].content for r in requests]
    systems = {r.messages[0].content for r in requests}
    assert len(users) == 6  # 1 warm-up + 5 measured
    assert all(count_tokens(u) == 50 for u in users)
    assert len(set(users)) == 6
    assert len(systems) == 1 and count_tokens(systems.pop()) == 20
    assert all(r.messages[0].role == "system" and r.requested_input_tokens == 70 for r in requests)


def _digest_in_subprocess(path: Path, hash_seed: str) -> str:
    code = "import sys; from tracker.inputs.suites import load_suite; " \
           "print(load_suite(sys.argv[1]).prompts_digest)"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run([sys.executable, "-c", code, str(path)], env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def test_the_same_file_gives_byte_identical_prompts_in_any_process(tmp_path: Path) -> None:
    path = write(tmp_path, SUITE)
    digests = {_digest_in_subprocess(path, seed) for seed in ("0", "1", "12345")}
    assert digests == {load_suite(path).prompts_digest}


def test_request_bodies_are_identical_across_loads(tmp_path: Path) -> None:
    path = write(tmp_path, SUITE)
    bodies = []
    for _ in range(2):
        loaded = load_suite(path)
        w = loaded.suite.workloads[0]
        warm, measured = build_request_specs(w, loaded.traffic["w"], model="m",
                                             supports_ignore_eos=True)
        bodies.append([s.body for s in warm + measured])
    assert bodies[0] == bodies[1]
    body = json.loads(bodies[0][1])
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0]["role"] == "system"


def test_a_changed_seed_changes_prompts_and_version(tmp_path: Path) -> None:
    a = load_suite(write(tmp_path, SUITE))
    b = load_suite(write(tmp_path, SUITE.replace("seed: 3", "seed: 4"), "t.yaml"))
    assert a.prompts_digest != b.prompts_digest and a.version != b.version


def test_formatting_does_not_change_the_version(tmp_path: Path) -> None:
    compact = ("workloads: [{name: w, max_tokens: 8, concurrency: 2, num_requests: 5, "
               "warmup_requests: 1, prompts: {system_prompt_tokens: 20, input_tokens: 50, "
               "source: synthetic}}]\nseed: 3\nname: s\n")
    assert load_suite(write(tmp_path, SUITE)).version == \
        load_suite(write(tmp_path, compact, "t.yaml")).version


def test_ignore_eos_is_sent_only_where_supported(tmp_path: Path) -> None:
    loaded = load_suite(write(tmp_path, SUITE.replace("max_tokens: 8", "max_tokens: 8\n"
                                                      "    ignore_eos: true")))
    w = loaded.suite.workloads[0]
    _, with_eos = build_request_specs(w, loaded.traffic["w"], model="m", supports_ignore_eos=True)
    _, without = build_request_specs(w, loaded.traffic["w"], model="m", supports_ignore_eos=False)
    assert json.loads(with_eos[0].body)["ignore_eos"] is True
    assert "ignore_eos" not in json.loads(without[0].body)


@pytest.mark.parametrize(("text", "fragment"), [
    (SUITE + SUITE[SUITE.index("  - name"):], "used twice"),
    (SUITE.replace("source: synthetic", "source: dataset"), "workloads[0].prompts"),
    (SUITE.replace("concurrency: 2", "concurrency: 0"), "s.yaml:7: workloads[0].concurrency"),
    (SUITE.replace("max_tokens: 8", "max_token: 8"),
     "workloads[0].max_token: unknown key; remove it or fix its spelling "
     "(did you mean 'max_tokens'?)"),
])
def test_bad_suites_are_clear_errors(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_suite(write(tmp_path, text))
    assert fragment in str(info.value)


def test_a_suite_may_share_settings_through_anchors_and_merge_keys(tmp_path: Path) -> None:
    text = """\
name: s
seed: 3
workloads:
  - &w {name: base, prompts: {source: synthetic, input_tokens: 20}, max_tokens: 8,
        concurrency: 2, num_requests: 4}
  - {<<: *w, name: a}
  - {<<: *w, name: b, concurrency: 4}
"""
    suite = load_suite(write(tmp_path, text)).suite
    assert [(w.name, w.concurrency) for w in suite.workloads] == [("base", 2), ("a", 2), ("b", 4)]


def test_a_suite_that_expands_past_the_limit_is_refused_with_its_line(tmp_path: Path) -> None:
    rows = ["x0: &x0 [" + ", ".join(["word"] * 30) + "]"]
    rows += [f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 30)}]" for i in range(1, 4)]
    path = write(tmp_path, SUITE + "\n".join(rows) + "\n")
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    assert str(info.value).startswith(f"{path}:12: YAML with more than 20000 values")


def test_single_turn_traffic_hashes_as_it_always_has(tmp_path: Path) -> None:
    """Upgrading the tracker keeps suite versions: the digest of plain prompts is the old one
    (name, system prompt, every user prompt, each NUL-terminated)."""
    loaded = load_suite(write(tmp_path, SUITE))
    requests = loaded.traffic["w"].requests
    old = hashlib.sha256()
    for part in ("w", requests[0].messages[0].content, *(r.messages[-1].content for r in requests)):
        old.update(part.encode("utf-8") + b"\x00")
    assert loaded.prompts_digest == old.hexdigest()


def test_a_misspelt_key_in_a_file_source_is_named_at_its_own_line(tmp_path: Path) -> None:
    text = SUITE.replace(
        "    prompts: {source: synthetic, input_tokens: 50, system_prompt_tokens: 20}\n",
        "    prompts:\n      source: dataset\n      path: d.jsonl\n      format: jsonl\n"
        "      max_input_token: 40\n")
    with pytest.raises(ConfigError) as info:
        load_suite(write(tmp_path, text))
    message = str(info.value)
    assert "s.yaml:9: workloads[0].prompts.max_input_token: unknown key" in message, message
    assert "did you mean 'max_input_tokens'" in message


@pytest.mark.parametrize("value", ["0", "-2", "lots", "1.5", "true"])
def test_a_bad_workers_value_names_the_line_and_the_fix(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_suite(write(tmp_path, SUITE.replace("seed: 3", f"seed: 3\nworkers: {value}")))
    message = str(info.value)
    assert "s.yaml:3: workers: must be a whole number of load-generator processes" in message
    assert "or auto" in message


def test_workers_are_how_the_load_is_sent_not_the_suites_version(tmp_path: Path) -> None:
    plain = load_suite(write(tmp_path, SUITE))
    for value in ("4", "auto"):
        loaded = load_suite(write(tmp_path, SUITE.replace("seed: 3", f"seed: 3\nworkers: {value}"),
                                  f"w{value}.yaml"))
        assert loaded.version == plain.version and str(loaded.suite.workers) == value
        again = Suite.model_validate(loaded.canonical)  # what a queued run is rebuilt from
        assert str(again.workers) == value


def test_a_workload_name_leaves_room_for_what_a_run_appends(tmp_path: Path) -> None:
    def suite(name: str) -> Path:
        path = tmp_path / "s.yaml"
        path.write_text(f"name: s\nworkloads:\n  - name: {name}\n    prompts: {{source: synthetic, "
                        "input_tokens: 8}\n    max_tokens: 4\n    concurrency: 1\n"
                        "    num_requests: 2\n", encoding="utf-8")
        return path

    assert load_suite(suite("w" * 160)).suite.workloads[0].name == "w" * 160
    with pytest.raises(ConfigError, match="at most 160 characters"):
        load_suite(suite("w" * 161))  # "/turns-2+" or "@c64" after it must fit in 200


@pytest.mark.parametrize(("line", "value", "limit"), [
    ("input_tokens: 8", "input_tokens: 80000000000", "2000000"),
    ("max_tokens: 4", "max_tokens: 40000000", "2000000"),
    ("num_requests: 2", "num_requests: 2000000000000", "10000000"),
    ("concurrency: 1", "concurrency: 10000000", "100000"),
])
def test_a_typo_of_zeros_is_refused_with_the_limit_not_built_until_memory_runs_out(
        tmp_path: Path, line: str, value: str, limit: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(("name: s\nworkloads:\n  - name: w\n    prompts: {source: synthetic, "
                     "input_tokens: 8}\n    max_tokens: 4\n    concurrency: 1\n"
                     "    num_requests: 2\n").replace(line, value), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_suite(path)
    assert f"less than or equal to {limit}" in str(refused.value)
    assert value.split(": ")[1] in str(refused.value)  # the bad value, as given
