"""`tracker gate` on the simulator with speculative decoding: a head whose drafts are mostly
rejected (EAGLE-3 → n-gram prompt lookup on text that does not repeat its prompt) regresses TPOT
about 2x and the report names the acceptance rate, before and after, as the cause; the same
config against itself passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.simconfigs import gate_sim
from tracker.cli.main import main

# run_noise 0: base and head differ by their config alone. Four streams of 64 tokens: decode
# steps dominate, and a step that yields 3.5 tokens against one that yields 1.4 is TPOT x2.
GOOD_DRAFT = gate_sim("spec-sim", """\
  speculative_config: {method: eagle3, model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B,
                       num_speculative_tokens: 4}
""")
POOR_DRAFT = GOOD_DRAFT.replace(
    "{method: eagle3, model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B,",
    "{method: ngram, prompt_lookup_max: 4, prompt_lookup_min: 2,")
SUITE = """\
name: spec-decode
seed: 3
workloads:
  - name: decode
    prompts: {source: synthetic, input_tokens: 32}
    max_tokens: 64
    ignore_eos: true
    concurrency: 4
    num_requests: 24
    warmup_requests: 4
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {"db": tmp_path / "gate.db"}
    for name, text in (("good", GOOD_DRAFT), ("poor", POOR_DRAFT), ("suite", SUITE)):
        paths[name] = tmp_path / f"{name}.yaml"
        paths[name].write_text(text, encoding="utf-8")
    return paths


def _gate(files: dict[str, Path], head: str, *extra: str) -> int:
    return main(["gate", "--base", str(files["good"]), "--head", str(files[head]), "--suite",
                 str(files["suite"]), "--db", str(files["db"]), "--quiet", *extra])


def test_a_poor_draft_regresses_tpot_and_the_report_names_the_acceptance(
        files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gate.json"
    assert _gate(files, "poor", "--max-rounds", "6", "--json", str(out)) == 1
    markdown = capsys.readouterr().out
    verdict = json.loads(out.read_text(encoding="utf-8"))
    rows = {row["metric"]: row for row in verdict["rows"] if row["workload"] == "decode"}
    tpot = rows["tpot_median_s"]
    assert tpot["regressed"] and tpot["verdict"]["rel_change"] > 0.5
    rate = rows["spec_decode_acceptance_rate"]["verdict"]
    assert rate["base"] > 0.5 and rate["head"] < 0.2 and not rate["lower_is_better"]
    length = rows["spec_decode_mean_acceptance_length"]["verdict"]
    assert length["base"] > 3.0 and length["head"] < 1.6
    (spec,) = verdict["speculative_decoding"]
    assert spec["acceptance_rate"] == {"base": rate["base"], "head": rate["head"]}
    assert spec["acceptance_regressed"] and "TPOT median" in spec["tpot_regressed"]
    line = next(line for line in markdown.splitlines()
                if line.startswith("**Speculative decoding**"))
    assert f"decode: acceptance rate {rate['base']:.1%} → {rate['head']:.1%}" in line
    assert "the drafts' acceptance is the cause" in line and "eagle3 → ngram" in line
    acceptance_row = next(line for line in markdown.splitlines()
                          if "| spec decode acceptance rate |" in line)
    assert "❌ regression" in acceptance_row


def test_the_same_speculative_config_passes(files: dict[str, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # 99.5 %: a gate at 95 % raises a false alarm on 5 % of harmless changes by design
    assert _gate(files, "good", "--max-rounds", "4", "--confidence", "0.995",
                 "--json", "-") == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["outcome"] == "pass" and verdict["config_diff"] == []
    assert not any(row["regressed"] for row in verdict["rows"])
    (spec,) = verdict["speculative_decoding"]
    assert spec["cause"] is None and spec["acceptance_rate"]["base"] > 0.5
