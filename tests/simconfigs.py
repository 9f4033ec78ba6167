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
