"""Serving configs: what is served, how, and with which engine args; versioned by content.

A config's version is the sha256 of its canonical form: the validated config with defaults left
out, keys sorted, compact JSON. Key order, comments, formatting and the free-text ``description``
do not change it; any engine arg, the target or the model does.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from tracker.errors import SecretInConfigError
from tracker.yamlfile import Loc, format_loc, read_yaml_mapping, validate_model, where

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
ENV_VAR_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ExtraValue = str | int | float | bool | list[str | int | float] | None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineArgs(_Strict):
    """vLLM engine args; ``None`` leaves the engine's own default. Unknown flags go in extra_args."""

    block_size: Literal[1, 8, 16, 32, 64, 128] | None = None
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: PositiveInt | None = None
    max_num_seqs: PositiveInt | None = None
    max_num_batched_tokens: PositiveInt | None = None
    quantization: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] | None = None
    enable_prefix_caching: bool | None = None
    swap_space: NonNegativeFloat | None = None  # GiB of CPU swap per GPU
    tensor_parallel_size: PositiveInt | None = None
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] | None = None
    extra_args: dict[str, ExtraValue] = Field(default_factory=dict)

    @field_validator("extra_args")
    @classmethod
    def _normalise_extra(cls, value: dict[str, ExtraValue]) -> dict[str, ExtraValue]:
        out: dict[str, ExtraValue] = {}
        typed = set(cls.model_fields) - {"extra_args"}
        for raw_key, item in value.items():
            key = raw_key.removeprefix("--").replace("-", "_")
            if not re.fullmatch(r"[a-z][a-z0-9_]*", key):
                raise ValueError(f"extra_args key {raw_key!r} is not a vLLM flag name")
            if key in typed:
                raise ValueError(f"{raw_key!r} has its own key: set engine.{key} instead")
            out[key] = item
        return out

    def as_flags(self) -> list[str]:
        """The engine args as ``vllm serve`` flags, in a stable order."""
        flags: list[str] = []
        values = self.model_dump(exclude={"extra_args"}, exclude_none=True)
        for key, value in [*values.items(), *sorted(self.extra_args.items())]:
            flags.extend(_flag(key, value))
        return flags


def _flag(key: str, value: ExtraValue) -> list[str]:
    name = "--" + key.replace("_", "-")
    if value is True:
        return [name]
    if value is False:
        return [f"--no-{key.replace('_', '-')}"]
    if value is None:
        return []
    if isinstance(value, list):
        return [name, *(_flag_value(v) for v in value)]
    return [name, _flag_value(value)]


def _flag_value(value: str | int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class LaunchSettings(_Strict):
    command: list[str] = Field(default_factory=lambda: ["vllm", "serve"], min_length=1)
    env: dict[str, str] = Field(default_factory=dict)  # literal values (never a secret)
    env_from: list[str] = Field(default_factory=list)  # variables passed through by name
    startup_timeout_s: PositiveFloat = 900.0


class SimulatorSettings(_Strict):
    """The embedded simulator's performance model (seconds per unit of work); see tracker.sim."""

    seed: int = 0
    prefill_s_per_token: NonNegativeFloat = 5e-5
    decode_base_s: PositiveFloat = 0.004  # one decode step of the 16-bit model, batch of one
    decode_per_seq_s: NonNegativeFloat = 5e-5
    decode_s_per_kv_gib: NonNegativeFloat = 2.5e-4  # memory-bound decode: per GiB of KV read
    decode_weights_share: float = Field(default=0.5, ge=0, le=1)  # of decode_base_s: weight reads
    noise: NonNegativeFloat = Field(default=0.02, le=0.5)  # relative jitter of each step
    run_noise: NonNegativeFloat = Field(default=0.01, le=0.5)  # jitter of a whole run's speed
    batching: Literal["continuous", "static"] = "continuous"  # static: no paging, no joining
    gpu_memory_gib: PositiveFloat = 80.0  # one simulated accelerator
    model_params_b: PositiveFloat = 8.0  # billions of parameters; 16-bit weights: 2 GiB each


class Target(_Strict):
    kind: Literal["sim", "vllm", "openai"]
    model: str = Field(min_length=1)
    base_url: str | None = Field(default=None, pattern=r"^https?://")
    api_key_env: str | None = None
    launch: LaunchSettings | None = None
    simulator: SimulatorSettings | None = None

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_VAR_PATTERN.fullmatch(value):
            raise ValueError(
                "must be the NAME of an environment variable such as TAOTOKEN_API_KEY, "
                "not a key; export the key in that variable"
            )
        return value

    @model_validator(mode="after")
    def _fits_kind(self) -> Target:
        if self.kind == "openai" and self.base_url is None:
            raise ValueError("kind 'openai' needs base_url, e.g. https://taotoken.net/api")
        if self.launch is not None and self.kind != "vllm":
            raise ValueError(f"launch settings are only for kind 'vllm' (kind is {self.kind!r})")
        if self.launch is not None and self.base_url is not None:
            raise ValueError("give either base_url (attach to a running server) or launch, not both")
        if self.simulator is not None and self.kind != "sim":
            raise ValueError(f"simulator settings are only for kind 'sim' (kind is {self.kind!r})")
        return self


class ServingConfig(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    target: Target
    engine: EngineArgs = Field(default_factory=EngineArgs)

    @property
    def simulated(self) -> bool:
        return self.target.kind == "sim"

    @property
    def simulator(self) -> SimulatorSettings:
        return self.target.simulator or SimulatorSettings()


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    config: ServingConfig
    version: str  # sha256 hex of the canonical form
    canonical: Mapping[str, Any]
    path: str

    @property
    def short_version(self) -> str:
        return self.version[:12]


def compute_canonical(config: ServingConfig) -> dict[str, Any]:
    body = config.model_dump(mode="json", exclude_defaults=True, exclude={"description"})
    body["name"] = config.name
    return body


def compute_version(canonical: Mapping[str, Any]) -> str:
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_config(path: str | Path) -> LoadedConfig:
    file = Path(path)
    data, lines = read_yaml_mapping(file, "serving config")
    _refuse_secrets(data, (), file, lines)
    config = validate_model(ServingConfig, data, file, lines)
    return build_loaded_config(config, str(file))


def build_loaded_config(config: ServingConfig, path: str) -> LoadedConfig:
    canonical = compute_canonical(config)
    return LoadedConfig(config, compute_version(canonical), canonical, path)


# --- secrets -------------------------------------------------------------------------------

SECRET_KEYS = {
    "api_key", "apikey", "key", "token", "access_token", "auth_token", "secret", "password",
    "authorization", "bearer", "openai_api_key", "anthropic_api_key", "taotoken_api_key",
}
SECRET_VALUE = re.compile(
    r"^(?:Bearer\s+\S+|(?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}|sk-ant-\S{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|hf_[A-Za-z0-9]{20,}|github_pat_\w{20,}|xox[abprs]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*)$"
)
SECRET_SUFFIXES = ("_token", "_secret", "_password", "_api_key", "apikey", "_credentials")


@functools.cache
def _schema_keys() -> frozenset[str]:
    models: tuple[type[BaseModel], ...] = (ServingConfig, Target, EngineArgs, LaunchSettings,
                                           SimulatorSettings)
    return frozenset(name for model in models for name in model.model_fields)


def is_secret_key(key: str) -> bool:
    """A key whose value would be a secret (``api_key``, ``hf_token``…); our own keys are not."""
    name = key.lower().lstrip("-").replace("-", "_")
    if name.removeprefix("sim_") in _schema_keys():  # our keys (prefill_s_per_token, also as
        return False                                   # the simulator's --sim-* flags) are not
    return name in SECRET_KEYS or name.endswith(SECRET_SUFFIXES)


_FIX = ("put the key in an environment variable and name that variable in target.api_key_env "
        "(e.g. api_key_env: TAOTOKEN_API_KEY)")


def _refuse_secrets(node: Any, loc: Loc, path: Path, lines: Mapping[Loc, int]) -> None:
    """Refuse a literal key anywhere in a config: a secret must never reach the database."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            child = (*loc, str(key))
            if is_secret_key(str(key)) and value not in (None, ""):
                raise SecretInConfigError(
                    f"{where(path, child, lines)}: {format_loc(child)}: a literal secret is not "
                    f"allowed in a config (value hidden); {_FIX}"
                )
            _refuse_secrets(value, child, path, lines)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            _refuse_secrets(item, (*loc, index), path, lines)
    elif isinstance(node, str) and SECRET_VALUE.match(node.strip()):
        raise SecretInConfigError(
            f"{where(path, loc, lines)}: {format_loc(loc)}: this value looks like an API key or "
            f"token (value hidden); secrets are never stored: {_FIX}"
        )
