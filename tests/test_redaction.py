"""The one redaction: what it hides (registered secrets whole and in pieces, secret-named
environment variables whole, token shapes, credentials after their words), what it leaves alone
(the tracker's own words, numbers, short values, ordinary words), and its exits: every printed
line (``say``), every log line (``RedactingFormatter``) and a real command's stdout and stderr."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest

from tracker.redaction import (
    MARK,
    RedactingFormatter,
    escape_markdown,
    forget_secrets,
    redact_data,
    redact_text,
    refresh_environment,
    register_secret,
    register_url_credentials,
    say,
)

KEY = "qz7Rw2Lk9Xv4Tn8Hb3Mc"  # no known token shape: hidden only because it is registered


@pytest.fixture(autouse=True)
def known_key() -> None:
    register_secret(KEY)


@pytest.mark.parametrize("text", [
    f"Incorrect API key provided: {KEY}",
    f"you sent 'Bearer {KEY}'",
    f"masked: {KEY[:6]}****{KEY[-6:]}",
    f"the tail {KEY[-7:]} did not match",
    f"encoded {quote('/' + KEY, safe='')}",
    f"{KEY[3:15]} in the middle",
])
def test_a_registered_key_is_hidden_whole_and_in_every_piece_of_six(text: str) -> None:
    hidden = redact_text(text)
    assert MARK in hidden
    assert not any(KEY[i:i + 6] in hidden for i in range(len(KEY) - 5))


def test_a_piece_shorter_than_six_characters_is_left() -> None:
    assert redact_text(f"ends in {KEY[-5:]}") == f"ends in {KEY[-5:]}"


@pytest.mark.parametrize(("text", "kept"), [
    ("key sk-proj-AbCdEf0123456789xyz rejected", "key [redacted] rejected"),
    ("sk-ant-api03-abcdefghijklmnop", MARK),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123", MARK),
    ("hf_abcdefghijklmnopqrstuv", MARK),
    ("AKIAABCDEFGHIJKLMNOP", MARK),
    ("xoxb-1234567890-abcdefghij", MARK),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc", f"jwt {MARK}"),
    ("Authorization: Bearer whatever-long-credential", f"Authorization: Bearer {MARK}"),
    ("x-api-key: zzzzzzzzzzzzzzzz", f"x-api-key: {MARK}"),
    ("GET /v1?api_key=abcdef123456&x=1", f"GET /v1?api_key={MARK}&x=1"),
    ("proxy http://bob:hunter2pass@127.0.0.1:3128 failed",
     f"proxy http://bob:{MARK}@127.0.0.1:3128 failed"),
    ("https://hooks.slack.com/services/T000/B000/XXXX", f"https://hooks.slack.com/services/{MARK}"),
    # a tool's recorded command line: the value after a flag that names a credential
    ("aiperf profile --api-key 'q8Zr2mXv7Lp4' --url x", f"aiperf profile --api-key '{MARK}' --url x"),
    ("vllm serve m --api-key q8Zr2mXv7Lp4 --port 8000", f"vllm serve m --api-key {MARK} --port 8000"),
    ("--hf-token=q8Zr2mXv7Lp4 --password \"q8Zr2mXv7Lp4\"",
     f"--hf-token={MARK} --password \"{MARK}\""),
])
def test_token_shapes_and_credentials_after_their_words_are_hidden(text: str, kept: str) -> None:
    assert redact_text(text) == kept


@pytest.mark.parametrize("text", [
    "output token throughput per second",
    "Token generation failed; Basic auth failed",
    "max_tokens: 128, prompt_tokens: 12",
    "model not found: meta-llama/Llama-3.1-8B-Instruct",
    "[0.0123, 0.0125, 1.5e-05]",
    "sha256 " + "ab12" * 16,
    "http://127.0.0.1:8501/?run=3",
    "--tokenizer /models/tokenizer-v2 --max-tokens 12345678 --use-server-token-count",
    "--key-file /etc/tls/server.key --api-key --verbose",
])
def test_the_trackers_own_words_and_numbers_are_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_a_variable_named_like_a_secret_is_hidden_without_registration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_GATEWAY_TOKEN", "Zx81Pq72Lm63Nb54")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock")  # a path, not a secret
    refresh_environment()
    assert redact_text("got Zx81Pq72Lm63Nb54 back") == f"got {MARK} back"
    assert redact_text("socket /tmp/ssh-agent.sock") == "socket /tmp/ssh-agent.sock"


def test_a_proxy_and_a_database_password_are_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://me:Pr0xyPassw0rd@10.0.0.1:3128")
    refresh_environment()
    register_url_credentials("postgresql+psycopg://app:Db5ecretW0rd@db/test")
    said = redact_text("tunnel refused Pr0xyPassw0rd; auth failed for Db5ecretW0rd")
    assert "Pr0xyPassw0rd" not in said and "Db5ecretW0rd" not in said


def test_values_that_are_secret_but_not_random_are_hidden_only_whole() -> None:
    register_secret("webhooks/nightly-alerts", pieces=False)
    assert redact_text("POST /webhooks/nightly-alerts failed") == f"POST /{MARK} failed"
    assert redact_text("the webhook failed") == "the webhook failed"


def test_json_like_values_are_redacted_keys_and_all() -> None:
    data = {"error": [f"bad {KEY}", 3, None], KEY: {"nested": (KEY,)}}
    assert redact_data(data) == {"error": [f"bad {MARK}", 3, None], MARK: {"nested": [MARK]}}


def test_markdown_escaping_shows_markup_as_text_and_hides_the_key() -> None:
    shown = escape_markdown(f"![x](http://h/?k={KEY}) <img src=x> :red[hi] $x$ a|b\nnext")
    assert shown.startswith(r"\!\[x\]\(http\:")
    assert "&lt;img src=x&gt;" in shown and r"\:red\[hi\]" in shown and r"a\|b" in shown
    assert "\n" not in shown and KEY[:6] not in shown


def test_say_redacts_what_it_writes_to_stdout_stderr_or_a_stream(
        capsys: pytest.CaptureFixture[str]) -> None:
    stream = io.StringIO()
    say(f"printed {KEY}")
    say(f"warned {KEY.upper()}", err=True)
    say(f"\rprogress {KEY[-8:]}", stream=stream, end="")
    out, err = capsys.readouterr()
    assert (out, err) == (f"printed {MARK}\n", f"warned {MARK}\n")
    assert stream.getvalue() == f"\rprogress {MARK}"


def test_a_log_line_is_redacted_whole_arguments_and_traceback_included() -> None:
    try:
        raise ValueError(f"the gateway said {KEY}")
    except ValueError:
        record = logging.LogRecord("tracker.test", logging.ERROR, __file__, 1, "sent %s",
                                   (KEY[:10],), sys.exc_info())
    line = RedactingFormatter("%(levelname)s %(message)s").format(record)
    assert line.startswith(f"ERROR sent {MARK}") and f"the gateway said {MARK}" in line
    assert not any(KEY[i:i + 6] in line for i in range(len(KEY) - 5))


def test_forgetting_secrets_starts_from_a_clean_registry() -> None:
    assert redact_text(f"key {KEY}") == f"key {MARK}"
    forget_secrets()
    assert redact_text(f"key {KEY}") == f"key {KEY}"


def _leaks(text: str, key: str) -> list[str]:
    folded = text.lower()
    return [key[i:i + 6] for i in range(len(key) - 5) if key[i:i + 6].lower() in folded]


# A real `tracker` process whose command (a stand-in for one that meets an echoed key) registers
# its key, then prints it, logs it, warns with a piece of it and fails quoting it.
COMMAND_THAT_MEETS_ITS_KEY = """\
import logging, sys, warnings
from tracker.cli import main as cli
from tracker.errors import UsageError
from tracker.redaction import register_secret, say

key = sys.argv[1]

def command(args):
    register_secret(key)
    say(f"printed {key}")
    logging.getLogger("tracker.test").warning("logged %s", key.upper())
    warnings.warn(f"warned {key[-8:]}", stacklevel=1)
    raise UsageError(f"refused {key[:10]}")

cli.dispatch = command
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.parametrize(("command", "log_line"), [
    (["runs"], f"logged {MARK}\n"),
    (["worker", "--exit-when-empty"], f" WARNING tracker.test: logged {MARK}\n"),
], ids=["a-command", "a-worker"])
def test_a_commands_stdout_stderr_and_log_lines_carry_no_registered_secret(
        command: list[str], log_line: str) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", COMMAND_THAT_MEETS_ITS_KEY, KEY, *command],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stdout == f"printed {MARK}\n"
    assert log_line in done.stderr and f"warned {MARK}" in done.stderr
    assert done.stderr.endswith(f"error: refused {MARK}\n")
    assert not _leaks(done.stdout + done.stderr, KEY), done.stderr


def test_a_key_pasted_as_a_flags_value_is_hidden_in_the_parsers_error(tmp_path: Path) -> None:
    env = {**os.environ, "TT_GATEWAY_API_KEY": KEY}  # known only by its variable's name
    done = subprocess.run([sys.executable, "-m", "tracker", "show", KEY], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and f"(got '{MARK}')" in done.stderr, done.stderr
    assert KEY not in done.stdout + done.stderr


HEX_KEY = "3b7e1f9a0c4d2e8b6a5f7c9d1e3b0a42"  # an Azure-style key: 32 hex digits, no token shape
UUID_KEY = "7c2f9e4a-1b3d-4c8e-9a6f-2d5b8e1c7f03"


@pytest.mark.parametrize("key", [KEY, HEX_KEY, UUID_KEY])
@pytest.mark.parametrize("case", [str.upper, str.lower, str.swapcase])
def test_a_registered_key_is_hidden_in_any_letter_case(key: str,
                                                      case: Callable[[str], str]) -> None:
    register_secret(HEX_KEY, UUID_KEY)
    echoed = case(key)
    for text in (f"invalid key {echoed}", f"key ending {echoed[-8:]} refused",
                 f"masked {echoed[:6]}****{echoed[-6:]}", f"path /{quote(echoed, safe='')}"):
        hidden = redact_text(text)
        assert MARK in hidden
        lowered = hidden.lower()
        assert not any(key[i:i + 6].lower() in lowered for i in range(len(key) - 5)), hidden


def test_case_folding_keeps_the_text_around_a_hidden_key() -> None:
    register_secret(HEX_KEY)
    text = f"İstanbul said {HEX_KEY.upper()} twice; straße {HEX_KEY[:10].upper()}."
    assert redact_text(text) == f"İstanbul said {MARK} twice; straße {MARK}."


def test_a_secret_named_setting_that_names_code_hides_no_words(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # common in CI: a null keyring named by its class; "backend" is a piece of its value
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    monkeypatch.setenv("TRACKER_SENTINEL_API_KEY", "sk-test-9f8e7d6c5b4a")
    refresh_environment()
    text = "the storage backend did not answer (keyring.backends.null.Keyring)"
    assert redact_text(text) == text
    assert "9f8e7d6c5b4a" not in redact_text("echo sk-test-9f8e7d6c5b4a")


def test_a_secret_named_variable_is_hidden_whole_but_not_the_words_it_shares(
        monkeypatch: pytest.MonkeyPatch) -> None:
    value = "Zx81-storage-backend-Pq72"  # only its variable's name says it is a secret
    monkeypatch.setenv("TT_STORE_TOKEN", value)
    refresh_environment()
    said = (f"got {value} / {value.upper()} / {quote('/' + value, safe='')}; "
            "the storage backend did not answer")
    assert redact_text(said) == (f"got {MARK} / {MARK} / %2F{MARK}; "
                                 "the storage backend did not answer")
    register_secret(value)  # a run that uses it as its key: now its pieces are hidden too
    assert redact_text("the storage backend did not answer") == f"the {MARK} {MARK} did not answer"
