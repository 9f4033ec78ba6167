"""Hostile suites, datasets and traces (issue 27, items 5 and 6): refused at load with one
ConfigError that names the file, the line, the value and the fix; nothing sleeps for years."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.attack.corpus import SUITE
from tracker.errors import ConfigError
from tracker.inputs.suites import load_suite


def refused(tmp_path: Path, prompts: str, shape: str = "",
            files: dict[str, str] | None = None) -> str:
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE.format(prompts=prompts, shape=shape, num=2), encoding="utf-8")
    started = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        load_suite(suite)
    assert time.perf_counter() - started < 2.0
    message = str(caught.value)
    assert "\n" not in message
    return message


MOONCAKE = "{source: trace, path: t.jsonl, format: mooncake, block_tokens: 8}"
ROW = '{{"timestamp": {t}, "input_length": 8, "output_length": 4}}\n'


def test_a_mooncake_row_10_to_the_12_ms_late_is_refused_not_slept_for(tmp_path: Path) -> None:
    message = refused(tmp_path, MOONCAKE, files={"t.jsonl": ROW.format(t=0)
                                                 + ROW.format(t=10**12)})
    assert "t.jsonl:2" in message and "31 days" in message and "time_scale" in message


def test_a_mooncake_timestamp_of_1e306_is_a_config_error(tmp_path: Path) -> None:
    message = refused(tmp_path, MOONCAKE, files={"t.jsonl": ROW.format(t=0)
                                                 + ROW.format(t="1e306")})
    assert "t.jsonl:2: timestamp" in message


@pytest.mark.parametrize("shape", ["request_rate: 0.0000001",
                                   "stages: [{request_rate: 0.0000001}]",
                                   "sweep: {start_rate: 0.0000001}\n    slos: {ttft_ms: 500}"])
def test_a_rate_that_plans_a_run_of_months_is_refused_at_load(tmp_path: Path,
                                                              shape: str) -> None:
    message = refused(tmp_path, "{source: synthetic, input_tokens: 8}", shape)
    assert "past the limit of 31 days" in message and "raise the rate" in message


def test_an_azure_cell_of_200_kb_is_a_config_error_naming_the_line(tmp_path: Path) -> None:
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n0,8," + "9" * 200_000 + "\n"
    message = refused(tmp_path, "{source: trace, path: t.csv, format: azure}",
                      files={"t.csv": text})
    assert "t.csv:2" in message


@pytest.mark.parametrize(("fmt", "text"), [
    ("sharegpt", '[{"conversations": [{"from": "human", "value": "hi \\ud800"}]}]'),
    ("jsonl", '{"prompt": "a \\udfff b"}\n'),
    ("openai-chat", '{"messages": [{"role": "user", "content": "\\ud83d"}]}\n'),
])
def test_a_lone_surrogate_in_a_dataset_is_a_config_error(tmp_path: Path, fmt: str,
                                                         text: str) -> None:
    message = refused(tmp_path, f"{{source: dataset, path: d.data, format: {fmt}}}",
                      "concurrency: 1", {"d.data": text})
    assert "d.data:1" in message and "lone surrogate" in message
    message.encode("utf-8")  # printable: the surrogate is shown escaped
