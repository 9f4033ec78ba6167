"""Who may see the dashboard: `tracker dashboard --host` refuses a team address without a sign-in,
the app gates every page on the sign-in, and triage records who did it."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.dashboard.apptest import open_page, shown, start_app, texts
from tests.dashboard.conftest import Populated
from tracker.cli.main import main
from tracker.dashboard.access import (
    AUTH_ENV,
    USER_HEADER_ENV,
    AuthMode,
    choose_auth_mode,
    compute_viewer,
    secrets_files,
)
from tracker.dashboard.launch import APP_PATH, build_command
from tracker.dashboard.pages import page
from tracker.errors import ConfigError, UsageError
from tracker.store.db import open_store
from tracker.store.regressions import fetch_regression

ROOT = Path(__file__).resolve().parents[2]
URL = "sqlite:///x.db"
OIDC = """\
[auth]
redirect_uri = "https://tracker.example.com/oauth2callback"
cookie_secret = "cookie-secret-value-0123456789"
client_id = "tracker-dashboard"
client_secret = "client-secret-value-abcdef"
server_metadata_url = "https://idp.example.com/.well-known/openid-configuration"
"""


def _secrets(directory: Path, text: str) -> Path:
    path = directory / ".streamlit" / "secrets.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _joined(argv: list[str]) -> str:
    return " ".join(argv)


def test_shipped_streamlit_config_serves_on_localhost_only() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"] == {"address": "127.0.0.1", "headless": True}
    assert config["browser"]["gatherUsageStats"] is False


def test_launch_refuses_a_team_host_without_a_sign_in() -> None:
    with pytest.raises(UsageError) as raised:
        build_command(URL, 8501, host="0.0.0.0", secrets=[])
    message = str(raised.value)
    assert message.startswith("--host 0.0.0.0: serving the dashboard beyond this machine needs "
                              "a sign-in, and none is configured")
    assert "[auth] section" in message and "--trust-proxy-auth" in message
    assert "\n" not in message


def test_cli_dashboard_refuses_a_team_host_in_one_line_with_both_fixes(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.streamlit/secrets.toml
    monkeypatch.chdir(tmp_path)  # nor ./.streamlit/secrets.toml
    assert main(["dashboard", "--host", "192.0.2.7", "--db", URL]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --host 192.0.2.7: ")
    assert ".streamlit/secrets.toml" in err and "--trust-proxy-auth" in err


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_launch_serves_a_loopback_host_without_a_sign_in(host: str) -> None:
    argv, env = build_command(URL, 8501, host=host, secrets=[])
    assert f"--server.address {host}" in _joined(argv)
    assert env[AUTH_ENV] == "local" and USER_HEADER_ENV not in env


def test_launch_serves_a_team_host_with_streamlit_login_configured(tmp_path: Path) -> None:
    secrets = _secrets(tmp_path, OIDC)
    argv, env = build_command(URL, 8501, host="0.0.0.0", secrets=[secrets], authlib=True)
    joined = _joined(argv)
    assert "--server.address 0.0.0.0" in joined and "--browser.serverAddress" not in joined
    assert env[AUTH_ENV] == "oidc"
    assert "secret-value" not in joined  # the secrets stay in the file


def test_launch_names_missing_login_keys_without_showing_any_value(tmp_path: Path) -> None:
    secrets = _secrets(tmp_path, OIDC.replace('client_secret = "client-secret-value-abcdef"\n',
                                              "").replace("client_id", "#client_id"))
    with pytest.raises(ConfigError) as raised:
        build_command(URL, 8501, host="0.0.0.0", secrets=[secrets], authlib=True)
    message = str(raised.value)
    assert message.startswith(f"{secrets}: auth: missing client_id, client_secret (values hidden)")
    assert "secret-value" not in message


def test_launch_refuses_a_login_that_cannot_work(tmp_path: Path) -> None:
    secrets = _secrets(tmp_path, OIDC)
    with pytest.raises(ConfigError, match="needs the Authlib package: pip install"):
        build_command(URL, 8501, host="0.0.0.0", secrets=[secrets], authlib=False)
    _secrets(tmp_path, OIDC.replace("/oauth2callback", "/callback"))
    with pytest.raises(ConfigError, match=r"auth\.redirect_uri: must end with /oauth2callback"):
        build_command(URL, 8501, host="0.0.0.0", secrets=[secrets], authlib=True)
    _secrets(tmp_path, "[auth\n")
    with pytest.raises(ConfigError, match="cannot read it as TOML"):
        build_command(URL, 8501, secrets=[secrets], authlib=True)


def test_the_last_secrets_file_with_an_auth_section_decides(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    files = secrets_files(APP_PATH, cwd, home)
    assert files == [home / ".streamlit/secrets.toml", cwd / ".streamlit/secrets.toml",
                     APP_PATH.parent / ".streamlit/secrets.toml"]
    _secrets(home, OIDC)
    assert choose_auth_mode("0.0.0.0", False, files, authlib=True) is AuthMode.OIDC
    _secrets(cwd, "[auth]\nredirect_uri = 'https://x/oauth2callback'\n")  # replaces home's
    with pytest.raises(ConfigError, match="missing cookie_secret, client_id"):
        choose_auth_mode("0.0.0.0", False, files, authlib=True)


def test_launch_behind_a_trusted_proxy_names_the_user_header() -> None:
    _, env = build_command(URL, 8501, host="0.0.0.0", trust_proxy_auth=True, secrets=[])
    assert (env[AUTH_ENV], env[USER_HEADER_ENV]) == ("proxy", "X-Forwarded-User")
    _, env = build_command(URL, 8501, trust_proxy_auth=True, user_header="X-Forwarded-Email",
                           secrets=[])
    assert env[USER_HEADER_ENV] == "X-Forwarded-Email"
    with pytest.raises(UsageError, match="--user-header: must be an HTTP header name"):
        build_command(URL, 8501, trust_proxy_auth=True, user_header="X User: a", secrets=[])
    with pytest.raises(UsageError, match="--user-header: only with --trust-proxy-auth"):
        build_command(URL, 8501, user_header="X-Forwarded-Email", secrets=[])
    with pytest.raises(UsageError, match="--host: must be an address or a name"):
        build_command(URL, 8501, host="", secrets=[])


def test_viewer_is_the_os_user_the_signed_in_claim_or_the_single_proxy_header() -> None:
    assert compute_viewer(AuthMode.LOCAL, {"email": "ignored"}, [], "ana") == "local:ana"
    signed_in = {"is_logged_in": True, "name": "Bo", "email": "bo@example.com"}
    assert compute_viewer(AuthMode.OIDC, signed_in, [], "ana") == "bo@example.com"
    assert compute_viewer(AuthMode.OIDC, {"is_logged_in": True, "sub": "42"}, [], "ana") == "42"
    assert compute_viewer(AuthMode.OIDC, {"email": "bo@example.com"}, [], "ana") is None
    assert compute_viewer(AuthMode.PROXY, {}, [" cy@example.com "], "ana") == "cy@example.com"
    assert compute_viewer(AuthMode.PROXY, {}, ["cy", "mallory"], "ana") is None  # appended
    assert compute_viewer(AuthMode.PROXY, {}, [], "ana") is None
    assert compute_viewer(AuthMode.PROXY, {}, ["x" * 300], "ana") == "x" * 200


def test_signed_out_viewer_sees_only_the_sign_in(monkeypatch: pytest.MonkeyPatch,
                                                 populated: Populated) -> None:
    app = start_app(monkeypatch, populated.url, {"is_logged_in": False}, AuthMode.OIDC)
    app.run()
    assert not app.exception
    assert [b.label for b in app.button] == ["Sign in"]
    assert "Sign in to see the dashboard." in shown(app.info[0].value)
    assert not app.dataframe and not app.get("plotly_chart") and not app.metric
    assert "fast-sim" not in texts(app)


def test_signed_in_viewer_triages_as_their_email(monkeypatch: pytest.MonkeyPatch,
                                                 populated: Populated, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    shutil.copy(populated.url.removeprefix("sqlite:///"), copy)
    user = {"is_logged_in": True, "email": "dee@example.com", "name": "Dee"}
    app = open_page(monkeypatch, f"sqlite:///{copy}", page("regressions"), user=user,
                    mode=AuthMode.OIDC)
    assert "dee@example.com" in [t.value for t in app.sidebar.text]
    assert "Sign out" in [b.label for b in app.sidebar.button]
    app.radio(key="triage_status").set_value("acknowledged")
    next(b for b in app.button if b.label == "Save").click().run()
    assert not app.exception
    assert "last triaged by dee@example.com at " in texts(app)
    engine = open_store(f"sqlite:///{copy}")
    try:
        with Session(engine) as session:
            assert fetch_regression(session, 1).updated_by == "dee@example.com"
    finally:
        engine.dispose()


def test_proxy_mode_refuses_a_request_without_the_user_header(
        monkeypatch: pytest.MonkeyPatch, populated: Populated) -> None:
    app = start_app(monkeypatch, populated.url, mode=AuthMode.PROXY)
    app.run()  # AppTest sends no headers: as if someone reached the port around the proxy
    assert not app.exception
    assert shown(app.error[0].value).startswith(
        "Refused: the request carries no single X-Forwarded-User header.")
    assert not app.dataframe and not app.metric


def test_an_unknown_auth_mode_shows_nothing(monkeypatch: pytest.MonkeyPatch,
                                            populated: Populated) -> None:
    app = start_app(monkeypatch, populated.url)
    monkeypatch.setenv(AUTH_ENV, "none")
    app.run()
    assert not app.exception
    assert shown(app.error[0].value).startswith(f"Refused: {AUTH_ENV}=none is not one of local")
    assert not app.dataframe and not app.metric
