"""No secret leaves `tracker mcp`: a key stored raw in every outside text a tool shows (as an
older tracker stored it) reaches no tool's answer, no refusal, no resource and no log line.

The demo's database gets, written with plain sqlite3 (no redaction), a text that holds two keys:
one shaped like an OpenAI key (hidden by its shape, also as a gateway echoes it masked) and one
of no known shape, which the server knows as a secret only because its environment holds it under
a name that says so (as a host's ``OPENAI_API_KEY`` would): hidden whole, also upper-cased, and
never cut in half where a tool quotes a bad argument (a masked echo of it is not hidden: a name
is a guess, so only a registered key's pieces are; the server registers none). The text goes
into every regression's note, attribution and triager, every run's host and reason, a
workload's error classes, the bad config version's body, a queued request's error and worker,
and a bisection's reason, culprits and probes. Then every tool is called (the writes allowed),
with arguments that reach that text, and with arguments that carry the key themselves.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from tests.mcp.conftest import DemoCopy, answer, connect
from tests.mcp.test_demo_over_mcp import CONFIG, READ_TOOLS, SUITE, WRITE_TOOLS
from tracker.inputs.package_data import shipped_configs

SHAPED = "sk-proj-MCPsentinel7Hq2Zx9Lw4Rt8Vb3Nc"
PLAIN = "Qm7vX2kP9wL4tZ8rB3nY6cJ1"  # no token shape: hidden because the environment names it
KEY_ENV = "TT_UPSTREAM_API_KEY"
TEXT = (f"upstream said: key {SHAPED} / {PLAIN} / {PLAIN.upper()} / masked "
        f"{SHAPED[:8]}****{SHAPED[-6:]}")
PIECES = (SHAPED, SHAPED[-8:], SHAPED[-6:], PLAIN, PLAIN[-6:], PLAIN[5:13], PLAIN[:8])


def leaks(text: str) -> list[str]:
    folded = text.lower()
    return [piece for piece in PIECES if piece.lower() in folded]


def inject(path: Path) -> None:
    """``TEXT`` in every outside string the tools show, stored raw."""
    connection = sqlite3.connect(path)
    try:
        with connection:
            execute = connection.execute
            execute("UPDATE regressions SET note = ?, attribution = ?, updated_by = ?",
                    (TEXT, TEXT, TEXT))
            execute("UPDATE runs SET host = ?, status_reason = ?", (TEXT, TEXT))
            execute("UPDATE workload_results SET errors = ?", (json.dumps({TEXT: 1}),))
            (version_id, canonical) = execute(
                "SELECT id, canonical FROM config_versions ORDER BY id DESC LIMIT 1").fetchone()
            body = {**json.loads(canonical), "served_by": TEXT}
            execute("UPDATE config_versions SET canonical = ? WHERE id = ?",
                    (json.dumps(body), version_id))
    finally:
        connection.close()


def inject_request(path: Path, request_id: int) -> None:
    """A failed request of ``request_id``, its worker's name and a stored bisection holding it."""
    connection = sqlite3.connect(path)
    try:
        with connection:
            execute = connection.execute
            (created,) = execute("SELECT started_at FROM runs WHERE id = 1").fetchone()
            cursor = execute(
                "INSERT INTO bisections (config_name, suite_name, base_version, head_version, "
                "workload, metric, outcome, stop_reason, culprits, probes, created_at) VALUES "
                "(?, ?, 'a', 'b', ?, 'ttft_p99_s', 'found', ?, ?, ?, ?)",
                (CONFIG, SUITE, TEXT, TEXT, json.dumps([{"fields": [TEXT], "share": 1.0}]),
                 json.dumps([{"number": 1, "fields": [TEXT], "reason": TEXT}]), created))
            execute("UPDATE run_requests SET status = 'failed', error = ?, worker_id = ?, "
                    "bisection_id = ? WHERE id = ?", (TEXT, TEXT, cursor.lastrowid, request_id))
    finally:
        connection.close()


def said(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content) + \
        json.dumps(result.structured_content)


async def test_a_key_stored_raw_reaches_no_tool_answer_refusal_resource_or_log(
        demo_copy: DemoCopy, tmp_path: Path) -> None:
    inject(demo_copy.path)
    log = tmp_path / "server.log"
    outputs: dict[str, str] = {}
    called: set[str] = set()
    suite_file = str(shipped_configs() / "demo" / "suite.yaml")
    async with connect(demo_copy.url, "--allow-writes", stderr=log,
                       env={KEY_ENV: PLAIN}) as client:
        async def call(name: str, arguments: dict[str, Any]) -> CallToolResult:
            result = await client.call_tool(name, arguments)
            outputs[f"{name} {json.dumps(arguments)}"] = said(result)
            called.add(name)
            return result

        regressions = answer(await call("list_regressions", {"statuses": ["open",
                                                                          "improvement"]}))
        record = regressions["regressions"][0]
        assert "[redacted]" in record["triage"]["note"]  # the text is there, the keys hidden
        versions = answer(await call("config_versions", {"config": CONFIG,
                                                         "with_bodies": True}))
        good, bad = (v["version"] for v in versions["versions"][-2:])
        run_id = record["change_point"]["run_id"]
        queued = answer(await call("queue_run", {"config": CONFIG, "version": good,
                                                 "suite_file": suite_file}))
        inject_request(demo_copy.path, queued["request_id"])
        for name, arguments in [
            ("get_regression", {"regression_id": record["id"]}),
            ("get_series", {"config": CONFIG, "suite": SUITE, "metric": "ttft_p99_s"}),
            ("get_run", {"run_id": run_id}),
            ("compare_runs", {"base_run_ids": [run_id - 1], "head_run_ids": [run_id]}),
            ("compare_versions", {"config": CONFIG, "base_version": good,
                                  "head_version": bad, "suite": SUITE}),
            ("config_diff", {"config": CONFIG, "base_version": good, "head_version": bad}),
            ("queue_bisection", {"config": CONFIG, "base_version": good, "head_version": bad,
                                 "suite_file": suite_file}),
            ("queue_run", {"config": CONFIG, "version": bad, "suite_file": suite_file}),
            ("get_request", {"request_id": queued["request_id"]}),
            ("triage_regression", {"regression_id": record["id"], "note": TEXT}),
            ("list_regressions", {"config": TEXT, "since": TEXT}),  # the key as the argument
            ("get_series", {"config": TEXT, "suite": SUITE, "metric": "ttft_p99_s"}),
            ("queue_run", {"config": CONFIG, "suite_file": f"/nonexistent/{TEXT}.yaml"}),
        ]:
            await call(name, arguments)
        for resource in (await client.list_resources()).resources:
            read = await client.read_resource(resource.uri)
            outputs[resource.uri] = "".join(getattr(c, "text", "") for c in read.contents)
        try:
            await client.call_tool(TEXT, {})
        except MCPError as exc:
            outputs["unknown tool"] = exc.message
    assert called == READ_TOOLS | WRITE_TOOLS
    assert "[redacted]" in outputs[f"get_request {json.dumps({'request_id': queued['request_id']})}"]
    found = {where: leaks(text) for where, text in [*outputs.items(),
                                                      ("server log", log.read_text())]}
    leaky = {where: pieces for where, pieces in found.items() if pieces}
    assert not leaky, f"the key (or a piece of it) reached: {leaky}"
