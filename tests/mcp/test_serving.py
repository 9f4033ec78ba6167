"""Where `tracker mcp` answers, by the dashboard's rules: stdio for the agent that starts it;
streamable HTTP on 127.0.0.1 (loopback Host headers only); any other address only behind a
reverse proxy that authenticates and names the user, whose name a triage is recorded as. A
missing database is an error, never a new empty store."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.local_http import stop_process
from tests.mcp.conftest import ROOT, DemoCopy, answer
from tests.waiting import wait_for
from tracker.targets.launcher import find_free_port


def tracker_mcp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracker", "mcp", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


@contextmanager
def http_server(url: str, *args: str) -> Iterator[str]:
    """``tracker mcp --transport http`` on a free port; yields its endpoint."""
    port = find_free_port()
    process = subprocess.Popen([sys.executable, "-m", "tracker", "mcp", "--transport", "http",
                                "--port", str(port), "--db", url, *args], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    endpoint = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for(lambda: status_of(endpoint, process) is not None, 120, f"{endpoint} to answer",
                 interval_s=0.2)
        yield endpoint
    finally:
        stop_process(process)
        assert process.stderr is not None
        with process.stderr:
            said = process.stderr.read()
    assert b"Traceback" not in said, said


def status_of(endpoint: str, process: subprocess.Popen[bytes], headers: dict[str, str] | None = None
              ) -> int | None:
    """The HTTP status a bare POST gets, or None while nothing listens."""
    assert process.poll() is None, f"the server exited with {process.returncode}"
    request = urllib.request.Request(endpoint, data=b"{}", method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def refused(endpoint: str, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(endpoint, data=b"{}", method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_wide_address_without_a_sign_in_is_refused_before_anything_is_served(
        demo_copy: DemoCopy) -> None:
    done = tracker_mcp("--transport", "http", "--host", "0.0.0.0", "--db", demo_copy.url)
    assert done.returncode == 2
    assert "--host 0.0.0.0: serving the MCP server beyond this machine needs a sign-in" in \
        done.stderr and "--trust-proxy-auth" in done.stderr
    stdio = tracker_mcp("--port", "9000", "--db", demo_copy.url)
    assert stdio.returncode == 2 and "--port: only with --transport http" in stdio.stderr
    header = tracker_mcp("--transport", "http", "--user-header", "X-User", "--db", demo_copy.url)
    assert header.returncode == 2 and "--user-header: only with --trust-proxy-auth" in \
        header.stderr


def test_a_missing_database_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here.db"
    done = tracker_mcp("--db", str(missing))
    assert done.returncode == 2
    assert f"{missing}: no database there" in done.stderr and "tracker demo --db" in done.stderr
    assert "Traceback" not in done.stderr
    assert not missing.exists()


async def test_http_on_loopback_answers_an_agent_and_refuses_a_foreign_host_header(
        demo_copy: DemoCopy) -> None:
    with http_server(demo_copy.url) as endpoint:
        async with Client(endpoint) as client:
            tools = (await client.list_tools()).tools
            found = answer(await client.call_tool("list_regressions",
                                                  {"metric": "ttft_p99_s"}))
        assert len(tools) >= 12 and found["returned"] == 1
        status, _ = refused(endpoint, {"Host": "attacker.example:80"})
        assert status == 421  # DNS rebinding: a page elsewhere cannot reach it


async def test_behind_a_trusted_proxy_a_request_needs_one_user_and_a_triage_is_recorded_as_it(
        demo_copy: DemoCopy) -> None:
    with http_server(demo_copy.url, "--trust-proxy-auth", "--user-header", "X-Forwarded-Email",
                     "--allow-writes") as endpoint:
        for headers in ({}, {"X-Forwarded-Email": "alice@example.com, mallory@example.com"}):
            status, text = refused(endpoint, headers)
            assert status == 401 and "exactly one x-forwarded-email header" in text
        user = {"X-Forwarded-Email": "alice@example.com"}
        async with httpx2.AsyncClient(headers=user) as http, \
                Client(streamable_http_client(endpoint, http_client=http)) as client:
            [record] = answer(await client.call_tool(
                "list_regressions", {"metric": "ttft_p99_s"}))["regressions"]
            triaged = answer(await client.call_tool("triage_regression", {
                "regression_id": record["id"], "status": "acknowledged"}))
    assert triaged["updated_by"] == "alice@example.com"
