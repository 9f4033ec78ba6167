"""A server checked against its config before the first request: what it says it is and runs.

Once the target answers (an attached server before anything is sent, a launched one once it is
healthy), three reads:

- ``GET /version``: vLLM answers ``{"version": "0.32.0"}``, the tracker's simulator
  ``{"version": "tracker-sim X"}``. A server that says it is the simulator makes the run
  simulated.
- ``GET /v1/models``: the served model names, each with its ``max_model_len``.
- ``GET /metrics``: the labels of ``vllm:cache_config_info`` (``block_size``,
  ``enable_prefix_caching``, ``gpu_memory_utilization``, ``cache_dtype``, ...).

Then, against the config:

- A ``target.model`` the server does not serve is a ``ConfigError`` naming the served models,
  where the server routes by model name (vLLM and the simulator answer 404 for another one).
  Elsewhere (llama.cpp ignores the name) it is a warning.
- Each engine field the config sets and the server reports otherwise is a warning: the run
  measures the server as it runs, not as the config says. The warnings are stored with the run
  (``tracker.results.SERVER_CHECK_KEY``) and shown by ``tracker run``, ``tracker show`` and the
  gate report.
A server that reports none of this (a gateway, another engine) is checked for nothing: "not
reported", never an error. What the server says is outside text: it is redacted before it is
kept or shown.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from tracker.errors import ConfigError
from tracker.http_client.client import strip_credentials
from tracker.inputs.configs import EngineArgs, LoadedConfig
from tracker.load.generator import Endpoint
from tracker.redaction import redact_one_line
from tracker.results import SERVER_CHECK_KEY
from tracker.telemetry.server_metrics import parse_cache_config_info

SIM_VERSION_PREFIX = "tracker-sim"
REQUEST_TIMEOUT_S = 5.0
MAX_LISTED_MODELS = 8


def _parse_bool(value: str) -> bool | None:
    return {"true": True, "false": False}.get(value.strip().lower())


def _parse_int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def _parse_float(value: str) -> float | None:
    try:
        found = float(value)
    except ValueError:
        return None
    return found if math.isfinite(found) else None


# engine field, cache_config_info label, the label's parser
CACHE_FIELDS: tuple[tuple[str, str, Callable[[str], object]], ...] = (
    ("block_size", "block_size", _parse_int),
    ("enable_prefix_caching", "enable_prefix_caching", _parse_bool),
    ("gpu_memory_utilization", "gpu_memory_utilization", _parse_float),
    ("kv_cache_dtype", "cache_dtype", str),
)


@dataclass(frozen=True, slots=True)
class ServedModel:
    name: str
    max_model_len: int | None  # None: /v1/models does not say


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """What the server said about itself, or None when it did not say (or could not be asked)."""

    version: str | None  # /version's "version", as the server wrote it
    models: tuple[ServedModel, ...] | None  # /v1/models
    cache_config: Mapping[str, str] | None  # the labels of vllm:cache_config_info

    @property
    def engine(self) -> str | None:
        """The engine and its version ("vllm 0.32.0", "tracker-sim 0.9.0"), or None when
        /version did not say."""
        if self.version is None:
            return None
        return self.version if " " in self.version else f"vllm {self.version}"

    @property
    def simulated(self) -> bool:
        return self.version is not None and self.version.startswith(SIM_VERSION_PREFIX)

    @property
    def routes_by_model(self) -> bool:
        """The server answers 404 for a model it does not serve (vLLM, the simulator)."""
        return self.engine is not None and self.engine.startswith(("vllm ", SIM_VERSION_PREFIX))


@dataclass(frozen=True, slots=True)
class ServerCheck:
    facts: ServerFacts
    warnings: tuple[str, ...]

    def environment_facts(self) -> dict[str, object]:
        """What the run's environment records (``SERVER_CHECK_KEY``), which holds nothing secret."""
        models = self.facts.models
        return {SERVER_CHECK_KEY: {
            "version": self.facts.version,
            "served_models": None if models is None else [
                {"name": m.name, "max_model_len": m.max_model_len} for m in models],
            "cache_config": None if self.facts.cache_config is None
            else dict(self.facts.cache_config),
            "warnings": list(self.warnings),
        }}


# --- parsing what the server answered (pure) ---------------------------------------------------

def _outside(text: object, limit: int = 120) -> str:
    return redact_one_line(str(text), limit)


def parse_version(body: Any) -> str | None:
    version = body.get("version") if isinstance(body, dict) else None
    return _outside(version) if isinstance(version, str) and version.strip() else None


def parse_served_models(body: Any) -> tuple[ServedModel, ...] | None:
    """``/v1/models``' ``data`` as served models, or None when it is not that list."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    models = []
    for card in data:
        if not isinstance(card, dict) or not isinstance(card.get("id"), str):
            continue
        length = card.get("max_model_len")
        models.append(ServedModel(_outside(card["id"], 200), length if isinstance(length, int)
                                  and not isinstance(length, bool) and length > 0 else None))
    return tuple(models)


def parse_cache_config(text: str) -> dict[str, str] | None:
    """The labels of ``vllm:cache_config_info`` (``tracker.telemetry.server_metrics``' parser),
    redacted, or None when the exposition has none."""
    labels = parse_cache_config_info(text)
    if labels is None:
        return None
    return {_outside(k, 60): _outside(v) for k, v in sorted(labels.items())}


# --- against the config (pure) -----------------------------------------------------------------

def _yaml(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _flag(field: str, value: object) -> str:
    name = "--" + field.replace("_", "-")
    if isinstance(value, bool):
        return name if value else f"--no-{name[2:]}"
    return f"{name} {value}"


def _same(said: object, reported: object) -> bool:
    if isinstance(said, float) and isinstance(reported, float):
        return math.isclose(said, reported, rel_tol=1e-6)
    return said == reported


def _mismatch(field: str, said: object, reported: object, source: str) -> str:
    return (f"engine.{field}: the config says {_yaml(said)}, the server reports "
            f"{_yaml(reported)} ({source}); this run measures the server as it runs: set "
            f"engine.{field}: {_yaml(reported)} to describe it, or serve it with "
            f"{_flag(field, said)}")


def compute_engine_warnings(facts: ServerFacts, engine: EngineArgs,
                            model: str) -> list[str]:
    """One warning per engine field the config sets and the server reports otherwise."""
    warnings = []
    labels = facts.cache_config or {}
    for field, label, parse in CACHE_FIELDS:
        said = getattr(engine, field)
        reported = parse(labels[label]) if label in labels else None
        if said is not None and reported is not None and not _same(said, reported):
            warnings.append(_mismatch(field, said, reported, "vllm:cache_config_info"))
    served = {m.name: m for m in facts.models or ()}
    length = served[model].max_model_len if model in served else None
    if engine.max_model_len is not None and length is not None \
            and engine.max_model_len != length:
        warnings.append(_mismatch("max_model_len", engine.max_model_len, length,
                                  f"/v1/models for {model}"))
    return warnings


def _listed(models: Sequence[ServedModel]) -> str:
    names = [m.name for m in models[:MAX_LISTED_MODELS]]
    more = f" and {len(models) - MAX_LISTED_MODELS} more" if len(models) > MAX_LISTED_MODELS else ""
    return ", ".join(names) + more if names else "no model"


def check_served_model(facts: ServerFacts, loaded: LoadedConfig, where: str) -> str | None:
    """A ``ConfigError`` when a server that routes by model name does not serve
    ``target.model``, a warning when another server does not list it, and None when it is served
    or the server lists nothing."""
    model = loaded.config.target.model
    if facts.models is None or any(m.name == model for m in facts.models):
        return None
    listed = _listed(facts.models)
    if facts.routes_by_model:
        raise ConfigError(
            f"{loaded.path}: target.model: the server at {where} ({facts.engine}) does not "
            f"serve {model!r}; its /v1/models lists: {listed}. Set target.model to the served "
            "name (vLLM's --served-model-name), or point base_url at the server that serves it")
    return (f"target.model: {model!r} is not in the server's /v1/models ({listed}); requests "
            "name it anyway (some servers ignore the name, others answer 404)")


def compute_server_check(facts: ServerFacts, loaded: LoadedConfig, where: str) -> ServerCheck:
    """The check of ``facts`` against the config (raises ``ConfigError`` for a model the
    server does not serve)."""
    warnings = [found] if (found := check_served_model(facts, loaded, where)) else []
    warnings += compute_engine_warnings(facts, loaded.config.engine, loaded.config.target.model)
    return ServerCheck(facts, tuple(warnings))


# --- asking the server ---------------------------------------------------------------------------

async def _get(session: aiohttp.ClientSession, endpoint: Endpoint, path: str,
               *, json_body: bool) -> Any:
    """The answer's JSON (or text), or None for anything but a 200 that parses."""
    try:
        async with session.get(endpoint.url(path), headers=endpoint.headers) as response:
            if response.status != 200:
                return None
            if json_body:
                return await response.json(content_type=None)
            return await response.text(errors="replace")
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        return None


async def run_server_facts(endpoint: Endpoint,
                           timeout_s: float = REQUEST_TIMEOUT_S) -> ServerFacts:
    """``/version``, ``/v1/models`` and ``/metrics``' cache config, asked at once. What does
    not answer is None."""
    root = Endpoint(endpoint.base_url.rstrip("/").removesuffix("/v1"), endpoint.headers)
    async with aiohttp.ClientSession(
            trust_env=True, timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
        version, models, metrics = await asyncio.gather(
            _get(session, root, "/version", json_body=True),
            _get(session, endpoint, "/v1/models", json_body=True),
            _get(session, root, "/metrics", json_body=False))
    return ServerFacts(parse_version(version), parse_served_models(models),
                       parse_cache_config(metrics) if isinstance(metrics, str) else None)


async def run_server_check(endpoint: Endpoint, loaded: LoadedConfig) -> ServerCheck:
    """The server at ``endpoint`` checked against ``loaded`` (``compute_server_check``)."""
    facts = await run_server_facts(endpoint)
    return compute_server_check(facts, loaded, strip_credentials(endpoint.base_url))
