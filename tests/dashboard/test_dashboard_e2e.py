"""End to end: `tracker dashboard` on 127.0.0.1, driven in Debian's Chromium through Playwright.

Overview -> Trends -> a run -> Compare, checking real content on each page and saving a
screenshot of each to artifacts/screenshots/ (or $TRACKER_SCREENSHOT_DIR), which CI keeps.
Then every page over a database whose outside text holds a Markdown image and an HTML tag
pointing at a local server that counts requests: the text shows literally and the server gets
none. That dashboard trusts a reverse proxy (the browser sends its user header), and a triage
records that user.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from tests.dashboard.conftest import Populated, inject_outside_text, named_markup
from tests.demo_run import DemoOutput
from tests.local_http import CountingServer
from tests.waiting import wait_for
from tracker.dashboard.trendview import OTHER_LABEL
from tracker.dashboard.ui import WORD_JOINER
from tracker.store.db import open_store
from tracker.store.regressions import fetch_regression
from tracker.targets.launcher import find_free_port

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


@contextmanager
def _serve(db_url: str, *flags: str) -> Iterator[str]:
    """`tracker dashboard` over ``db_url`` on a free port until the block ends; its base URL."""
    port = find_free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tracker", "dashboard", "--db", db_url, "--port", str(port),
         *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
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
def dashboard(populated: Populated) -> Iterator[str]:
    with _serve(populated.url) as base:
        yield base


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
    _settle(page)
    workloads = page.get_by_test_id("stDataFrame").first
    expect(workloads).to_contain_text("TTFT p99 ms")
    # the grid's scroller (glide-data-grid's own class): every column in view, none cut off
    scrolled, shown = workloads.locator(".dvn-scroller").evaluate(
        "s => [s.scrollWidth, s.clientWidth]")
    assert scrolled <= shown, (scrolled, shown)
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


# --- the capacity frontier ----------------------------------------------------------------------


def test_the_frontier_chart_renders_versions_and_knees_in_chromium(
        tmp_path_factory: pytest.TempPathFactory, screenshots: Path) -> None:
    from tests.dashboard.frontier_db import build_frontier_db

    url = build_frontier_db(tmp_path_factory.mktemp("e2e-frontier"))
    expect = sync_api.expect
    sync_api.expect.set_options(timeout=CONTENT_TIMEOUT_MS)
    with _serve(url) as base, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(CONTENT_TIMEOUT_MS)
            page.goto(base)
            page.get_by_role("link", name="Frontier").click()
            expect(page.get_by_role("heading", name="Frontier")).to_be_visible()
            chart = page.locator(".js-plotly-plot").first
            expect(chart).to_contain_text("achieved throughput (req/s)")
            expect(chart).to_contain_text("knee")
            traces = _plot_traces(page)
            assert traces["knee"] >= 2, traces  # a knee per version at least
            assert sum(name.startswith("version ") for name in traces) == 2, traces
            _shoot(page, screenshots / "6-frontier.png")
        finally:
            browser.close()


# --- outside text, behind a trusted proxy --------------------------------------------------------

PROXY_USER = "erin@example.com"
@pytest.fixture(scope="module")
def image_server() -> Iterator[CountingServer]:
    with CountingServer() as server:
        yield server


@pytest.fixture(scope="module")
def outside_db(populated: Populated, image_server: CountingServer,
               tmp_path_factory: pytest.TempPathFactory) -> str:
    return inject_outside_text(populated, tmp_path_factory.mktemp("e2e-outside"),
                               image_server.url)


@pytest.fixture(scope="module")
def proxied_dashboard(outside_db: str) -> Iterator[str]:
    with _serve(outside_db, "--trust-proxy-auth") as base:
        yield base


@contextmanager
def _proxied_page(requested: list[str]) -> Iterator[Any]:
    """A page whose every request carries the proxy's user header; ``requested`` collects the
    URL of every request the browser makes."""
    sync_api.expect.set_options(timeout=CONTENT_TIMEOUT_MS)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context(viewport=VIEWPORT,
                                          extra_http_headers={"X-Forwarded-User": PROXY_USER})
            page = context.new_page()
            page.set_default_timeout(CONTENT_TIMEOUT_MS)
            page.on("request", lambda request: requested.append(request.url))
            yield page
        finally:
            browser.close()


def _visits(image_url: str) -> list[tuple[str, str]]:
    """(path and query, page title) of every page, on the runs and records holding markup."""
    config = urllib.parse.quote(f"unreachable {named_markup(image_url)}")
    return [("/", "Overview"), ("/trends", "Trends"), ("/run?run=5", "Run detail"),
            ("/run?run=3", "Run detail"), ("/compare?base=2&head=3", "Compare"),
            ("/compare?base=4&head=5", "Compare"), ("/regressions", "Regressions"),
            ("/configs?config=fast-sim", "Configs"), (f"/configs?config={config}", "Configs")]


def test_outside_markup_shows_literally_and_fetches_nothing_in_chromium(
        proxied_dashboard: str, image_server: CountingServer, screenshots: Path) -> None:
    requested: list[str] = []
    links: list[str] = []
    expect = sync_api.expect
    with _proxied_page(requested) as page:
        for path, title in _visits(image_server.url):
            page.goto(proxied_dashboard + path)
            expect(page.get_by_role("heading", name=title)).to_be_visible()
            _settle(page)
            links += page.locator("a[href]").evaluate_all("links => links.map(a => a.href)")
            if path == "/run?run=5":
                alert = page.get_by_role("alert").first
                expect(alert).to_contain_text("Failed: failed: ![x](")
                shown = alert.inner_text().replace(WORD_JOINER, "")
                assert f'![x]({image_server.url}) <img src="{image_server.url}">' in shown
                assert "key [redacted]" in shown
                _shoot(page, screenshots / "5-outside-text.png")
        assert image_server.paths == []
        assert not [url for url in requested if url.startswith(image_server.url)]
        assert not [url for url in links if url.startswith(("http://127.0.0.1:9/",
                                                            image_server.url))]
        # The control: this browser does fetch the URL when a page really asks for it.
        page.evaluate("url => { const image = new Image(); image.src = url; }", image_server.url)
        wait_for(lambda: len(image_server.paths) >= 1, 10, "the browser to fetch the image")


def test_triage_behind_a_trusted_proxy_records_its_user_in_chromium(
        proxied_dashboard: str, outside_db: str) -> None:
    expect = sync_api.expect
    with _proxied_page([]) as page:
        page.goto(proxied_dashboard + "/regressions")
        expect(page.get_by_role("heading", name="Regressions")).to_be_visible()
        expect(page.get_by_test_id("stSidebar")).to_contain_text(PROXY_USER)
        page.get_by_text("acknowledged (someone is looking)").click()
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_text("Saved: regression 1 is acknowledged.")).to_be_visible()
        expect(page.get_by_text(f"last triaged by {PROXY_USER} at ")).to_be_visible()
    engine = open_store(outside_db)
    try:
        with Session(engine) as session:
            assert fetch_regression(session, 1).updated_by == PROXY_USER
    finally:
        engine.dispose()


# --- the demo's story --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_output(demo: DemoOutput) -> DemoOutput:
    return demo  # tests/conftest.py's: one `tracker demo` a session


@pytest.fixture(scope="module")
def demo_dashboard(demo_output: DemoOutput) -> Iterator[str]:
    with _serve(demo_output.db_url) as base:
        yield base


def _plot_traces(page: Any) -> dict[str, int]:
    """{trace name: number of points} of the page's first Plotly chart."""
    traces: dict[str, int] = page.locator(".js-plotly-plot").first.evaluate(
        "plot => Object.fromEntries(plot.data.map(t => [t.name || '', (t.x || []).length]))")
    return traces


def _change_hovers(page: Any) -> list[str]:
    """The hover texts of the first chart's change points."""
    hovers: list[str] = page.locator(".js-plotly-plot").first.evaluate(
        "plot => (plot.data.find(t => t.name === 'change point') || {}).hovertext || []")
    return hovers


def test_the_demo_story_shows_on_overview_trends_and_compare_in_chromium(
        demo_dashboard: str, demo_output: DemoOutput, screenshots: Path) -> None:
    found = re.search(r"/compare\?base=(\d+)&head=(\d+) ", demo_output.stdout)
    assert found, demo_output.stdout
    good, bad = found.groups()
    expect = sync_api.expect
    sync_api.expect.set_options(timeout=CONTENT_TIMEOUT_MS)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(CONTENT_TIMEOUT_MS)
            page.goto(demo_dashboard)
            expect(page.get_by_role("heading", name="Overview")).to_be_visible()
            expect(page.get_by_role("heading", name=re.compile(r"Open regressions \(\d+\)"))) \
                .to_be_visible()
            expect(page.get_by_text("demo-chat · demo-load · chat-c16 · TTFT p99").first) \
                .to_be_visible()
            expect(page.locator(".js-plotly-plot").first).to_contain_text("demo-chat")
            assert _plot_traces(page) == {"regression": 1}  # the status grid's one square
            expect(page.get_by_text("regression demo-chat · demo-load")).to_be_visible()
            expect(page.get_by_role("link", name=re.compile(r"Triage regression \d+")).first) \
                .to_be_visible()
            _shoot(page, screenshots / "demo-1-overview.png")

            page.get_by_role("link", name="Trends").click()
            chart = page.locator(".js-plotly-plot").first
            expect(chart).to_contain_text("demo-chat · demo-load · chat-c16")
            expect(chart).to_contain_text("config version changed")
            expect(chart).to_contain_text("change point")
            traces = _plot_traces(page)
            assert traces["config version changed"] == 3, traces  # versions 2, 3 and 4 begin
            assert traces["change point"] >= 1, traces
            _shoot(page, screenshots / "demo-2-trends.png")

            # the throughput drop: the watch's record is drawn, its hover names the diff
            page.get_by_test_id("stSelectbox").filter(has_text="Metric").first.click()
            page.get_by_role("option", name=OTHER_LABEL).click()
            page.get_by_text("output token throughput", exact=True).click()
            expect(chart).to_contain_text("output token throughput (tokens/s)")
            hovers = _change_hovers(page)
            assert any("regression #" in text and "engine.max_num_seqs: 256 → 4" in text
                       for text in hovers), hovers
            _shoot(page, screenshots / "demo-2-trends-throughput.png")

            page.goto(f"{demo_dashboard}/compare?base={good}&head={bad}")
            expect(page.get_by_role("heading", name="What changed")).to_be_visible()
            expect(page.get_by_text(f"#{good} · demo-chat@")).to_be_visible()
            expect(page.get_by_text(f"#{bad} · demo-chat@")).to_be_visible()
            page.get_by_role("tab", name="Config diff").click()
            panel = page.get_by_role("tabpanel").first
            expect(panel).to_contain_text("engine.max_num_seqs")
            _shoot(page, screenshots / "demo-3-compare.png")
        finally:
            browser.close()
