"""`tracker dashboard`: start the Streamlit app on 127.0.0.1 with the chosen database.

The database URL reaches the app through ``$TRACKER_DB_URL`` in the app's environment (never on
its command line, where ``ps`` would show a password). The process replaces itself with
Streamlit, so Ctrl-C and SIGTERM reach the server directly.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

from tracker.errors import ConfigError, UsageError
from tracker.store.db import DB_URL_ENV, redact_url

APP_PATH = Path(__file__).resolve().parent.parent.parent / "dashboard" / "app.py"
HOST = "127.0.0.1"
DEFAULT_PORT = 8501


def build_command(url: str, port: int, app: Path = APP_PATH) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that serve the app on ``HOST:port`` over database ``url``."""
    if not 1 <= port <= 65535:
        raise UsageError(f"--port: must be between 1 and 65535 (got {port})")
    if not app.is_file():
        raise ConfigError(f"{app}: the dashboard app is missing; run the dashboard from a "
                          "checkout installed with `pip install -e .`")
    argv = [sys.executable, "-m", "streamlit", "run", str(app),
            "--server.headless", "true",
            "--server.address", HOST,
            "--server.port", str(port),
            "--server.fileWatcherType", "none",
            "--browser.gatherUsageStats", "false",
            "--browser.serverAddress", HOST,
            "--global.developmentMode", "false",
            "--client.toolbarMode", "viewer",
            "--client.showErrorDetails", "type"]  # a bug shows its type, never a traceback
    env = dict(os.environ)
    env[DB_URL_ENV] = url
    return argv, env


def run_dashboard(url: str, port: int) -> NoReturn:
    """Serve until interrupted: this process becomes the Streamlit server."""
    argv, env = build_command(url, port)
    print(f"dashboard on http://{HOST}:{port} over {redact_url(url)} (Ctrl-C stops)", flush=True)
    os.execve(sys.executable, argv, env)
