"""An agent's triage of the demo over MCP: `tracker mcp` on stdio, driven by the SDK's client.

It lists the tools, asks what regressed and gets the demo's regression with the
``engine.max_num_seqs`` diff, reads the trend with that change point at the version boundary,
and compares the last good version with the bad one, judged as `tracker gate --base-run …
--head-run …` judges the same runs. Writes are refused without ``--allow-writes``; with it a
bisection is queued, a real `tracker worker` runs it, and the result is read back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy.orm import Session

from tests.demo_run import fetch_demo_records
from tests.mcp.conftest import ROOT, DemoCopy, answer, connect, refusal
from tracker.demo.story import HEADLINE_METRIC
from tracker.inputs.package_data import shipped_configs
from tracker.store.db import open_store
from tracker.store.regressions import RegressionRecord, fetch_regression

READ_TOOLS = {"list_regressions", "get_regression", "get_series", "get_run", "compare_runs",
              "compare_versions", "config_versions", "config_diff", "get_request"}
WRITE_TOOLS = {"queue_run", "queue_bisection", "triage_regression"}
CONFIG, SUITE, WORKLOAD = "demo-chat", "demo-load", "chat-c16"
CHANGE = [{"path": "engine.max_num_seqs", "kind": "changed", "old": 256, "new": 4}]
FAST_WORKER = ("--heartbeat-s", "0.2", "--stale-after-s", "1.5", "--poll-s", "0.1")


def headline(url: str) -> RegressionRecord:
    """The demo's regression on the TTFT p99, as the store holds it."""
    [record] = [r for r in fetch_demo_records(url)
                if r.series.metric == HEADLINE_METRIC and r.regressed is True]
    return record


def tracker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracker", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)


async def test_an_agent_finds_the_demo_regression_its_config_change_and_the_gates_verdict(
        demo_copy: DemoCopy, tmp_path: Path) -> None:
    record = headline(demo_copy.url)
    async with connect(demo_copy.url, stderr=tmp_path / "server.log") as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == READ_TOOLS | WRITE_TOOLS
        assert all(listed[name].annotations.read_only_hint is False for name in WRITE_TOOLS)

        found = answer(await client.call_tool("list_regressions",
                                              {"config": CONFIG, "metric": HEADLINE_METRIC}))
        [item] = found["regressions"]
        assert item["id"] == record.id and item["kind"] == "regression"
        assert item["series"] == {"config": CONFIG, "suite": SUITE, "workload": WORKLOAD,
                                  "metric": HEADLINE_METRIC}
        assert item["unit"] == "s" and item["metric"]["direction"] == "lower_is_better"
        assert item["config_diff"]["changes"] == CHANGE
        assert item["before"] == record.before and item["after"] == record.after
        assert item["interval"] == list(record.interval or ()) and item["interval"][0] > 0
        assert item["change_point"]["run_id"] == record.run_id
        assert item["triage"]["status"] == "open"

        trend = answer(await client.call_tool("get_series", {
            "config": CONFIG, "suite": SUITE, "metric": HEADLINE_METRIC}))
        [series] = trend["series"]
        assert trend["metric"]["unit"] == "s" and series["workload"] == WORKLOAD
        [point] = [c for c in series["change_points"] if c.get("regression_id") == record.id]
        rows = {row[1]: row for row in series["points"]}  # by run id
        assert rows[record.run_id][0] == point["index"] == item["change_point"]["index"]
        last = series["version_boundaries"][-1]
        assert last["run_id"] == record.run_id and last["changes"] == CHANGE

        versions = answer(await client.call_tool("config_versions", {"config": CONFIG}))
        good, bad = (v["version"] for v in versions["versions"][-2:])
        assert (good, bad) == (item["config_diff"]["base_version"],
                               item["config_diff"]["head_version"])
        compared = answer(await client.call_tool("compare_versions", {
            "config": CONFIG, "base_version": good, "head_version": bad, "suite": SUITE}))
        for name in WRITE_TOOLS:
            said = refusal(await client.call_tool(name, {}))
            assert "--allow-writes" in said and "read-only" in said

    runs = [f"--{side}-run={run_id}" for side in ("base", "head")
            for run_id in compared[side]["run_ids"]]
    gate = tracker("gate", *runs, "--json", "-", "--db", demo_copy.url)
    verdict = json.loads(gate.stdout)
    assert compared["outcome"] == verdict["outcome"] == "regression"
    assert compared["exit_code"] == verdict["exit_code"] == gate.returncode == 1
    assert [(r["workload"], r["metric"], r["regressed"]) for r in compared["rows"]] == \
        [(r["workload"], r["metric"], r["regressed"]) for r in verdict["rows"]]
    assert "Traceback" not in (tmp_path / "server.log").read_text()


async def test_with_writes_allowed_a_bisection_is_queued_a_worker_runs_it_and_a_triage_is_kept(
        demo_copy: DemoCopy, tmp_path: Path) -> None:
    record = headline(demo_copy.url)
    suite_file = str(shipped_configs() / "demo" / "suite.yaml")
    log = tmp_path / "server.log"
    async with connect(demo_copy.url, "--allow-writes", stderr=log) as client:
        found = answer(await client.call_tool("get_regression", {"regression_id": record.id}))
        diff = found["config_diff"]
        asked = {"config": CONFIG, "base_version": diff["base_version"],
                 "head_version": diff["head_version"], "suite_file": suite_file,
                 "max_probes": 2}
        queued = answer(await client.call_tool("queue_bisection", asked))
        assert queued["queued"] is True and queued["kind"] == "bisect"
        waiting = answer(await client.call_tool("get_request",
                                                {"request_id": queued["request_id"]}))
        assert waiting["status"] == "queued" and waiting["bisection"] is None
        again = answer(await client.call_tool("queue_bisection", asked))
        assert again["queued"] is False and again["request_id"] == queued["request_id"]

        triaged = answer(await client.call_tool("triage_regression", {
            "regression_id": record.id, "status": "acknowledged",
            "note": "the max_num_seqs cut, bisecting"}))
        assert triaged["previous_status"] == "open" and triaged["status"] == "acknowledged"
        assert str(triaged["updated_by"]).startswith("local:")

    worker = tracker("worker", "--exit-when-empty", *FAST_WORKER, "--db", demo_copy.url)
    assert worker.returncode == 0, worker.stderr

    async with connect(demo_copy.url, stderr=log) as client:
        done = answer(await client.call_tool("get_request",
                                             {"request_id": queued["request_id"]}))
    assert done["status"] == "done", done
    bisection = done["bisection"]
    assert bisection["outcome"] in ("found", "narrowed"), bisection
    assert [c["fields"] for c in bisection["culprits"]] == [["engine.max_num_seqs"]]
    engine = open_store(demo_copy.url)
    try:
        with Session(engine) as session:
            stored = fetch_regression(session, record.id)
    finally:
        engine.dispose()
    assert stored.status.value == "acknowledged" and stored.note == "the max_num_seqs cut, bisecting"
    assert "Traceback" not in log.read_text()
