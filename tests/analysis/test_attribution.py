"""Attribution: config and environment changes around a change point; "nothing changed" too."""

from __future__ import annotations

import pytest

from tracker.analysis import compute_attribution
from tracker.inputs.config_diff import ABSENT, compute_config_diff

BASE = {"name": "prod", "target": {"kind": "vllm", "model": "m"},
        "engine": {"max_num_seqs": 256, "block_size": 16}}
ENV = {"host": "gpu-1", "driver": "550.54", "engine": "vllm 0.6.3", "gpu": "H100"}


def _with(body: dict[str, object], **engine: object) -> dict[str, object]:
    return {**body, "engine": {**body["engine"], **engine}}  # type: ignore[dict-item]


def test_the_engine_arg_changed_at_the_change_point_is_named() -> None:
    configs = [BASE, BASE, BASE, _with(BASE, max_num_seqs=128), _with(BASE, max_num_seqs=128)]
    attribution = compute_attribution(3, configs, [ENV] * 5)
    assert [(c.path, c.old, c.new, c.at) for c in attribution.config_changes] == \
        [("engine.max_num_seqs", 256, 128, 3)]
    assert attribution.environment_changes == ()
    assert attribution.summary() == "engine.max_num_seqs: 256 → 128"


def test_a_change_a_night_off_the_estimate_is_still_reported() -> None:
    envs = [ENV, ENV, {**ENV, "engine": "vllm 0.6.4"}, {**ENV, "engine": "vllm 0.6.4"}]
    attribution = compute_attribution(3, [BASE] * 4, envs, tolerance=2)
    assert [(c.path, c.old, c.new) for c in attribution.environment_changes] == \
        [("engine", "vllm 0.6.3", "vllm 0.6.4")]


def test_nothing_changed_is_an_answer() -> None:
    attribution = compute_attribution(2, [BASE] * 4, [ENV] * 4)
    assert attribution.nothing_changed
    assert "nothing changed" in attribution.summary()


def test_a_key_that_appears_shows_the_default_as_old_value() -> None:
    changes = compute_config_diff(BASE, _with(BASE, kv_cache_dtype="fp8"))
    assert [(c.path, c.old, c.new) for c in changes] == [("engine.kv_cache_dtype", ABSENT, "fp8")]


def test_mismatched_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="same runs"):
        compute_attribution(1, [BASE] * 3, [ENV] * 2)
    with pytest.raises(ValueError, match="outside"):
        compute_attribution(5, [BASE] * 3, [ENV] * 3)


def test_a_launched_servers_port_log_and_startup_times_are_no_cause_its_kv_capacity_is() -> None:
    """Every launch has its own port, log file, pid and startup and load times: never a cause.
    The KV-cache capacity it reported is a fact of the setup: a change of it is named."""

    def launched(night: int, kv_tokens: int) -> dict[str, object]:
        return {**ENV, "launch": {"pid": 4000 + night, "port": 41000 + night,
                                  "log_path": f"tracker-logs/vllm-{night}.log",
                                  "startup_s": 41.0 + night, "model_load_s": 3.0 + night / 10,
                                  "kv_cache_tokens": kv_tokens, "block_size": 128}}

    quiet = compute_attribution(2, [BASE] * 4, [launched(n, 1048576) for n in range(4)])
    assert quiet.nothing_changed, quiet.environment_changes
    moved = compute_attribution(2, [BASE] * 4, [launched(n, 1048576 if n < 2 else 524288)
                                                 for n in range(4)])
    assert [(c.path, c.old, c.new) for c in moved.environment_changes] == \
        [("launch.kv_cache_tokens", 1048576, 524288)]
