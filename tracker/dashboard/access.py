"""Who may see the dashboard, and who a triage change is recorded as.

On a loopback address the dashboard needs no sign-in: whoever reaches it is on this machine, and
a triage is recorded as the OS user (``local:<user>``). Served on any other address, `tracker
dashboard` refuses to start unless a sign-in is configured:

- Streamlit's OIDC login (``st.login``): an ``[auth]`` section with ``redirect_uri``,
  ``cookie_secret``, ``client_id``, ``client_secret`` and ``server_metadata_url`` in a
  ``secrets.toml`` that Streamlit reads (``~/.streamlit/``, ``./.streamlit/`` or
  ``dashboard/.streamlit/``, the later winning). Every page then asks to sign in first, and a
  triage is recorded as the signed-in email (or name).
- ``--trust-proxy-auth``: the operator says a reverse proxy in front authenticates every request
  and names the user in one header (``X-Forwarded-User`` unless ``--user-header`` names another,
  e.g. ``X-Forwarded-Email``), replacing any such header a client sent. A request without
  exactly one value of that header is refused (a comma-separated list such as ``alice, mallory``
  is several: a proxy that appends instead of replacing). A triage is recorded as that value.

The launcher hands the mode to the app in ``$TRACKER_DASHBOARD_AUTH`` (and the header in
``$TRACKER_DASHBOARD_USER_HEADER``). Started by plain ``streamlit run``, the app uses OIDC when an
``[auth]`` section exists and loopback otherwise.
Pure: no Streamlit here (``viewer`` reads the session).
"""

from __future__ import annotations

import importlib.metadata
import ipaddress
import re
import tomllib
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from tracker.errors import ConfigError, UsageError
from tracker.redaction import redact_one_line

AUTH_ENV = "TRACKER_DASHBOARD_AUTH"
USER_HEADER_ENV = "TRACKER_DASHBOARD_USER_HEADER"
DEFAULT_USER_HEADER = "X-Forwarded-User"
OIDC_KEYS = ("redirect_uri", "cookie_secret", "client_id", "client_secret", "server_metadata_url")
AUTHLIB_MIN = (1, 3, 2)  # what Streamlit's login needs
_HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")
OIDC_CLAIMS = ("email", "name", "preferred_username", "sub")
VIEWER_CHARS = 200  # regressions.updated_by is String(200)


class AuthMode(StrEnum):
    LOCAL = "local"  # loopback only; the OS user
    OIDC = "oidc"  # Streamlit's login
    PROXY = "proxy"  # a reverse proxy authenticates and names the user in a header


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def secrets_files(app: Path, cwd: Path, home: Path) -> list[Path]:
    """Where Streamlit reads ``secrets.toml`` for ``streamlit run app`` from ``cwd``, in order."""
    found: list[Path] = []
    for folder in (home, cwd, app.resolve().parent):
        path = folder / ".streamlit" / "secrets.toml"
        if path not in found:
            found.append(path)
    return found


def _auth_section(files: Sequence[Path]) -> tuple[Path, Any] | None:
    """The ``[auth]`` Streamlit will use: the last file's that has one (files replace keys)."""
    found: tuple[Path, Any] | None = None
    for path in files:
        if not path.is_file():
            continue
        try:
            parsed = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read it as TOML ({redact_one_line(str(exc))}); "
                              "fix it or move it away") from None
        if "auth" in parsed:
            found = (path, parsed["auth"])
    return found


def find_oidc(files: Sequence[Path]) -> Path | None:
    """The secrets file that configures Streamlit's login, or None when none does. An
    ``[auth]`` section that lacks a key is an error (its values are never shown)."""
    found = _auth_section(files)
    if found is None:
        return None
    path, auth = found
    if not isinstance(auth, Mapping):
        raise ConfigError(f"{path}: auth: must be a table ([auth] with {', '.join(OIDC_KEYS)})")
    missing = [key for key in OIDC_KEYS
               if not isinstance(auth.get(key), str) or not auth[key].strip()]
    if missing:
        raise ConfigError(f"{path}: auth: missing {', '.join(missing)} (values hidden); "
                          f"Streamlit's login needs all of {', '.join(OIDC_KEYS)}")
    if not auth["redirect_uri"].endswith("/oauth2callback"):
        raise ConfigError(f"{path}: auth.redirect_uri: must end with /oauth2callback (got "
                          f"{redact_one_line(auth['redirect_uri'])!r}), e.g. "
                          "https://tracker.example.com/oauth2callback")
    return path


def authlib_ready() -> bool:
    """Whether the Authlib package Streamlit's login needs is installed (>= 1.3.2)."""
    try:
        version = importlib.metadata.version("Authlib")
    except importlib.metadata.PackageNotFoundError:
        return False
    parts = tuple(int(part) for part in re.findall(r"\d+", version)[:3])
    return parts >= AUTHLIB_MIN


def choose_auth_mode(host: str, trust_proxy_auth: bool, files: Sequence[Path],
                     *, authlib: bool) -> AuthMode:
    """The sign-in to serve ``host`` with. A non-loopback host without one is refused."""
    if trust_proxy_auth:
        return AuthMode.PROXY
    oidc = find_oidc(files)
    if oidc is not None:
        if not authlib:
            raise ConfigError(f"{oidc}: [auth] configures Streamlit's login, which needs the "
                              "Authlib package: pip install 'Authlib>=1.3.2'")
        return AuthMode.OIDC
    if is_loopback(host):
        return AuthMode.LOCAL
    raise UsageError(
        f"--host {host}: serving the dashboard beyond this machine needs a sign-in, and none "
        "is configured; configure Streamlit's login with an [auth] section "
        f"({', '.join(OIDC_KEYS)}) in .streamlit/secrets.toml, or serve it behind a reverse "
        "proxy that authenticates and pass --trust-proxy-auth")


def check_user_header(name: str) -> str:
    if _HEADER_NAME.fullmatch(name) is None:
        raise UsageError(f"--user-header: must be an HTTP header name such as "
                         f"{DEFAULT_USER_HEADER} (got {redact_one_line(name)!r})")
    return name


def compute_viewer(mode: AuthMode, claims: Mapping[str, Any], user_values: Sequence[str],
                   os_user: str) -> str | None:
    """Who is looking, as recorded on a triage, or None when the mode cannot say (the page then
    refuses). ``claims`` is st.user, and ``user_values`` is every value of the proxy's user
    header."""
    if mode is AuthMode.LOCAL:
        return _clean(f"local:{os_user}")
    if mode is AuthMode.OIDC:
        if claims.get("is_logged_in") is not True:
            return None
        named = (claims.get(claim) for claim in OIDC_CLAIMS)
        return _clean(next((str(value) for value in named if value), "oidc:signed-in"))
    values = [value.strip() for value in user_values if value.strip()]
    if len(values) != 1 or "," in values[0]:  # twice, or "alice, mallory": appended, not replaced
        return None
    return _clean(values[0])


def _clean(name: str) -> str:
    return redact_one_line(name, VIEWER_CHARS)
