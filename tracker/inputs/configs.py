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

from tracker.errors import ConfigError, SecretInConfigError
from tracker.inputs.vllm_args import KV_CACHE_DTYPES
from tracker.inputs.yamlfile import Loc, format_loc, read_yaml_mapping, validate_model, where
from tracker.redaction import contains_token, is_secret_name

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
NAME_MAX_CHARS = 200  # the store's name columns (String(200))
ENV_VAR_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ExtraValue = str | int | float | bool | list[str | int | float] | None


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True)
class EngineFlag:
    """One engine arg as ``vllm serve`` flags: its key under ``engine`` (``block_size``,
    ``extra_args.enforce_eager``), the flag's name (``enforce_eager``) and the flags."""

    key: str
    name: str
    flags: tuple[str, ...]  # empty for an extra_args value of null (no flag at all)

    @property
    def shown(self) -> str:
        """The value as the flags give it: ``4``, ``fp8``, ``true``."""
        if len(self.flags) > 1:
            return " ".join(self.flags[1:])
        return "false" if self.flags and self.flags[0].startswith("--no-") else "true"


class EngineArgs(_Strict):
    """vLLM engine args; ``None`` leaves the engine's own default. Unknown flags go in extra_args.

    The schema takes what the vLLM versions the tracker knows take (tracker.inputs.vllm_args);
    whether the vLLM that will run the config has a flag, and takes a value, is checked against
    that version before a run starts (tracker.targets.vllm_install)."""

    block_size: PositiveInt | None = None  # tokens per KV block: 1, 8 or a multiple of 16
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    max_model_len: PositiveInt | None = None
    max_num_seqs: PositiveInt | None = None
    max_num_batched_tokens: PositiveInt | None = None
    quantization: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    kv_cache_dtype: str | None = None  # one of KV_CACHE_DTYPES
    enable_prefix_caching: bool | None = None
    swap_space: NonNegativeFloat | None = None  # GiB of CPU swap per GPU; vLLM < 0.18 only
    tensor_parallel_size: PositiveInt | None = None
    dtype: Literal["auto", "half", "float16", "bfloat16", "float", "float32"] | None = None
    extra_args: dict[str, ExtraValue] = Field(default_factory=dict)

    @field_validator("block_size")
    @classmethod
    def _block_size(cls, value: int | None) -> int | None:
        if value is not None and value not in (1, 8) and value % 16:
            raise ValueError("must be 1, 8 or a multiple of 16 such as 16, 32, 64 or 128 (a "
                             "CPU build of vLLM needs a multiple of 32)")
        return value

    @field_validator("kv_cache_dtype")
    @classmethod
    def _kv_cache_dtype(cls, value: str | None) -> str | None:
        if value is not None and value not in KV_CACHE_DTYPES:
            raise ValueError(f"must be one of {', '.join(KV_CACHE_DTYPES)}")
        return value

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
            for part in item if isinstance(item, list) else [item]:
                if isinstance(part, str) and not is_argument_value(part):
                    raise ValueError(f"extra_args {raw_key!r}: a value starting with '-' would "
                                     "be read by the server as a flag; give the flag its own "
                                     "key in extra_args instead")
            out[key] = item
        return out

    def as_flags(self) -> list[str]:
        """The engine args as ``vllm serve`` flags, in a stable order."""
        return [flag for item in self.flag_items() for flag in item.flags]

    def flag_items(self) -> list[EngineFlag]:
        """Each engine arg that is set, with its flags, in ``as_flags``' order."""
        values = self.model_dump(exclude={"extra_args"}, exclude_none=True)
        return [*(EngineFlag(key, key, tuple(_flag(key, value))) for key, value in values.items()),
                *(EngineFlag(f"extra_args.{key}", key, tuple(_flag(key, value)))
                  for key, value in sorted(self.extra_args.items()))]


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


def is_argument_value(text: str) -> bool:
    """Whether ``text`` can follow a flag on a command line without being read as a flag."""
    return not text.startswith("-") or bool(_NUMBER.fullmatch(text))


def _flag_value(value: str | int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class LaunchSettings(_Strict):
    command: list[str] = Field(default_factory=lambda: ["vllm", "serve"], min_length=1)
    env: dict[str, str] = Field(default_factory=dict)  # literal values (never a secret)
    env_from: list[str] = Field(default_factory=list)  # variables passed through by name
    startup_timeout_s: PositiveFloat = 900.0
    # the server's CPUs (tracker/targets/pinning.py); the tracker's client keeps off them
    cpus: list[int] | None = Field(default=None, min_length=1)

    @field_validator("cpus", mode="before")
    @classmethod
    def _cpu_ids(cls, value: object) -> object:
        if value is None:
            return value
        if not isinstance(value, list) or not all(type(cpu) is int and cpu >= 0 for cpu in value):
            raise ValueError("must list CPU ids, whole numbers from 0 (e.g. [0] or [0, 1])")
        if len(set(value)) != len(value):
            raise ValueError("names a CPU twice; list each once")
        return value

    @field_validator("command")
    @classmethod
    def _program_first(cls, value: list[str]) -> list[str]:
        if value[0].startswith("-") or not value[0].strip():
            raise ValueError("the first item is the program to run (e.g. vllm), not a flag")
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not ENV_VAR_PATTERN.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name (letters, "
                                 "digits and _, not starting with a digit)")
        return value

    @field_validator("env_from")
    @classmethod
    def _env_from_names(cls, value: list[str]) -> list[str]:
        if not all(ENV_VAR_PATTERN.fullmatch(name) for name in value):
            raise ValueError("must list NAMES of environment variables such as HF_TOKEN (value "
                             "hidden); export the value in that variable")
        if len(set(value)) != len(value):
            raise ValueError("names a variable twice; list each once")
        return value

    @model_validator(mode="after")
    def _one_source_per_variable(self) -> LaunchSettings:
        both = sorted(set(self.env) & set(self.env_from))
        if both:
            raise ValueError(f"{both[0]} is in both env and env_from; keep it in one of them")
        return self


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
    # A local tokenizer.json (or the model directory holding it), relative to the config file:
    # prompts are built to exact token counts in it (tracker.targets.tokenizers); never fetched.
    tokenizer: str | None = Field(default=None, min_length=1)

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_is_a_local_path(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value):
            raise ValueError("must be a local path to a tokenizer.json (or the model directory "
                             "holding it), not a URL: nothing is downloaded at run time")
        if "\x00" in value or not value.strip():
            raise ValueError("must be a path to a tokenizer.json such as "
                             "models/llama3/tokenizer.json")
        return value

    @field_validator("model")
    @classmethod
    def _model_not_a_flag(cls, value: str) -> str:
        if value.startswith("-"):
            raise ValueError("a model id must not start with '-': it is passed to the server as "
                             "an argument and would be read as a flag; check the model id")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not ENV_VAR_PATTERN.fullmatch(value):
            raise ValueError(
                "must be the NAME of an environment variable such as TAOTOKEN_API_KEY, "
                "not a key (value hidden); export the key in that variable"
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


class CostSettings(_Strict):
    """What serving costs: a local server by the GPU hour (``usd_per_gpu_hour`` x ``gpus``), a
    gateway by the token (``usd_per_1m_input_tokens``, ``usd_per_1m_output_tokens``); one kind.
    ``as_params`` is what the runner puts in each workload's params, where
    ``tracker.metrics.compute_cost_metrics`` finds it."""

    usd_per_gpu_hour: PositiveFloat | None = None
    gpus: PositiveInt | None = None
    usd_per_1m_input_tokens: NonNegativeFloat | None = None
    usd_per_1m_output_tokens: NonNegativeFloat | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> CostSettings:
        local = {k: v for k, v in (("usd_per_gpu_hour", self.usd_per_gpu_hour),
                                   ("gpus", self.gpus)) if v is not None}
        gateway = {k: v for k, v in (("usd_per_1m_input_tokens", self.usd_per_1m_input_tokens),
                                     ("usd_per_1m_output_tokens", self.usd_per_1m_output_tokens))
                   if v is not None}
        if local and gateway:
            raise ValueError(
                f"mixes a GPU-hour price ({_pairs(local)}) with per-token prices "
                f"({_pairs(gateway)}); keep one kind: usd_per_gpu_hour and gpus for a server "
                "you run, usd_per_1m_input_tokens and usd_per_1m_output_tokens for a gateway")
        if local and len(local) < 2:
            missing = "gpus" if "gpus" not in local else "usd_per_gpu_hour"
            raise ValueError(f"a GPU-hour price needs both usd_per_gpu_hour and gpus (got "
                             f"{_pairs(local)}); add {missing}, e.g. {missing}: "
                             f"{'1' if missing == 'gpus' else '2.5'}")
        if gateway and len(gateway) < 2:
            missing = ("usd_per_1m_output_tokens" if "usd_per_1m_output_tokens" not in gateway
                       else "usd_per_1m_input_tokens")
            raise ValueError(f"a per-token price needs both usd_per_1m_input_tokens and "
                             f"usd_per_1m_output_tokens (got {_pairs(gateway)}); add {missing} "
                             "(0 if that side is free)")
        if not local and not gateway:
            raise ValueError("is empty; give usd_per_gpu_hour and gpus (a server you run) or "
                             "usd_per_1m_input_tokens and usd_per_1m_output_tokens (a gateway), "
                             "or remove the cost block")
        return self

    def as_params(self) -> dict[str, float | int]:
        return self.model_dump(exclude_none=True)


def _pairs(values: Mapping[str, object]) -> str:
    return ", ".join(f"{key}: {value}" for key, value in values.items())


class ServingConfig(_Strict):
    name: str = Field(pattern=NAME_PATTERN, max_length=NAME_MAX_CHARS)
    description: str = ""
    target: Target
    engine: EngineArgs = Field(default_factory=EngineArgs)
    cost: CostSettings | None = None  # None: no price, no cost metrics

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

SECRET_KEYS = frozenset({"bearer"})  # besides every name tracker.redaction.is_secret_name knows
_WHOLE_BEARER = re.compile(r"Bearer\s+\S+", re.IGNORECASE)  # the whole value is a credential
_BEARER = re.compile(r"\bBearer\s+[A-Za-z0-9._~+/\-]{16,}", re.IGNORECASE)  # not "Bearer tokens"
# Words that match the secret-name rule without naming a credential: a tokenizer, a token count.
_NOT_SECRET_WORDS = frozenset({"tokenizer", "tokenizers", "tokens"})
_SWITCH_WORDS = frozenset({"", "true", "false", "yes", "no", "on", "off", "none", "null"})
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@functools.cache
def _schema_keys() -> frozenset[str]:
    models: tuple[type[BaseModel], ...] = (ServingConfig, Target, EngineArgs, LaunchSettings,
                                           SimulatorSettings, CostSettings)
    return frozenset(name for model in models for name in model.model_fields)


def is_secret_key(key: str) -> bool:
    """A config key, environment variable or flag whose value would be a secret (``api_key``,
    ``HF_TOKEN``, ``--api-key``); our own keys, tokenizers and token counts are not."""
    name = key.lower().lstrip("-").replace("-", "_")
    if name.removeprefix("sim_") in _schema_keys():  # our keys (prefill_s_per_token, also as
        return False                                   # the simulator's --sim-* flags) are not
    words = "_".join(word for word in name.split("_") if word not in _NOT_SECRET_WORDS)
    return name in SECRET_KEYS or is_secret_name(words)


def is_plain_setting(value: object) -> bool:
    """A switch, a number or a path: a setting, never a key, whatever its name says
    (``TOKENIZERS_PARALLELISM: "false"``, ``--ssl-keyfile /etc/tls/key.pem``)."""
    if value is None or isinstance(value, bool | int | float):
        return True
    if not isinstance(value, str):
        return False
    text = value.strip()
    if text.lower() in _SWITCH_WORDS or _NUMBER.fullmatch(text):
        return True
    return text.startswith(("/", "~/", "./", "../"))


def looks_like_secret_value(text: str) -> bool:
    """A string shaped like an API key or token, whole or as one of its words."""
    text = text.strip()
    return contains_token(text) or _BEARER.search(text) is not None or \
        _WHOLE_BEARER.fullmatch(text) is not None


_FIX = ("secrets are never stored: export the key in an environment variable and name that "
        "variable in target.api_key_env (e.g. api_key_env: TAOTOKEN_API_KEY)")
_OWN_KEY = "; the key the tracker itself sends is named in target.api_key_env"
# The variable a server reads instead of a key-bearing flag (vLLM: VLLM_API_KEY; Hugging Face).
_FLAG_VARIABLES = {"api_key": "VLLM_API_KEY", "hf_token": "HF_TOKEN", "token": "HF_TOKEN"}
_ENV: Loc = ("target", "launch", "env")
_COMMAND: Loc = ("target", "launch", "command")
_EXTRA_ARGS: Loc = ("engine", "extra_args")


def _fix_for(loc: Loc, name: str) -> str:
    """How to pass the secret at ``loc`` (whose variable or flag is ``name``) by name instead."""
    if loc[:3] == _ENV:
        return (f"pass the variable through by name instead: export {name} in the tracker's "
                f"environment and list it in launch.env_from: [{name}]{_OWN_KEY}")
    if loc[:3] == _COMMAND or loc[:2] == _EXTRA_ARGS:
        variable = _FLAG_VARIABLES.get(name.lower().lstrip("-").replace("-", "_"))
        if variable is None:
            return ("remove it and pass the secret in an environment variable the server reads, "
                    f"named in launch.env_from: [VARIABLE]{_OWN_KEY}")
        return (f"remove the flag and pass the key by name: the server reads {variable}, so "
                f"export {variable} and list it in launch.env_from: [{variable}]{_OWN_KEY}")
    return _FIX


def _refused(path: Path, loc: Loc, lines: Mapping[Loc, int], what: str, name: str) -> Exception:
    return SecretInConfigError(f"{where(path, loc, lines)}: {format_loc(loc)}: {what} "
                               f"(value hidden); {_fix_for(loc, name)}")


def _refuse_secrets(node: Any, loc: Loc, path: Path, lines: Mapping[Loc, int]) -> None:
    """Refuse a literal key anywhere in a config (a secret must never reach the database), and
    a NUL character, which no command line or environment variable can carry."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            child = (*loc, str(key))
            if is_secret_key(str(key)) and not is_plain_setting(value):
                raise _refused(path, child, lines, "a literal secret is not allowed in a config",
                               str(key))
            _refuse_secrets(value, child, path, lines)
    elif isinstance(node, list):
        if loc == _COMMAND:
            _refuse_secret_flags(node, path, lines)
        for index, item in enumerate(node):
            _refuse_secrets(item, (*loc, index), path, lines)
    elif isinstance(node, str):
        if "\x00" in node:
            raise ConfigError(f"{where(path, loc, lines)}: {format_loc(loc)}: holds a NUL "
                              "character, which no command line or environment can carry; "
                              "remove it")
        if looks_like_secret_value(node):
            name = str(loc[-1]) if loc else ""
            raise _refused(path, loc, lines, "holds what looks like an API key or token", name)


def _refuse_secret_flags(command: list[Any], path: Path, lines: Mapping[Loc, int]) -> None:
    """``--api-key X``, ``--api-key=X``, ``--hf-token X`` in launch.command: the key is literal."""
    for index, item in enumerate(command):
        if not isinstance(item, str) or not item.startswith("-"):
            continue
        flag, equals, attached = item.partition("=")
        value: object = attached if equals else _value_after(command, index)
        if is_secret_key(flag) and not is_plain_setting(value):
            raise _refused(path, (*_COMMAND, index), lines,
                           f"{flag} with a literal value is not allowed in a config", flag)


def _value_after(command: list[Any], index: int) -> object:
    """The item after a flag when it is the flag's value (none when the next is a flag)."""
    following = command[index + 1] if index + 1 < len(command) else None
    return None if isinstance(following, str) and following.startswith("-") else following
