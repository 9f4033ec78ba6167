"""`tracker dashboard`: start the Streamlit app with the chosen database, on 127.0.0.1 unless told.

The database URL reaches the app through ``$TRACKER_DB_URL`` in the app's environment (never on
its command line, where ``ps`` would show a password), and the sign-in mode (``access``) through
``$TRACKER_DASHBOARD_AUTH``. Any host but a loopback one needs a sign-in: Streamlit's OIDC login
configured in ``.streamlit/secrets.toml``, or ``--trust-proxy-auth``. The process replaces itself
with Streamlit, so Ctrl-C and SIGTERM reach the server directly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import NoReturn

from tracker.dashboard.access import (
    AUTH_ENV,
    DEFAULT_USER_HEADER,
    USER_HEADER_ENV,
    AuthMode,
    authlib_ready,
    check_user_header,
    choose_auth_mode,
    secrets_files,
)
from tracker.errors import ConfigError, UsageError
from tracker.redaction import say
from tracker.store.db import DB_URL_ENV, redact_url

APP_PATH = Path(str(resources.files("tracker._dashboard_app"))) / "app.py"  # package data
HOST = "127.0.0.1"
DEFAULT_PORT = 8501
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::"})  # every interface: no one address to show
SIGN_IN = {AuthMode.LOCAL: "none (loopback only; triage recorded as the OS user)",
           AuthMode.OIDC: "Streamlit's OIDC login", AuthMode.PROXY: "the reverse proxy's "}


def build_command(url: str, port: int, app: Path = APP_PATH, *, host: str = HOST,
                  trust_proxy_auth: bool = False, user_header: str | None = None,
                  secrets: Sequence[Path] | None = None,
                  authlib: bool | None = None) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that serve the app on ``host:port`` over database ``url``.

    ``user_header`` is the header a trusted proxy names the user in (default X-Forwarded-User).
    ``secrets`` are the secrets.toml files Streamlit will read (default: where it looks from
    here). ``authlib`` says whether Authlib is installed (default: look).
    """
    if user_header is not None and not trust_proxy_auth:
        raise UsageError("--user-header: only with --trust-proxy-auth (it names the header "
                         "a trusted reverse proxy sets)")
    if not 1 <= port <= 65535:
        raise UsageError(f"--port: must be between 1 and 65535 (got {port})")
    if not host.strip() or host != host.strip():
        raise UsageError(f"--host: must be an address or a name, e.g. {HOST} or 0.0.0.0 "
                         f"(got {host!r})")
    if not app.is_file():
        raise ConfigError(f"{app}: the dashboard app is missing; run the dashboard from a "
                          "checkout installed with `pip install -e .`")
    files = secrets_files(app, Path.cwd(), Path.home()) if secrets is None else secrets
    mode = choose_auth_mode(host, trust_proxy_auth, files,
                            authlib=authlib_ready() if authlib is None else authlib)
    argv = [sys.executable, "-m", "streamlit", "run", str(app),
            "--server.headless", "true",
            "--server.address", host,
            "--server.port", str(port),
            "--server.fileWatcherType", "none",
            "--browser.gatherUsageStats", "false",
            *([] if host in WILDCARD_HOSTS else ["--browser.serverAddress", host]),
            "--global.developmentMode", "false",
            "--client.toolbarMode", "viewer",
            "--client.showErrorDetails", "type"]  # a bug shows its type, never a traceback
    env = dict(os.environ)
    env[DB_URL_ENV] = url
    env[AUTH_ENV] = mode.value
    env.pop(USER_HEADER_ENV, None)
    if mode is AuthMode.PROXY:
        env[USER_HEADER_ENV] = check_user_header(user_header or DEFAULT_USER_HEADER)
    return argv, env


def run_dashboard(url: str, port: int, *, host: str = HOST, trust_proxy_auth: bool = False,
                  user_header: str | None = None) -> NoReturn:
    """Serve until interrupted: this process becomes the Streamlit server."""
    argv, env = build_command(url, port, host=host, trust_proxy_auth=trust_proxy_auth,
                              user_header=user_header)
    mode = AuthMode(env[AUTH_ENV])
    header = env.get(USER_HEADER_ENV, "")
    sign_in = SIGN_IN[mode] + (f"{header} header" if mode is AuthMode.PROXY else "")
    shown = f"[{host}]" if ":" in host else host
    say(f"dashboard on http://{shown}:{port} over {redact_url(url)}; sign-in: {sign_in} "
        "(Ctrl-C stops)")
    os.execve(sys.executable, argv, env)
