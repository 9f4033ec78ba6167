"""The session's viewer: the sign-in gate every page passes, and the name a triage records.

The rules live in ``access``. This module reads the session (``st.user``, the proxy's header in
``st.context.headers``, the OS user) and stops the page when nobody may look.
"""

from __future__ import annotations

import getpass
import os

import streamlit as st

from tracker.dashboard import ui
from tracker.dashboard.access import (
    AUTH_ENV,
    DEFAULT_USER_HEADER,
    USER_HEADER_ENV,
    AuthMode,
    compute_viewer,
)


def auth_mode() -> AuthMode | None:
    """The mode `tracker dashboard` chose, else OIDC when secrets configure it, else local,
    or None when ``$TRACKER_DASHBOARD_AUTH`` holds something else."""
    configured = os.environ.get(AUTH_ENV)
    if configured:
        try:
            return AuthMode(configured)
        except ValueError:
            return None
    return AuthMode.OIDC if _has_auth_secrets() else AuthMode.LOCAL


def _has_auth_secrets() -> bool:
    return st.secrets.load_if_toml_exists() and "auth" in st.secrets


def user_header() -> str:
    return os.environ.get(USER_HEADER_ENV) or DEFAULT_USER_HEADER


def local_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no user name for this uid (a bare container)
        return f"uid {os.getuid()}"


def current_viewer() -> str | None:
    """Who is looking, as a triage records it, or None when nobody may look."""
    mode = auth_mode()
    if mode is None:
        return None
    values = st.context.headers.get_all(user_header()) if mode is AuthMode.PROXY else []
    return compute_viewer(mode, st.user.to_dict(), values, local_user())


def require_viewer() -> str:
    """The viewer. Otherwise the page shows the sign-in (or why it refuses) and stops."""
    viewer = current_viewer()
    if viewer is not None:
        return viewer
    mode = auth_mode()
    st.title("tracker")
    if mode is AuthMode.OIDC:
        st.info("Sign in to see the dashboard.", icon=":material/lock:")
        st.button("Sign in", on_click=st.login, type="primary")
    elif mode is AuthMode.PROXY:
        st.error(f"Refused: the request carries no single {ui.md_text(user_header())} header. "
                 "This dashboard trusts a reverse proxy to sign users in and name them in that "
                 "header; open it through the proxy.", icon=":material/block:")
    else:
        st.error(f"Refused: {AUTH_ENV}={ui.md_text(os.environ.get(AUTH_ENV, ''))} is not one of "
                 f"{', '.join(m.value for m in AuthMode)}; start the dashboard with "
                 "tracker dashboard.", icon=":material/block:")
    st.stop()


def show_viewer(viewer: str) -> None:
    """In the sidebar: who triage changes are recorded as, and the sign-out when signed in."""
    st.caption("Triage is recorded as")
    st.text(ui.plain_text(viewer))
    if auth_mode() is AuthMode.OIDC:
        st.button("Sign out", on_click=st.logout, icon=":material/logout:")
