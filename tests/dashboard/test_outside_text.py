"""Outside text on every page, stored raw by an older tracker: redacted, and shown as text.

The database holds a Markdown image, an HTML tag, a link, an icon directive, a formula and a key
in every outside string the pages show (``conftest.inject_outside_text``). No page may carry the
key (or any 6-character piece of it), and no Markdown element may carry the image, the tag or
the link unescaped; the text itself stays readable.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from google.protobuf import text_format
from google.protobuf.message import Message
from streamlit.testing.v1 import AppTest

from tests.dashboard.apptest import elements, figures, open_page, shown, texts
from tests.dashboard.conftest import SENTINEL, Populated, inject_outside_text, named_markup
from tracker.dashboard.pages import page
from tracker.dashboard.ui import md_text, redact_frame
from tracker.redaction import MARK, PIECE_CHARS

IMAGE_URL = "http://127.0.0.1:9/pixel.png"
INJECTED_CONFIG = "unreachable " + "![x]"  # the start of the renamed config's name
VISITS = [("overview", {}), ("trends", {}), ("run", {"run": "5"}), ("run", {"run": "3"}),
          ("compare", {"base": "2", "head": "3"}), ("compare", {"base": "4", "head": "5"}),
          ("regressions", {}), ("configs", {"config": "fast-sim"})]
# Elements that render their content as text (values, cells, options, JSON), not Markdown.
TEXT_ELEMENTS = frozenset({"text", "code", "json", "dataframe", "plotly_chart", "number_input",
                           "selectbox", "multiselect", "text_area"})
UNESCAPED_MARKUP = re.compile(r"!\[|\]\(|(?<!\\)<img")  # escaped, a backslash sits before each


@pytest.fixture(scope="module")
def outside_url(populated: Populated, tmp_path_factory: pytest.TempPathFactory) -> str:
    return inject_outside_text(populated, tmp_path_factory.mktemp("outside"), IMAGE_URL)


def _dump(proto: Message) -> str:
    return text_format.MessageToString(proto, as_utf8=True)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def everything(app: AppTest) -> str:
    """Every element's message, every table's cells and every figure's strings."""
    parts = [_dump(node.proto) for node in elements(app)
             if isinstance(getattr(node, "proto", None), Message)]
    parts += [frame.value.to_csv() for frame in app.dataframe]
    parts += [html.unescape(text) for figure in figures(app) for text in _strings(figure)]
    return "\n".join(parts)


def markdown_messages(app: AppTest) -> list[str]:
    return [_dump(node.proto) for node in elements(app)
            if isinstance(getattr(node, "proto", None), Message)
            and getattr(node, "type", None) not in TEXT_ELEMENTS]


def _pieces(secret: str) -> set[str]:
    return {secret[i:i + PIECE_CHARS] for i in range(len(secret) - PIECE_CHARS + 1)}


@pytest.mark.parametrize(("key", "query"), VISITS,
                         ids=[f"{key}-{'-'.join(q.values()) or 'default'}" for key, q in VISITS])
def test_outside_text_shows_redacted_and_literal_on_every_page(
        key: str, query: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        outside_url: str) -> None:
    app = open_page(monkeypatch, outside_url, page(key), query)
    shown_all = everything(app)
    assert not {piece for piece in _pieces(SENTINEL) if piece in shown_all}
    for message in markdown_messages(app):
        assert UNESCAPED_MARKUP.search(message) is None, message
    for figure in figures(app):
        for text in _strings(figure):
            assert "<img" not in text.lower() and "<a " not in text.lower(), text
    readable = texts(app) + "".join(frame.value.to_csv() for frame in app.dataframe) + \
        "".join(html.unescape(t) for figure in figures(app) for t in _strings(figure))
    assert f"![x]({IMAGE_URL})" in readable and MARK in readable


def test_failed_run_reason_reads_literally_with_the_key_hidden(
        monkeypatch: pytest.MonkeyPatch, outside_url: str) -> None:
    app = open_page(monkeypatch, outside_url, page("run"), {"run": "5"})
    reason = app.error[0].value
    assert reason.startswith("Failed: failed\\: \\!\\[x\\]\\(\u2060http")  # escaped for Markdown
    assert shown(reason) == (f'Failed: failed: ![x]({IMAGE_URL}) <img src="{IMAGE_URL}"> '
                             f"[link](http://127.0.0.1:9/phish) :material/warning: $x^2$ key "
                             f"{MARK}")
    assert INJECTED_CONFIG in shown(app.subheader[0].value)


def test_config_named_with_markup_is_offered_as_a_plain_option(
        monkeypatch: pytest.MonkeyPatch, outside_url: str) -> None:
    app = open_page(monkeypatch, outside_url, page("configs"))
    name = f"unreachable {named_markup(IMAGE_URL)}"
    assert name in app.selectbox(key="config_name").options  # selectbox options are plain text
    app.selectbox(key="config_name").set_value(name).run()
    assert not app.exception
    assert app.query_params["config"] == name
    (version,) = app.dataframe[0].value["version"]
    assert shown(app.expander[-1].label) == f"Current body ({version})"
    for message in markdown_messages(app):
        assert UNESCAPED_MARKUP.search(message) is None, message


def test_markdown_escape_leaves_no_link_image_html_directive_or_formula() -> None:
    raw = "![x](http://e/x.png) <b>[y](javascript:z)</b> *z* :red[r] :material/home: $x$ &lt;"
    escaped = md_text(raw)
    for markup in ("![", "](", "<b>", "*z*", ":red[", ":material/", "$x$", "&lt;"):
        assert markup not in escaped
    assert shown(escaped) == raw
    linked = md_text("see https://e.com/x, www.e.com or ops@e.com")
    assert linked == "see \u2060https\\:\\/\\/e\\.com\\/x\\, \u2060www\\.e\\.com or ops\u2060\\@e\\.com"
    assert md_text("line one\nline two\r\n# heading") == "line one line two \\# heading"
    assert md_text(f"key {SENTINEL}") == "key \\[redacted\\]"


def test_redacted_table_hides_keys_in_cells_and_keeps_numbers() -> None:
    frame = pd.DataFrame({"error": [f"401 {SENTINEL}", None], "ttft_s": [0.1, 0.2],
                          "body": [{"k": SENTINEL}, ["x", SENTINEL]]})
    shown_frame = redact_frame(frame)
    assert json.dumps(shown_frame.astype(str).values.tolist()).count(SENTINEL) == 0
    assert shown_frame["error"].iloc[0] == f"401 {MARK}" and pd.isna(shown_frame["error"].iloc[1])
    assert shown_frame["ttft_s"].tolist() == [0.1, 0.2]
    assert frame["error"].iloc[0] == f"401 {SENTINEL}"  # the input is left alone
