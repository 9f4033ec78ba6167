"""End to end: `tracker dashboard` on 127.0.0.1, driven in Debian's Chromium through Playwright.

Overview -> Trends -> a run -> Compare, checking real content on each page and saving a
screenshot of each to artifacts/screenshots/ (or $TRACKER_SCREENSHOT_DIR), which CI keeps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard.conftest import Populated
from tracker.launcher import find_free_port

sync_api = pytest.importorskip("playwright.sync_api",
                               reason="the playwright package is not installed (the test extra)")

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
START_TIMEOUT_S = 60.0
CONTENT_TIMEOUT_MS = 30_000
VIEWPORT = {"width": 1400, "height": 1000}

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Debian's chromium is not installed (apt-get install -y chromium; CI installs it)")


def _wait_healthy(base: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode(errors="replace") if process.stdout else ""
            pytest.fail(f"`tracker dashboard` exited with {process.returncode}:\n{output}")
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as response:
                if response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"the dashboard did not answer {base}/_stcore/health in {START_TIMEOUT_S} s")


@pytest.fixture
def dashboard(populated: Populated) -> Iterator[str]:
    port = find_free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tracker", "dashboard", "--db", populated.url, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, process)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()


@pytest.fixture
def screenshots() -> Path:
    folder = Path(os.environ.get("TRACKER_SCREENSHOT_DIR") or ROOT / "artifacts" / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_overview_trends_run_compare_in_chromium(dashboard: str, populated: Populated,
                                                 screenshots: Path) -> None:
    sync_api.expect.set_options(timeout=CONTENT_TIMEOUT_MS)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(CONTENT_TIMEOUT_MS)
            _walk(page, dashboard, populated, screenshots)
        finally:
            browser.close()


def _settle(page: Any) -> None:
    """Wait until Streamlit has finished the script run: nothing stale, no running widget."""
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " && document.querySelectorAll('[data-stale=\"true\"]').length === 0")


def _shoot(page: Any, path: Path) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside its own container, so the
    viewport is grown to the content's height first."""
    _settle(page)
    height = page.evaluate(
        "() => Math.max(...['[data-testid=\"stMain\"]', '[data-testid=\"stAppViewContainer\"]']"
        ".map(s => document.querySelector(s)).filter(e => e).map(e => e.scrollHeight))")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": min(int(height) + 40, 8000)})
    page.wait_for_timeout(500)  # let Plotly re-lay out to the new size
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(VIEWPORT)


def _walk(page: Any, base: str, populated: Populated, screenshots: Path) -> None:
    expect = sync_api.expect
    page.goto(base)
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.get_by_text("Open regressions (1)")).to_be_visible()
    expect(page.get_by_text("unreachable · small")).to_be_visible()  # the failed run
    expect(page.locator(".js-plotly-plot").first).to_contain_text("fast-sim")
    _shoot(page, screenshots / "1-overview.png")

    page.get_by_role("link", name="Trends").click()
    expect(page.get_by_role("heading", name="Trends")).to_be_visible()
    chart = page.locator(".js-plotly-plot").first
    expect(chart).to_contain_text("TTFT p99 (ms)")
    expect(chart).to_contain_text("fast-sim · small · chat")
    expect(chart).to_contain_text("config version changed")
    _shoot(page, screenshots / "2-trends.png")

    latest = populated.run_ids["fast-sim"][-1]
    page.get_by_role("link", name=f"Open the latest run in this view (#{latest})").click()
    expect(page.locator("h3", has_text=f"Run #{latest} · fast-sim · small")).to_be_visible()
    expect(page.get_by_text("Simulated: measured against the tracker's built-in simulator")) \
        .to_be_visible()
    expect(page.get_by_role("heading", name="Workloads")).to_be_visible()
    expect(page.locator(".js-plotly-plot").first).to_contain_text("TTFT (ms)")
    _shoot(page, screenshots / "3-run.png")

    previous = populated.run_ids["fast-sim"][-2]
    page.get_by_role("link", name=f"previous run of this config and suite (#{previous})").click()
    expect(page.get_by_role("heading", name="Compare")).to_be_visible()
    expect(page.get_by_role("heading", name="What changed")).to_be_visible()
    expect(page.get_by_text(f"#{previous} · fast-sim@")).to_be_visible()
    expect(page.locator(".js-plotly-plot").first).to_contain_text("chat · TTFT median (p50)")
    page.get_by_role("tab", name="Config diff").click()
    expect(page.get_by_role("tab", name="Config diff")).to_have_attribute("aria-selected", "true")
    _shoot(page, screenshots / "4-compare.png")
