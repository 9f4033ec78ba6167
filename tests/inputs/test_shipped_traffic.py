"""The shipped traffic suites and their data files: they load, the seeded script that writes the
files is deterministic, the shipped files are what it writes, and the wheel carries them."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tracker.inputs.suites import load_suite
from tracker.inputs.word_tokenizer import count_tokens

ROOT = Path(__file__).resolve().parents[2]
TRAFFIC = ROOT / "baselines" / "traffic"
SAMPLES = ("sharegpt-sample.json", "conversations.jsonl", "mooncake-sample.jsonl",
           "azure-sample.csv")


def _generate(folder: Path, hash_seed: str) -> None:
    subprocess.run([sys.executable, str(TRAFFIC / "generate.py"), "--out", str(folder)],
                   check=True, capture_output=True, cwd=ROOT,
                   env={**os.environ, "PYTHONHASHSEED": hash_seed})


def test_the_script_writes_the_shipped_files_byte_for_byte_every_time(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    _generate(first, "1")
    _generate(second, "2")
    for name in SAMPLES:
        written = (first / name).read_bytes()
        assert written == (second / name).read_bytes(), name
        assert written == (TRAFFIC / name).read_bytes(), f"{name}: rerun baselines/traffic/generate.py"


def test_the_shipped_traffic_suites_load_with_their_files_in_the_version() -> None:
    suites = {name: load_suite(ROOT / "baselines" / f"{name}.yaml")
              for name in ("dataset-chat", "multi-turn-chat", "trace-replay")}
    for loaded in suites.values():
        assert set(loaded.data_files) == {w.name for w in loaded.suite.workloads}
    chat = suites["dataset-chat"].traffic["sharegpt-four-users"]
    assert len({r.messages[-1].content for r in chat.requests}) == len(chat.requests) == 34
    assert len({r.max_tokens for r in chat.requests}) > 10  # recorded lengths vary
    multi = suites["multi-turn-chat"]
    live, recorded = (multi.traffic[n] for n in ("live-history", "recorded-history"))
    assert (live.history, recorded.history) == ("live", "recorded")
    assert all(3 <= len(s.turns) <= 4 and s.system for s in live.sessions)
    assert all(t.recorded_answer for s in recorded.sessions for t in s.turns[:-1])
    trace = suites["trace-replay"]
    mooncake = trace.traffic["mooncake"].requests
    assert [r.arrival_s for r in mooncake[:3]] == [None, None, 0.0]
    assert all(count_tokens(r.messages[0].content) == r.requested_input_tokens for r in mooncake)
    arrivals = [r.arrival_s for r in trace.traffic["azure"].requests[2:]]
    assert arrivals == sorted(arrivals) and arrivals[-1] is not None and arrivals[-1] < 10


def test_the_shipped_mooncake_sample_shares_prefix_blocks() -> None:
    loaded = load_suite(ROOT / "baselines" / "trace-replay.yaml")
    prompts = [r.messages[0].content for r in loaded.traffic["mooncake"].requests]
    heads = [" ".join(p.split(" ")[:512]) for p in prompts]  # the first block of each row
    assert len(set(heads)) < len(heads) / 2  # most rows open with an app's system prompt


def test_the_wheel_carries_the_traffic_files() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = data["tool"]["setuptools"]["package-data"]["tracker._baselines"]
    for name in SAMPLES:
        assert any(fnmatch.fnmatch(f"traffic/{name}", pattern) for pattern in globs), name
