"""Serving configs for tests: the embedded simulator with timings that keep tests fast."""

FAST_SIM = """\
name: fast-sim
target:
  kind: sim
  model: sim/test-model
  simulator: {seed: 1, prefill_s_per_token: 0.00001, decode_base_s: 0.001, decode_per_seq_s: 0.0}
engine:
  max_num_seqs: 8
  block_size: 16
"""


def gate_sim(name: str, engine: str = "") -> str:
    """The gate tests' simulator: run_noise 0, so base and head differ by their config alone (and
    the outcome by the config and the machine's load, never by a run's draw); ``engine``: more
    engine lines, each indented by two spaces."""
    return f"""\
name: {name}
target:
  kind: sim
  model: sim/test-model
  simulator: {{seed: 1, prefill_s_per_token: 0.0001, decode_base_s: 0.008,
              decode_per_seq_s: 0.0002, run_noise: 0.0}}
engine:
  max_num_seqs: 16
  block_size: 16
{engine}"""
