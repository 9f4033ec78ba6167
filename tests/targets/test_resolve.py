"""Targets: keys from the environment, cloud targets' network note, attach vs embedded."""

from __future__ import annotations

import pytest

from tracker.errors import ConfigError
from tracker.inputs.configs import LoadedConfig, ServingConfig, build_loaded_config
from tracker.targets.resolve import describe_network, find_proxy, open_target, resolve_headers

KEY = "sk-tt-0123456789abcdefKEY"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
              "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


def gateway(base_url: str = "https://taotoken.net/api", key_env: str = "TT_KEY") -> LoadedConfig:
    body = {"name": "tt", "target": {"kind": "openai", "base_url": base_url,
                                     "model": "claude-sonnet-4-5", "api_key_env": key_env}}
    return build_loaded_config(ServingConfig.model_validate(body), "tt.yaml")


def test_the_key_is_stripped_and_sent_as_a_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TT_KEY", f"  {KEY}\n")
    assert resolve_headers(gateway()) == {"Authorization": f"Bearer {KEY}"}


@pytest.mark.parametrize(("value", "said"), [
    (f"Bearer {KEY}", "starts with 'Bearer '"),
    (f"{KEY[:8]} {KEY[8:]}", "spaces or line breaks inside the key"),
    ("", "is not set"),
])
def test_a_mangled_key_is_refused_without_showing_it(
    monkeypatch: pytest.MonkeyPatch, value: str, said: str
) -> None:
    monkeypatch.setenv("TT_KEY", value)
    with pytest.raises(ConfigError, match=said) as caught:
        resolve_headers(gateway())
    assert KEY[8:] not in str(caught.value)


def test_a_key_pasted_as_the_variable_name_is_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    pasted = "ttk9F3c2A7b41D0e8F6zQ"  # a valid variable name, but a key: never in the message
    monkeypatch.delenv(pasted, raising=False)
    with pytest.raises(ConfigError, match="name hidden") as caught:
        resolve_headers(gateway(key_env=pasted))
    assert pasted[4:12] not in str(caught.value)
    monkeypatch.delenv("TT_KEY", raising=False)
    with pytest.raises(ConfigError, match="the environment variable TT_KEY is not set"):
        resolve_headers(gateway())  # a conventional name is shown: it helps, it is no secret


def test_proxies_follow_the_environment_and_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@127.0.0.1:7890")
    assert find_proxy("https://taotoken.net/api") == ("HTTPS_PROXY",
                                                      "http://user:pw@127.0.0.1:7890")
    assert find_proxy("http://taotoken.net/api") is None  # only HTTPS_PROXY is set
    note = describe_network("https://taotoken.net/api")
    assert "include the network round trip" in note
    assert "proxy http://127.0.0.1:7890 (HTTPS_PROXY)" in note and "pw" not in note
    monkeypatch.setenv("NO_PROXY", "taotoken.net")
    assert find_proxy("https://taotoken.net/api") is None


async def test_a_cloud_target_says_its_latencies_include_the_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TT_KEY", KEY)
    async with open_target(gateway()) as handle:
        assert handle.endpoint.url("/v1/chat/completions") == \
            "https://taotoken.net/api/v1/chat/completions"
        assert not handle.supports_ignore_eos and not handle.simulated
        facts = handle.environment_facts()
    assert "taotoken.net" in str(facts["network_note"])
    assert KEY not in str(facts)


async def test_a_base_url_ending_in_v1_is_not_doubled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TT_KEY", KEY)
    async with open_target(gateway("https://taotoken.net/api/v1")) as handle:
        assert handle.endpoint.url("/v1/models") == "https://taotoken.net/api/v1/models"


async def test_the_embedded_simulator_has_no_launch_and_no_network_note() -> None:
    body = {"name": "s", "target": {"kind": "sim", "model": "sim/m"}}
    async with open_target(build_loaded_config(ServingConfig.model_validate(body), "s")) as handle:
        facts = handle.environment_facts()
        assert handle.simulated and handle.launch is None
    assert str(facts["engine"]).startswith("tracker-sim") and "network_note" not in facts


def _noisy_sim() -> LoadedConfig:
    body = {"name": "noisy", "target": {"kind": "sim", "model": "sim/m",
                                        "simulator": {"seed": 3, "run_noise": 0.5}}}
    return build_loaded_config(ServingConfig.model_validate(body), "noisy.yaml")


async def test_each_simulated_run_draws_its_own_speed_unless_it_is_numbered() -> None:
    """Run-to-run variation like a real server's, with no process-wide counter behind it."""
    factors = []
    for ordinal in (None, None, 7, 7):
        async with open_target(_noisy_sim(), run_ordinal=ordinal) as handle:
            factors.append(handle.sim_run_factor)
    assert all(factor is not None for factor in factors)
    assert factors[0] != factors[1]  # two fresh draws (run_noise 0.5: equal only by accident)
    assert factors[2] == factors[3]  # the same ordinal, the same draw: reproducible when asked
