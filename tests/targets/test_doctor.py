"""``tracker doctor`` against a local server that behaves like the cloud gateway.

The gateway fake answers like TaoToken's OpenAI-compatible side: 401 for a wrong key (echoing a
masked key, as some gateways do), "model does not exist" with a /v1/models listing, 429 with
Retry-After, and, for one model, an Anthropic-shaped reply without ``choices``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from tracker.cli.main import main
from tracker.inputs.configs import ServingConfig
from tracker.redaction import MARK
from tracker.sim import ThreadedSimServer
from tracker.targets.doctor import Diagnosis, DoctorTarget, Status, render_diagnosis, run_doctor
from tracker.targets.launcher import find_free_port

GOOD_KEY = "sk-tt-0123456789abcdefGOOD"
WRONG_KEY = "sk-tt-0123456789abcdefWRONG"
MODELS = ["claude-sonnet-4-5", "gpt-4o-mini", "deepseek-v3"]
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
              "all_proxy", "no_proxy")


def _unauthorized(request: web.Request) -> web.Response | None:
    if request.headers.get("Authorization") == f"Bearer {GOOD_KEY}":
        return None
    shown = request.headers.get("Authorization", "")[-12:]
    return web.json_response({"error": {"message": f"Incorrect API key provided: {shown}",
                                        "type": "invalid_request_error"}}, status=401)


async def _models(request: web.Request) -> web.Response:
    denied = _unauthorized(request)
    return denied or web.json_response(
        {"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]})


async def _chat(request: web.Request) -> web.Response:
    denied = _unauthorized(request)
    if denied:
        return denied
    model = (await request.json())["model"]
    if model == "busy-model":
        return web.json_response({"error": {"message": "Rate limit reached"}}, status=429,
                                 headers={"Retry-After": "7"})
    if model == "messages-model":
        return web.json_response({"id": "msg_1", "type": "message", "role": "assistant",
                                  "content": [{"type": "text", "text": "OK"}]})
    if model not in MODELS:
        return web.json_response({"error": {"message": f"The model `{model}` does not exist",
                                            "code": "model_not_found"}}, status=404)
    return web.json_response({"id": "c1", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}]})


Doctor = Callable[..., Awaitable[Diagnosis]]


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TT_KEY", GOOD_KEY)


@pytest_asyncio.fixture
async def gateway() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/api/v1/models", _models)
    app.router.add_post("/api/v1/chat/completions", _chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/api"
    await runner.cleanup()


@pytest.fixture
def doctor(gateway: str) -> Doctor:
    async def run(*, url: str | None = None, model: str = "claude-sonnet-4-5",
                  key_env: str | None = "TT_KEY") -> Diagnosis:
        return await run_doctor(DoctorTarget(url or gateway, model, key_env, timeout_s=5.0))
    return run


def failure(diagnosis: Diagnosis) -> str:
    failed = [f for f in diagnosis.findings if f.status is Status.FAIL]
    assert len(failed) == 1, render_diagnosis(diagnosis)
    return f"{failed[0].check}: {failed[0].detail} | fix: {failed[0].fix}"


def closed_port() -> int:
    return find_free_port()  # nothing listens there


async def test_a_working_gateway_is_ready(doctor: Doctor) -> None:
    diagnosis = await doctor()
    assert diagnosis.ready and diagnosis.exit_code == 0
    assert [f.status for f in diagnosis.findings] == [Status.OK] * 4
    assert GOOD_KEY not in render_diagnosis(diagnosis)


async def test_no_key_in_the_environment(doctor: Doctor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TT_KEY")
    diagnosis = await doctor()
    assert "no key in the environment: $TT_KEY is not set" in failure(diagnosis)
    assert "export TT_KEY=" in failure(diagnosis)
    assert diagnosis.exit_code == 2


@pytest.mark.parametrize(("value", "said"), [
    (f"Bearer {GOOD_KEY}", "starts with 'Bearer '"),
    (f"{GOOD_KEY[:10]} {GOOD_KEY[10:]}", "spaces or line breaks inside"),
    (f'"{GOOD_KEY}"', "quote characters"),
])
async def test_a_mangled_key_is_named_without_showing_it(
    doctor: Doctor, monkeypatch: pytest.MonkeyPatch, value: str, said: str
) -> None:
    monkeypatch.setenv("TT_KEY", value)
    diagnosis = await doctor()
    assert said in failure(diagnosis) and not diagnosis.ready
    assert GOOD_KEY[10:] not in render_diagnosis(diagnosis)


async def test_stray_outer_spaces_are_a_warning_and_the_request_still_works(
    doctor: Doctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TT_KEY", f"  {GOOD_KEY}\n")
    diagnosis = await doctor()
    assert diagnosis.ready
    key = next(f for f in diagnosis.findings if f.check == "key")
    assert key.status is Status.WARN and "leading or trailing spaces" in key.detail


async def test_a_rejected_key_is_a_401_diagnosis_and_the_echoed_key_is_hidden(
    doctor: Doctor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TT_KEY", WRONG_KEY)
    diagnosis = await doctor()
    text = render_diagnosis(diagnosis)
    assert "HTTP 401: the gateway rejected the key" in failure(diagnosis)
    assert "WRONG" not in text and MARK in text
    assert diagnosis.exit_code == 3


async def test_an_unknown_model_lists_the_models_that_exist(doctor: Doctor) -> None:
    diagnosis = await doctor(model="claude-sonnet-4.5")
    said = failure(diagnosis)
    assert "model not found: 'claude-sonnet-4.5'" in said
    assert "/v1/models lists 3: claude-sonnet-4-5, gpt-4o-mini, deepseek-v3" in said
    assert "closest: claude-sonnet-4-5" in said
    assert "does not exist" in said  # the gateway's own words, from the chat request


async def test_a_base_url_ending_in_v1_is_flagged_but_not_doubled(
    doctor: Doctor, gateway: str
) -> None:
    diagnosis = await doctor(url=gateway + "/v1")
    assert diagnosis.ready
    url = diagnosis.findings[0]
    assert url.status is Status.WARN and f"{gateway}/v1/chat/completions" in url.detail
    assert url.fix is not None and url.fix.startswith(f"write the root without /v1: {gateway} ")


async def test_a_base_url_with_query_parameters_is_refused_before_any_request(
    doctor: Doctor, gateway: str
) -> None:
    diagnosis = await doctor(url=gateway + "?version=1")
    assert "has query parameters" in failure(diagnosis)
    assert f"use {gateway} (no '?...')" in failure(diagnosis)
    assert [f.check for f in diagnosis.findings] == ["base_url", "key"]
    assert diagnosis.exit_code == 2


async def test_a_reply_without_choices_names_the_wrong_endpoint(doctor: Doctor) -> None:
    MODELS.append("messages-model")
    try:
        diagnosis = await doctor(model="messages-model")
    finally:
        MODELS.remove("messages-model")
    said = failure(diagnosis)
    assert "a reply without choices" in said and "Anthropic Messages reply" in said
    assert "wrong endpoint" in said


async def test_a_rate_limit_gives_the_retry_after(doctor: Doctor) -> None:
    MODELS.append("busy-model")
    try:
        said = failure(await doctor(model="busy-model"))
    finally:
        MODELS.remove("busy-model")
    assert "HTTP 429: rate limited (Retry-After: 7" in said


async def test_a_closed_port_is_connection_refused(doctor: Doctor) -> None:
    diagnosis = await doctor(url=f"http://127.0.0.1:{closed_port()}/api")
    assert "connection refused by 127.0.0.1:" in failure(diagnosis)
    assert diagnosis.exit_code == 3


async def test_a_dead_local_proxy_is_named(doctor: Doctor, monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = f"http://user:secret@127.0.0.1:{closed_port()}"
    monkeypatch.setenv("HTTP_PROXY", proxy)
    diagnosis = await doctor()
    said = failure(diagnosis)
    assert "local proxy failed: HTTP_PROXY=http://127.0.0.1:" in said
    assert "refuses connections" in said and "secret" not in render_diagnosis(diagnosis)
    assert "unset HTTP_PROXY" in said


async def test_tls_to_a_plain_http_server_is_a_tls_error(doctor: Doctor, gateway: str) -> None:
    said = failure(await doctor(url=gateway.replace("http://", "https://")))
    assert "TLS error talking to 127.0.0.1" in said


def test_cli_doctor_with_a_config_exits_0_on_a_ready_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = ServingConfig.model_validate({"name": "s", "target": {"kind": "sim", "model": "sim/m"}})
    with ThreadedSimServer(sim) as server:
        config = tmp_path / "gateway.yaml"
        config.write_text(f"name: local\ntarget:\n  kind: openai\n  base_url: {server.base_url}\n"
                          "  model: sim/m\n")
        code = main(["doctor", "--config", str(config)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "ready: a chat completion returned choices" in out


def test_cli_doctor_without_a_target_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--model", "m"]) == 2
    assert "give --config FILE, or --base-url URL --model ID" in capsys.readouterr().err


def test_cli_doctor_never_prints_a_key_pasted_as_the_variable_name(
    gateway: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pasted = "ttk9F3c2A7b41D0e8F6zQdoc"  # unset, and not an UPPER_CASE name: maybe a key
    code = main(["doctor", "--base-url", gateway, "--model", "claude-sonnet-4-5",
                 "--api-key-env", pasted, "--timeout", "5"])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "name hidden" in out
    assert pasted[3:11] not in out + err
