"""A bad request gets one clear line, never a traceback: unknown ids and names, huge limits,
malformed arguments (wrong types, unknown keys, bad times and versions), an unknown tool or
resource. Each line says where (the tool and the argument), what was wrong, the bad value and
the fix; the server goes on answering, and its log holds no traceback either."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from tests.mcp.conftest import DemoCopy, answer, connect, refusal
from tests.mcp.test_demo_over_mcp import CONFIG, SUITE

SERIES = {"config": CONFIG, "suite": SUITE, "metric": "ttft_p99_s"}
BAD: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    # unknown ids and names
    ("get_run", {"run_id": 999_999}, ("get_run: run 999999 not found",)),
    ("get_regression", {"regression_id": 424_242},
     ("regression_id: no regression 424242", "list_regressions")),
    ("get_request", {"request_id": 31_337}, ("request_id: no request 31337",)),
    ("compare_runs", {"base_run_ids": [1], "head_run_ids": [999_999]}, ("run 999999 not found",)),
    ("config_versions", {"config": "no-such-config"},
     ("config: no config named 'no-such-config'", "demo-chat")),
    ("config_diff", {"config": CONFIG, "base_version": "abcdef", "head_version": "abcdef"},
     ("demo-chat@abcdef: no stored config version matches",)),
    ("compare_versions", {"config": CONFIG, "base_version": "fedcba", "head_version": "abcdef",
                          "suite": SUITE}, ("demo-chat@fedcba: no stored config version",)),
    ("get_series", {**SERIES, "suite": "no-such-suite"},
     ("suite: no suite named 'no-such-suite'", "demo-load")),
    ("get_series", {**SERIES, "workload": "no-such-workload"},
     ("workload: suite demo-load has no workload 'no-such-workload'", "chat-c16")),
    # huge limits
    ("list_regressions", {"limit": 10**12}, ("limit: must be at most 50 (got 1000000000000)",)),
    ("get_series", {**SERIES, "max_points": 10**9}, ("max_points: must be at most 5000",)),
    ("get_run", {"run_id": 2**70}, ("run_id: must be at most 9223372036854775807",)),
    ("compare_runs", {"base_run_ids": list(range(1, 200)), "head_run_ids": [2]},
     ("base_run_ids: must hold at most 50 items",)),
    ("list_regressions", {"limit": 0}, ("limit: must be at least 1 (got 0)",)),
    # malformed arguments
    ("get_run", {"run_id": "nineteen"}, ("run_id: must be a whole number (got 'nineteen')",)),
    ("get_run", {}, ("run_id: required",)),
    ("list_regressions", {"bogus": 1}, ("bogus: not an argument of this tool", "metric")),
    ("list_regressions", {"since": "last tuesday"},
     ("since: must be an ISO 8601 date or time", "'last tuesday'")),
    ("list_regressions", {"statuses": ["closed"]},
     ("statuses.0: must be one of 'open', 'acknowledged'", "(got 'closed')")),
    ("list_regressions", {"metric": "latency"},
     ("metric: not in the metric registry", "tracker://metrics")),
    ("config_diff", {"config": CONFIG, "base_version": "zz-top", "head_version": "abcdef"},
     ("base_version: must be a config version: 6 to 64 hex digits",)),
    ("compare_runs", {"base_run_ids": [], "head_run_ids": [1]},
     ("base_run_ids: must hold at least 1 item (got [])",)),
    ("list_regressions", {"config": "x" * 5000}, ("config: must be at most 200 characters",)),
]


async def test_bad_requests_get_one_clear_line_and_the_server_goes_on(
        demo_copy: DemoCopy, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    lines: list[str] = []
    # the handshake era (2025's protocol, what most agents' clients speak): both eras are served
    async with connect(demo_copy.url, stderr=log, mode="legacy") as client:
        for tool, arguments, expected in BAD:
            said = refusal(await client.call_tool(tool, arguments))
            assert said.startswith(f"error: {tool}: "), said
            for fragment in expected:
                assert fragment in said, (tool, arguments, said)
            lines.append(said)
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("drop_tables", {})
        assert unknown.value.code == INVALID_PARAMS
        assert "unknown tool 'drop_tables'; the tools are list_regressions" in unknown.value.message
        with pytest.raises(MCPError) as missing:
            await client.read_resource("tracker://docs/nope.md")
        assert "tracker://docs/nope.md" in missing.value.message
        assert "tracker://metrics" in missing.value.message
        lines += [unknown.value.message, missing.value.message]
        still = answer(await client.call_tool("list_regressions", {"limit": 1}))
        assert still["returned"] == 1  # the server answers on after every refusal
    for said in [*lines, log.read_text()]:
        assert "Traceback" not in said and 'File "' not in said, said
