"""Opening pages under streamlit.testing.v1.AppTest, and reading what they show."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tracker.dashboard import data
from tracker.dashboard.access import AUTH_ENV, AuthMode
from tracker.dashboard.pages import PAGES, PageSpec
from tracker.dashboard.ui import WORD_JOINER
from tracker.store.db import DB_URL_ENV

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")


def start_app(monkeypatch: pytest.MonkeyPatch, url: str, user: dict[str, Any] | None = None,
              mode: AuthMode = AuthMode.LOCAL) -> AppTest:
    """The app over ``url``, signed in as `tracker dashboard` would with ``mode``."""
    monkeypatch.setenv(DB_URL_ENV, url)
    monkeypatch.setenv(AUTH_ENV, mode.value)
    data.clear_caches()
    app = AppTest.from_file(str(APP), default_timeout=60)
    if user is not None:
        app.user = user
    return app


def open_page(monkeypatch: pytest.MonkeyPatch, url: str, spec: PageSpec,
              query: dict[str, str] | None = None, user: dict[str, Any] | None = None,
              mode: AuthMode = AuthMode.LOCAL) -> AppTest:
    app = start_app(monkeypatch, url, user, mode)
    if spec is not PAGES[0]:
        app.run()  # navigation registers the pages on the first run
        app.switch_page(spec.path)
    app.query_params.update(query or {})
    app.run()
    assert not app.exception, app.exception[0].message
    assert [title.value for title in app.title] == [spec.title]
    return app


def shown(markdown: object) -> str:
    """What a reader sees of a Markdown body: its backslash escapes undone, without the
    invisible word joiners that keep bare URLs from becoming links."""
    return _ESCAPED.sub(r"\1", str(markdown)).replace(WORD_JOINER, "")


def texts(app: AppTest) -> str:
    parts = [e.value for kind in ("text", "markdown", "caption", "subheader", "info", "warning",
                                  "error", "success") for e in getattr(app, kind)]
    return "\n".join(shown(p) for p in parts)


def figures(app: AppTest) -> list[dict[str, object]]:
    return [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]


def trace_values(trace: dict[str, object]) -> list[float]:
    """A plotted trace's y values: plotly writes them as a typed array ({"dtype": "f8",
    "bdata": base64}) or, for some data, as a plain list."""
    plotted = trace["y"]
    if isinstance(plotted, dict):
        data = base64.b64decode(str(plotted["bdata"]))
        return np.frombuffer(data, dtype=str(plotted["dtype"])).tolist()
    return np.asarray(plotted, dtype=float).tolist()


def elements(app: AppTest) -> Iterator[Any]:
    """Every element and block of the page, sidebar included, depth first."""
    stack: list[Any] = [app.main, app.sidebar]
    while stack:
        node = stack.pop()
        yield node
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            stack.extend(children.values())
