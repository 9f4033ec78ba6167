"""Streamlit building blocks shared by the pages.

Text that comes from the store (config, suite and workload names, error messages, reasons) is
user-supplied: it goes into st.text, st.code, st.json or a dataframe, or through ``md_escape``
into markdown. Nothing is ever rendered with ``unsafe_allow_html``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import streamlit as st

from tracker.dashboard import data
from tracker.dashboard.pages import page
from tracker.errors import StoreError
from tracker.store.db import redact_url, resolve_db_url

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$])")
BadgeColor = Literal["green", "orange", "red", "blue", "gray"]
STATUS_COLORS: dict[str, BadgeColor] = {"completed": "green", "partial": "orange", "failed": "red",
                                        "running": "blue"}
SIMULATED_NOTE = ("Simulated: measured against the tracker's built-in simulator, not a real "
                  "server. Its numbers show the tracker works, not how a model performs.")


def md_escape(text: object) -> str:
    """``text`` made inert for Streamlit markdown (no links, images, emphasis or HTML)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def database_url() -> str:
    try:
        return resolve_db_url(None)
    except StoreError as exc:
        st.error(str(exc))
        st.stop()


def page_start(title: str, caption: str) -> str:
    """The page title and the database URL; stops the page with a hint when nothing can be read."""
    st.title(title)
    st.caption(caption)
    url = database_url()
    state = data.load_database_state(url)
    if not state.ready:
        if state.empty:
            st.info(state.message or "", icon=":material/info:")
        else:
            st.error(state.message or "", icon=":material/error:")
        st.stop()
    return url


def sidebar(url: str) -> None:
    with st.sidebar:
        st.caption("Database")
        st.code(redact_url(url), language=None, wrap_lines=True)
        if st.button("Reload data", icon=":material/refresh:", width="stretch"):
            data.clear_caches()
            st.rerun()
        st.caption(f"Queries are cached for {data.CACHE_TTL_S} s.")


def status_badges(status: str, simulated: bool) -> None:
    """The run's status as a coloured badge, and a violet one when it was simulated."""
    color = STATUS_COLORS.get(status, "gray")
    st.badge(md_escape(status), color=color)
    if simulated:
        st.badge("simulated", icon=":material/science:", color="violet")


def show_status(status: str, reason: str | None, simulated: bool) -> None:
    """The run's status, its reason when partial or failed, and the simulated marker."""
    if status == "failed":
        st.error(f"Failed: {reason or 'no reason recorded'}", icon=":material/error:")
    elif status == "partial":
        st.warning(f"Partial: {reason or 'no reason recorded'}", icon=":material/warning:")
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
        st.warning(f"Ignored the query parameter {name}={md_escape(value)}: not a run id.")
        return None


def run_link(run_id: int, label: str | None = None) -> None:
    st.page_link(page("run").path, label=label or f"Open run #{run_id}",
                 icon=":material/receipt_long:", query_params={"run": str(run_id)})


def compare_link(base_id: int, head_id: int, label: str | None = None) -> None:
    st.page_link(page("compare").path, label=label or f"Compare #{base_id} with #{head_id}",
                 icon=":material/compare_arrows:",
                 query_params={"base": str(base_id), "head": str(head_id)})


def dataframe(frame: Any, **kwargs: Any) -> None:
    st.dataframe(frame, hide_index=True, width="stretch", **kwargs)
