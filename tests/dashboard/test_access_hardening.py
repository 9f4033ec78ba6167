"""Who is looking, behind a proxy that appends to the user header instead of replacing it; and a
dashboard that asks the browser for nothing from any other host (no web font, no favicon from
fonts.gstatic.com), checked in the code and in Debian's Chromium."""

from __future__ import annotations

import ast
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.commands.page_config import _get_favicon_string

from tests.dashboard.conftest import Populated
from tracker.dashboard.access import AuthMode, compute_viewer

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("value", ["alice, mallory", "alice,mallory", "alice ,", ", mallory"])
def test_a_proxy_user_header_holding_a_list_names_no_one(value: str) -> None:
    assert compute_viewer(AuthMode.PROXY, {}, [value], "ana") is None


def test_a_single_proxy_user_is_still_the_viewer() -> None:
    assert compute_viewer(AuthMode.PROXY, {}, ["alice@example.com"], "ana") == "alice@example.com"


def _page_icon() -> object:
    tree = ast.parse((ROOT / "dashboard" / "app.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "set_page_config":
            icon = next(k.value for k in node.keywords if k.arg == "page_icon")
            return ast.literal_eval(icon)
    raise AssertionError("dashboard/app.py calls no st.set_page_config")


def test_the_favicon_is_drawn_by_the_browser_not_fetched_from_a_font_host() -> None:
    # Streamlit's frontend turns "emoji:…" into a data: URL; ":material/…:" into a
    # fonts.gstatic.com address the browser fetches on every page.
    assert _get_favicon_string(_page_icon()).startswith("emoji:")  # type: ignore[arg-type]


def _browser_test_module() -> Any:
    """The end-to-end test's helpers (it skips without Playwright); skips without Chromium."""
    e2e = pytest.importorskip("tests.dashboard.test_dashboard_e2e")
    if e2e.CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium)")
    return e2e


@pytest.fixture
def dashboard(populated: Populated) -> Iterator[str]:
    with _browser_test_module()._serve(populated.url) as base:
        yield base


def test_no_page_asks_the_browser_for_anything_from_another_host_in_chromium(
        dashboard: str) -> None:
    e2e = _browser_test_module()
    requested: list[str] = []
    icons: list[str] = []
    with e2e._proxied_page(requested) as page:
        for path, title in (("/", "Overview"), ("/trends", "Trends"), ("/run?run=1", "Run detail"),
                            ("/regressions", "Regressions"), ("/configs", "Configs")):
            page.goto(dashboard + path)
            e2e.sync_api.expect(page.get_by_role("heading", name=title)).to_be_visible()
            e2e._settle(page)
            icons.append(page.evaluate(
                "() => document.querySelector(\"link[rel='shortcut icon']\").href"))
    host = urllib.parse.urlsplit(dashboard).netloc
    elsewhere = [url for url in requested
                 if urllib.parse.urlsplit(url).scheme in ("http", "https", "ws", "wss")
                 and urllib.parse.urlsplit(url).netloc != host]
    assert elsewhere == []
    assert all(icon.startswith("data:image/svg+xml") for icon in icons), icons
