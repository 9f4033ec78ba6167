"""``python -m tracker.sim MODEL [vLLM flags]``: the simulator with ``vllm serve``'s command line.

The vLLM launcher starts it through the very code path that starts ``vllm serve``: the engine
args arrive as vLLM flags (``--block-size 16 --gpu-memory-utilization 0.9 --quantization awq
--enable-prefix-caching ...``), the simulator's own settings as ``--sim-*`` flags, and it prints
the startup lines a vLLM server prints (weights, KV-cache memory and tokens, maximum concurrency,
the server version and address), so the launcher's log parsing is exercised too. Flags vLLM has
that the simulator does not model are accepted and named in a warning. The structured ones take
vLLM's forms: ``--speculative-config JSON``, ``--lora-modules name=path ...`` (or JSON objects
with ``name`` and ``path``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

import tracker
from tracker.errors import ExitCode, TrackerError
from tracker.inputs.configs import EngineArgs, ServingConfig, SimulatorSettings
from tracker.metrics import GIB
from tracker.redaction import say
from tracker.sim.kvcache import DEFAULT_MAX_MODEL_LEN, KvCacheSpec, compute_kv_cache_spec
from tracker.sim.server import serve_forever

_ENGINE_FLAGS = [name for name in EngineArgs.model_fields if name != "extra_args"]
_SWITCHES = frozenset({"enable_prefix_caching", "enable_lora"})
_SIM_FLAGS = list(SimulatorSettings.model_fields)


def log_line(level: str, text: str) -> str:
    """A line in vLLM's log format: ``INFO 11-20 10:00:00 [where] text``."""
    stamp = datetime.now().strftime("%m-%d %H:%M:%S")
    return f"{level} {stamp} [tracker-sim pid={os.getpid()}] {text}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tracker.sim", description=__doc__)
    parser.add_argument("model_tag", nargs="?", metavar="MODEL", help="model id (as vllm serve)")
    parser.add_argument("--model", dest="model_flag", help="model id (instead of MODEL)")
    parser.add_argument("--served-model-name", help="the id /v1/models lists (default: MODEL)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    for name in _ENGINE_FLAGS:
        flag = "--" + name.replace("_", "-")
        if name in _SWITCHES:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None)
        elif name == "lora_modules":
            parser.add_argument(flag, dest=name, nargs="+", default=None)
        else:
            parser.add_argument(flag, dest=name, default=None)
    for name in _SIM_FLAGS:
        parser.add_argument("--sim-" + name.replace("_", "-"), dest=f"sim_{name}", default=None)
    return parser


def _lora_modules(items: list[str]) -> dict[str, str]:
    """vLLM's ``--lora-modules``: each ``name=path`` or a JSON object with name and path."""
    modules: dict[str, str] = {}
    for item in items:
        if item.startswith("{"):
            found = json.loads(item)
            modules[str(found["name"])] = str(found["path"])
        else:
            name, _, path = item.partition("=")
            modules[name] = path
    return modules


def _coerce(value: object) -> object:
    """A flag's text as the number it spells, so ``--block-size 16`` meets ``Literal[16]``.

    A JSON object's text (``--speculative-config``) becomes the object, and ``--lora-modules``
    becomes its mapping."""
    if isinstance(value, list):
        return _lora_modules([str(item) for item in value])
    if not isinstance(value, str):
        return value
    if value.startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


def parse_serving_config(argv: Sequence[str]) -> tuple[ServingConfig, str, int, list[str]]:
    """The flags as (config, host, port, flags not modelled). A bad value raises ``ValueError``."""
    args, unknown = build_parser().parse_known_args(list(argv))
    model = args.served_model_name or args.model_flag or args.model_tag
    if not model:
        raise ValueError("no model: give it as `python -m tracker.sim MODEL` or --model MODEL")
    engine = {n: _coerce(getattr(args, n)) for n in _ENGINE_FLAGS if getattr(args, n) is not None}
    simulator = {n: _coerce(getattr(args, f"sim_{n}")) for n in _SIM_FLAGS
                 if getattr(args, f"sim_{n}") is not None}
    body: dict[str, Any] = {"name": "tracker-sim", "engine": engine,
                            "target": {"kind": "sim", "model": model, "simulator": simulator}}
    try:
        config = ServingConfig.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"{where}: {first['msg']} (got {first.get('input')!r})") from None
    return config, args.host, args.port, unknown


def render_startup_lines(config: ServingConfig, kv: KvCacheSpec, load_s: float) -> list[str]:
    max_model_len = config.engine.max_model_len or DEFAULT_MAX_MODEL_LEN
    concurrency = kv.capacity_tokens / max_model_len
    engine_args = config.engine.model_dump(exclude_none=True, exclude={"extra_args"})
    return [
        log_line("INFO", f"tracker-sim API server version {tracker.__version__} "
                         "(a simulator of vLLM's OpenAI-compatible server)"),
        log_line("INFO", f"non-default args: {engine_args}"),
        log_line("INFO", f"Model loading took {kv.weights_bytes / GIB:.2f} GiB memory and "
                         f"{load_s:.2f} seconds"),
        log_line("INFO", f"Available KV cache memory: {kv.capacity_bytes / GIB:.2f} GiB"),
        log_line("INFO", f"GPU KV cache size: {kv.capacity_tokens:,} tokens"),
        log_line("INFO", f"Maximum concurrency for {max_model_len:,} tokens per request: "
                         f"{concurrency:.2f}x"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    started_s = time.monotonic()
    try:
        config, host, port, unknown = parse_serving_config(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        say(log_line("ERROR", f"bad arguments: {exc}"), err=True)
        return ExitCode.USAGE
    if unknown:
        say(log_line("WARNING", f"flags the simulator does not model: {' '.join(unknown)}"))
    try:
        kv = compute_kv_cache_spec(config.engine, config.simulator)
        for line in render_startup_lines(config, kv, time.monotonic() - started_s):
            say(line)

        def ready(base_url: str) -> None:
            say(log_line("INFO", f"Starting tracker-sim API server on {base_url}"))
            say(log_line("INFO", "Application startup complete."))

        serve_forever(config, host, port, on_ready=ready)
    except TrackerError as exc:
        say(log_line("ERROR", f"engine failed to start: {exc}"), err=True)
        return ExitCode.NOT_MEASURED
    say(log_line("INFO", "Shutting down."))
    return 0
