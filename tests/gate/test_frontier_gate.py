"""The frontier's shift in the gate: a head whose knee moved left (its batch cut from 16 to 2
sequences) quarters the capacity at the SLO of a sweep, and `tracker gate` exits 1 on that row.

A client-bound probe ends a sweep (docs/load.md), so on a starved host a run may measure no
capacity; such a run is left out of the capacity row, and the effect (16 req/s against 4) is
made large enough that the runs that did measure it decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.simconfigs import gate_sim
from tracker.cli.main import main

BASE = gate_sim("frontier-sim")
LEFT = BASE.replace("max_num_seqs: 16", "max_num_seqs: 2")  # saturates near 14 req/s

SUITE = """\
name: frontier-small
seed: 3
workloads:
  - name: ladder
    prompts: {source: synthetic, input_tokens: 32}
    max_tokens: 16
    ignore_eos: true
    num_requests: 40
    warmup_requests: 2
    sweep: {rates: [4, 16], min_attainment: 0.9}
    slos: {ttft_ms: 150}
"""


def test_a_knee_moved_left_fails_the_gate_on_the_capacity_at_the_slo(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = {name: tmp_path / f"{name}.yaml" for name in ("base", "left", "suite")}
    for name, text in (("base", BASE), ("left", LEFT), ("suite", SUITE)):
        paths[name].write_text(text, encoding="utf-8")
    out = tmp_path / "gate.json"
    code = main(["gate", "--base", str(paths["base"]), "--head", str(paths["left"]),
                 "--suite", str(paths["suite"]), "--db", str(tmp_path / "gate.db"), "--quiet",
                 "--repeats", "3", "--json", str(out)])
    capsys.readouterr()
    verdict = json.loads(out.read_text(encoding="utf-8"))
    rows = {(row["workload"], row["metric"]): row for row in verdict["rows"]}
    capacity = rows[("ladder", "capacity_at_slo_req_per_s")]
    reason = (capacity["verdict"] or {}).get("reason")
    assert code == 1, (verdict["problems"], reason)
    assert capacity["regressed"], reason
    # the sweep's own result holds no requests: no latency rows of its own, no "not measured"
    assert ("ladder", "ttft_median_s") not in rows
    assert not [p for p in verdict["problems"] if p.startswith("ladder:")]
