"""Streamlit building blocks shared by the pages, and the one way outside text is shown.

Outside text is everything that came from a server, a user or the database: status reasons,
request errors, notes, attributions, names, config values, environment entries. A database
written by an older tracker may hold it raw, so every page shows it through this module:
redacted with ``tracker.redaction.redact_text``, then as text:

- ``md_text`` for Markdown elements (st.error, st.caption, subheaders, labels, radio options):
  every Markdown and HTML character backslash-escaped, so ``![x](…)``, ``<img …>``, ``[link](…)``,
  ``:material/…:`` and ``$x$`` show literally, and a word joiner before bare URLs and ``@``
  (which GFM turns into links whatever the escapes).
- ``plain_text`` for text elements and widget values (st.text, st.code, selectbox options).
- ``dataframe`` and ``show_json``, which redact every cell and value.

Nothing is ever rendered with ``unsafe_allow_html``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import pandas as pd
import streamlit as st

from tracker.dashboard import data
from tracker.dashboard.pages import page
from tracker.errors import StoreError
from tracker.redaction import redact_data, redact_text
from tracker.store.db import redact_url, resolve_db_url

_MARKDOWN_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
# GFM links bare URLs and e-mail addresses whatever the escapes; an invisible word joiner before
# each makes them plain text.
_AUTOLINK = re.compile(r"(?=https?:|www\.|@)", re.IGNORECASE)
WORD_JOINER = "\u2060"
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029]+")
BadgeColor = Literal["green", "orange", "red", "blue", "gray"]
STATUS_COLORS: dict[str, BadgeColor] = {"completed": "green", "partial": "orange", "failed": "red",
                                        "running": "blue"}
SIMULATED_NOTE = ("Simulated: measured against the tracker's built-in simulator, not a real "
                  "server. Its numbers show the tracker works, not how a model performs.")


def plain_text(value: object) -> str:
    """Outside text for a text element or a widget's value or option: redacted."""
    return redact_text(str(value))


def md_text(value: object) -> str:
    """Outside text for a Markdown element: redacted, on one line, shown literally (bare URLs
    and addresses not linked)."""
    text = _AUTOLINK.sub(WORD_JOINER, _LINE_BREAKS.sub(" ", plain_text(value)))
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def show_text(value: object) -> None:
    st.text(plain_text(value))


def show_json(value: Any) -> None:
    st.json(redact_data(value))


def redact_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy with every text cell redacted (numbers are left alone, and the column names are the
    pages' own)."""
    shown = frame.copy()
    for index, dtype in enumerate(shown.dtypes):
        if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype):
            shown.isetitem(index, shown.iloc[:, index].map(_redact_cell).to_numpy())
    return shown


def _redact_cell(value: Any) -> Any:
    return redact_data(value) if isinstance(value, str | list | tuple | dict) else value


EMPTY_CELL = "—"  # what a table shows for a value not measured or not judged (None, NaN)


def dataframe(frame: pd.DataFrame, **kwargs: Any) -> Any:
    """The frame as a table (cells render as text), redacted, a missing value shown as
    ``EMPTY_CELL`` rather than "None". The selection event is returned."""
    kwargs.setdefault("placeholder", EMPTY_CELL)
    return st.dataframe(redact_frame(frame), hide_index=True, width="stretch", **kwargs)


def database_url() -> str:
    try:
        return resolve_db_url(None)
    except StoreError as exc:
        st.error(md_text(exc))
        st.stop()


def page_start(title: str, caption: str) -> str:
    """Show the page title and the database URL, and stop the page with a hint when nothing can
    be read."""
    st.title(title)
    st.caption(caption)
    url = database_url()
    state = data.load_database_state(url)
    if not state.ready:
        if state.empty:
            st.info(md_text(state.message or ""), icon=":material/info:")
        else:
            st.error(md_text(state.message or ""), icon=":material/error:")
        st.stop()
    return url


def sidebar(url: str) -> None:
    with st.sidebar:
        st.caption("Database")
        st.code(plain_text(redact_url(url)), language=None, wrap_lines=True)
        if st.button("Reload data", icon=":material/refresh:", width="stretch"):
            data.clear_caches()
            st.rerun()
        st.caption(f"Queries are cached for {data.CACHE_TTL_S} s.")


def status_badges(status: str, simulated: bool) -> None:
    """The run's status as a coloured badge, and a violet one when it was simulated."""
    color = STATUS_COLORS.get(status, "gray")
    st.badge(md_text(status), color=color)
    if simulated:
        st.badge("simulated", icon=":material/science:", color="violet")


def show_status(status: str, reason: str | None, simulated: bool) -> None:
    """The run's status, its reason when partial or failed, and the simulated marker."""
    if status == "failed":
        st.error(f"Failed: {md_text(reason or 'no reason recorded')}", icon=":material/error:")
    elif status == "partial":
        st.warning(f"Partial: {md_text(reason or 'no reason recorded')}",
                   icon=":material/warning:")
    elif status == "running":
        st.info("Still running (or the tracker stopped before recording the end).")
    if simulated:
        st.warning(SIMULATED_NOTE, icon=":material/science:")


def query_int(name: str) -> int | None:
    """An integer query parameter, or None when it is absent or not a number."""
    value = st.query_params.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        st.warning(f"Ignored the query parameter {name}={md_text(value)}: not a run id.")
        return None


def run_link(run_id: int, label: str | None = None) -> None:
    st.page_link(page("run").path, label=label or f"Open run #{run_id}",
                 icon=":material/receipt_long:", query_params={"run": str(run_id)})


def compare_link(base_id: int, head_id: int, label: str | None = None) -> None:
    st.page_link(page("compare").path, label=label or f"Compare #{base_id} with #{head_id}",
                 icon=":material/compare_arrows:",
                 query_params={"base": str(base_id), "head": str(head_id)})
