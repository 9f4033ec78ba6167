"""Items at temperature 0 are asked once; a sampled item (temperature > 0) as many times as the
set says, each ask a result of its own (``<id>#k``), scored and paired, never counted as drift."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.telemetry.fake_nvml import FakeNvml
from tracker.gate.quality_check import compute_pairs
from tracker.inputs.configs import load_config
from tracker.inputs.suites import load_suite
from tracker.pipeline.execute import execute_suite
from tracker.quality import QualitySetError, load_quality_set
from tracker.telemetry import TelemetrySettings

NO_GPU = TelemetrySettings(nvml=FakeNvml(fail_init=True))
ROOT = Path(__file__).resolve().parents[2]
# two prompts the simulator knows (baselines/quality/basic.jsonl), so it answers them
KNOWN = [json.loads(line) for line in
         (ROOT / "baselines" / "quality" / "basic.jsonl").read_text(encoding="utf-8").splitlines()
         if line.startswith("{")][:2]


def _set(tmp_path: Path, *extra: dict[str, object]) -> Path:
    rows = [{**KNOWN[0], "id": "once"}, {**KNOWN[1], "id": "sampled", "temperature": 0.8,
                                         "samples": 5}, *extra]
    path = tmp_path / "sampled.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


def test_a_sampled_item_has_one_result_id_per_ask(tmp_path: Path) -> None:
    once, sampled = load_quality_set(_set(tmp_path)).items
    assert once.ask_ids == ("once",) and once.temperature == 0.0
    assert sampled.ask_ids == tuple(f"sampled#{k}" for k in range(1, 6))


@pytest.mark.parametrize(("extra", "message"), [
    ({"samples": 3}, r"sampled.jsonl:3: .*samples: an item at temperature 0 is asked once"),
    ({"temperature": 3.0}, r"sampled.jsonl:3: temperature: .*less than or equal to 2"),
])
def test_a_sample_count_without_temperature_or_a_wild_temperature_is_refused(
        tmp_path: Path, extra: dict[str, object], message: str) -> None:
    with pytest.raises(QualitySetError, match=message):
        load_quality_set(_set(tmp_path, {**KNOWN[0], "id": "bad", **extra}))


def test_a_run_asks_the_sampled_item_as_many_times_and_its_asks_are_no_drift(
        tmp_path: Path, store: Engine) -> None:
    config = tmp_path / "sim.yaml"
    config.write_text("name: sampled-sim\ntarget:\n  kind: sim\n  model: m\n  simulator: "
                      "{seed: 3, decode_base_s: 0.001, prefill_s_per_token: 0.0}\n",
                      encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"name: sampled\nquality: {{path: {_set(tmp_path)}, when: every_run}}\n"
                     "workloads:\n  - name: w\n    prompts: {source: synthetic, input_tokens: 8}\n"
                     "    max_tokens: 4\n    ignore_eos: true\n    concurrency: 1\n"
                     "    num_requests: 2\n", encoding="utf-8")
    first, second = (execute_suite(store, load_config(config), load_suite(suite),
                                   telemetry=NO_GPU) for _ in range(2))
    assert first.quality is not None and second.quality is not None
    ids = [item.item_id for item in first.quality.items]
    assert ids == ["once", *(f"sampled#{k}" for k in range(1, 6))]
    assert first.quality.answered == 6  # every ask is scored
    assert second.quality.drift_compared == 1  # only the temperature-0 item is compared
    assert all(item.changed is None for item in second.quality.items[1:])
    pairs, _ = compute_pairs(first.quality, second.quality)
    assert len(pairs) == 6 and not any(pair.changed for pair in pairs[1:])
