"""Serving configs: what is served, how, and with which engine args, versioned by content.

A config's version is the sha256 of its canonical form: the validated config with defaults left
out, keys sorted, compact JSON. Key order, comments, formatting and the free-text ``description``
do not change it. Any engine arg, the target or the model does. A file is refused for a literal
secret before it is validated (``tracker.inputs.config_secrets``).
"""

from __future__ import annotations

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

from tracker.inputs.adapters import check_lora_modules
from tracker.inputs.config_secrets import NUMBER, refuse_secrets
from tracker.inputs.speculative import SpeculativeConfig
from tracker.inputs.vllm_args import KV_CACHE_DTYPES, LORA_RANKS
from tracker.inputs.yamlfile import read_yaml_mapping, validate_model

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
    """vLLM engine args (``None`` leaves the engine's own default). Unknown flags go in extra_args.

    The schema takes what the vLLM versions the tracker knows take (tracker.inputs.vllm_args).
    Whether the vLLM that will run the config has a flag, and takes a value, is checked against
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
    # speculative decoding (tracker.inputs.speculative) and LoRA adapters (tracker.inputs.adapters)
    speculative_config: SpeculativeConfig | None = None
    enable_lora: bool | None = None
    max_loras: PositiveInt | None = None  # adapters in one batch (GPU slots); vLLM's default: 1
    max_lora_rank: PositiveInt | None = None  # one of LORA_RANKS; vLLM's default: 16
    lora_modules: dict[str, str] | None = None  # adapter name (a request's model) -> its path
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

    @field_validator("max_lora_rank")
    @classmethod
    def _max_lora_rank(cls, value: int | None) -> int | None:
        if value is not None and str(value) not in LORA_RANKS:
            raise ValueError(f"must be one of {', '.join(LORA_RANKS)}")
        return value

    @field_validator("lora_modules")
    @classmethod
    def _lora_modules(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return None if value is None else check_lora_modules(value)

    @model_validator(mode="after")
    def _lora_needs_enabling(self) -> EngineArgs:
        set_keys = [k for k in ("max_loras", "max_lora_rank", "lora_modules")
                    if getattr(self, k) is not None]
        if set_keys and self.enable_lora is not True:
            raise ValueError(f"{set_keys[0]} needs enable_lora: true (vLLM serves LoRA adapters "
                             "only with --enable-lora)")
        return self

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
        return [*(EngineFlag(key, key, tuple(self._typed_flag(key, value)))
                  for key, value in values.items()),
                *(EngineFlag(f"extra_args.{key}", key, tuple(_flag(key, value)))
                  for key, value in sorted(self.extra_args.items()))]


    def _typed_flag(self, key: str, value: Any) -> list[str]:
        """A typed key's flags: the structured ones as vLLM takes them (``--speculative-config
        JSON``, ``--lora-modules name=path ...``), the rest as any flag."""
        if key == "speculative_config" and self.speculative_config is not None:
            return ["--speculative-config", self.speculative_config.as_flag_value()]
        if key == "lora_modules":
            return ["--lora-modules", *(f"{name}={path}" for name, path in sorted(value.items()))]
        return _flag(key, value)


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
    return not text.startswith("-") or bool(NUMBER.fullmatch(text))


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
    """The embedded simulator's performance model (seconds per unit of work). See tracker.sim."""

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
    # speculative decoding: the first draft token's chance of acceptance (None: the method's own,
    # tracker.sim.speculative); LoRA: loading an adapter into a free slot, and each adapter's
    # share of a step (tracker.sim.lora)
    spec_acceptance: float | None = Field(default=None, ge=0, le=1)
    lora_load_s: NonNegativeFloat = 0.025
    lora_s_per_adapter: NonNegativeFloat = 2e-4


class Target(_Strict):
    kind: Literal["sim", "vllm", "openai"]
    model: str = Field(min_length=1)
    base_url: str | None = Field(default=None, pattern=r"^https?://")
    api_key_env: str | None = None
    launch: LaunchSettings | None = None
    simulator: SimulatorSettings | None = None
    # A local tokenizer.json (or the model directory holding it), relative to the config file:
    # prompts are built to exact token counts in it (tracker.targets.model_tokenizer); never fetched.
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
    gateway by the token (``usd_per_1m_input_tokens``, ``usd_per_1m_output_tokens``), not both.
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
    refuse_secrets(data, (), file, lines)
    config = validate_model(ServingConfig, data, file, lines)
    return build_loaded_config(config, str(file))


def build_loaded_config(config: ServingConfig, path: str) -> LoadedConfig:
    canonical = compute_canonical(config)
    return LoadedConfig(config, compute_version(canonical), canonical, path)
