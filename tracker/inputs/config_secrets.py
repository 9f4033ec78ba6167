"""No secret in a serving config: a literal key or token anywhere is refused at load, with the
file, line and key path, the value hidden, and the fix (name the variable that holds it).

Split from ``tracker.inputs.configs`` (which calls ``refuse_secrets`` before validating a file).
``is_secret_key`` and ``looks_like_secret_value`` are also the config diff's rule for what it
hides.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tracker.errors import ConfigError, SecretInConfigError
from tracker.inputs.speculative import SpeculativeConfig
from tracker.inputs.yamlfile import Loc, format_loc, where
from tracker.redaction import contains_token, is_secret_name

SECRET_KEYS = frozenset({"bearer"})  # besides every name tracker.redaction.is_secret_name knows
_WHOLE_BEARER = re.compile(r"Bearer\s+\S+", re.IGNORECASE)  # the whole value is a credential
_BEARER = re.compile(r"\bBearer\s+[A-Za-z0-9._~+/\-]{16,}", re.IGNORECASE)  # not "Bearer tokens"
# Words that match the secret-name rule without naming a credential: a tokenizer, a token count.
_NOT_SECRET_WORDS = frozenset({"tokenizer", "tokenizers", "tokens"})
_SWITCH_WORDS = frozenset({"", "true", "false", "yes", "no", "on", "off", "none", "null"})
NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@functools.cache
def _schema_keys() -> frozenset[str]:
    from tracker.inputs import configs  # the schema imports this module: read it once, lazily

    models: tuple[type[BaseModel], ...] = (
        configs.ServingConfig, configs.Target, configs.EngineArgs, configs.LaunchSettings,
        configs.SimulatorSettings, configs.CostSettings, SpeculativeConfig)
    return frozenset(name for model in models for name in model.model_fields)


def is_secret_key(key: str) -> bool:
    """A config key, environment variable or flag whose value would be a secret (``api_key``,
    ``HF_TOKEN``, ``--api-key``). Our own keys, tokenizers and token counts are not."""
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
    if text.lower() in _SWITCH_WORDS or NUMBER.fullmatch(text):
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


def refuse_secrets(node: Any, loc: Loc, path: Path, lines: Mapping[Loc, int]) -> None:
    """Refuse a literal key anywhere in a config (a secret must never reach the database), and
    a NUL character, which no command line or environment variable can carry."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            child = (*loc, str(key))
            if is_secret_key(str(key)) and not is_plain_setting(value):
                raise _refused(path, child, lines, "a literal secret is not allowed in a config",
                               str(key))
            refuse_secrets(value, child, path, lines)
    elif isinstance(node, list):
        if loc == _COMMAND:
            _refuse_secret_flags(node, path, lines)
        for index, item in enumerate(node):
            refuse_secrets(item, (*loc, index), path, lines)
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
