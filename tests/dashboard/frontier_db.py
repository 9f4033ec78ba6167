"""A database of concurrency ladders on the simulator, for the Frontier page's tests: config
``ladder-sim`` twice at ``max_num_seqs: 4``, then once at 2 (its knee moves left: half the
batch saturates at half the throughput). Built once per test session by real `tracker run`s."""

from __future__ import annotations

from pathlib import Path

from tracker.cli.main import main

LADDER_SIM = """\
name: ladder-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {{seed: 1, prefill_s_per_token: 0.00001, decode_base_s: 0.01, decode_per_seq_s: 0.0,
              run_noise: 0.0}}
engine:
  max_num_seqs: {max_num_seqs}
  block_size: 16
"""

LADDER_SUITE = """\
name: ladder
seed: 5
workloads:
  - name: chat
    prompts: {source: synthetic, input_tokens: 16}
    max_tokens: 8
    ignore_eos: true
    num_requests: 16
    warmup_requests: 1
    stages: [{concurrency: 1}, {concurrency: 2}, {concurrency: 4}, {concurrency: 8},
             {concurrency: 16}]
"""

_BUILT: dict[str, str] = {}


def build_frontier_db(directory: Path) -> str:
    """The database's URL, built on the first call of the session."""
    if "url" in _BUILT:
        return _BUILT["url"]
    url = f"sqlite:///{directory / 'frontier.db'}"
    suite = directory / "ladder.yaml"
    suite.write_text(LADDER_SUITE, encoding="utf-8")
    for name, seqs in (("v1", 4), ("v1", 4), ("v2", 2)):
        config = directory / f"ladder-{name}.yaml"
        config.write_text(LADDER_SIM.format(max_num_seqs=seqs), encoding="utf-8")
        code = main(["run", "--config", str(config), "--suite", str(suite), "--db", url,
                     "--quiet"])
        assert code == 0
    _BUILT["url"] = url
    return url
