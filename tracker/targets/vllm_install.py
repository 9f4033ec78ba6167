"""Which vLLM a config will run on, found before anything starts, and its engine block checked
against that vLLM (the table and the check are ``tracker.inputs.vllm_args``).

- A server the tracker launches (``kind: vllm`` without ``base_url``): the installation that
  ``launch.command`` runs. The python of its ``vllm`` script (or the python the command names) is
  asked for the ``vllm`` distribution's version, in the server's own environment (~0.1 s: vLLM is
  not imported). A version the table does not know has its ``vllm serve`` flags read from the
  installation's argparse once (~15 s of CPU: vLLM is imported) and kept in
  ``$TRACKER_CACHE_DIR/vllm-flags/VERSION.json`` (default ``~/.cache/tracker``).
- An attached server: its ``/version``, before the first request.
- The simulator and other OpenAI-compatible targets: not a vLLM version, not checked.

A vLLM whose version cannot be read (no ``vllm`` on the PATH, a container command) is not
checked: its launch reports its own error.

``python -m tracker.targets.vllm_install PATH/TO/bin/vllm`` prints the table entry of that
installation (its flags, read from its argparse), for adding a version to the table.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

from tracker.eventloop import run_async
from tracker.http_client.client import strip_credentials
from tracker.inputs.configs import LaunchSettings, LoadedConfig
from tracker.inputs.vllm_args import (
    VllmFlags,
    VllmTarget,
    check_engine_args,
    find_known,
    parse_release,
    public_version,
)
from tracker.redaction import redact_one_line, say
from tracker.targets.launcher import build_server_env, fetch_version

log = logging.getLogger(__name__)
VERSION_TIMEOUT_S = 60.0
FLAGS_TIMEOUT_S = 600.0  # importing vLLM: ~15 s of CPU here, longer on a busy host
_PYTHON_NAME = re.compile(r"python[0-9.]*")
_SH_EXEC = re.compile(r"""^'''exec' "?([^"\s]+)""", re.MULTILINE)  # pip's launcher for long paths
_MARK = "TRACKER-VLLM-FLAGS "
_VERSION_PROGRAM = """\
import importlib.metadata as m
try:
    print(m.version("vllm"))
except m.PackageNotFoundError:
    pass
"""
# Run by the installation's python: every option of ``vllm serve``'s own parser, as JSON.
_FLAGS_PROGRAM = f"""\
import importlib.metadata, json
from vllm.entrypoints.cli.serve import ServeSubcommand
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
serve = ServeSubcommand().subparser_init(FlexibleArgumentParser(prog="vllm").add_subparsers())
options = {{}}
for action in serve._actions:
    for option in action.option_strings:
        if option.startswith("--") and option != "--help":
            choices = action.choices
            options[option] = None if choices is None else [str(c) for c in choices]
print({_MARK!r} + json.dumps({{"version": importlib.metadata.version("vllm"),
                               "options": options}}))
"""
_QUIET = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
          "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def check_vllm_engine(loaded: LoadedConfig) -> VllmTarget | None:
    """Refuse (``ConfigError``, exit 2) an engine block the vLLM that will run ``loaded`` does not
    take, and return that vLLM, or None when it is not a vLLM or its version cannot be read."""
    target = find_vllm_target(loaded)
    if target is not None:
        check_engine_args(loaded.config.engine, target, loaded.path)
    return target


def find_vllm_target(loaded: LoadedConfig) -> VllmTarget | None:
    """The vLLM ``loaded`` will run on: its launch command's installation, or the attached
    server's ``/version``, or None for the simulator, a gateway, or a version that cannot be
    read."""
    target = loaded.config.target
    if target.kind != "vllm":
        return None
    if target.base_url is not None:
        answer = run_async(fetch_version(target.base_url))
        if answer is None or not answer.startswith("vllm "):
            return None  # not saying, or not vLLM (the tracker's simulator says tracker-sim)
        version = answer.removeprefix("vllm ")
        where = strip_credentials(target.base_url)
        return VllmTarget(version, f"the server at {where}, by its /version", find_known(version))
    env = build_server_env(loaded)
    found = find_launch_python((target.launch or LaunchSettings()).command, env.get("PATH"))
    if found is None:
        return None
    program, python = found
    installed = read_installed_version(python, env)
    if installed is None:
        return None
    flags = find_known(installed) or load_installed_flags(python, installed, env)
    return VllmTarget(installed, f"the installation launch.command runs: {program}", flags)


def find_launch_python(command: Sequence[str], path: str | None) -> tuple[Path, Path] | None:
    """The launch command's vLLM program and the python that runs it: the first item that is a
    python, or a ``vllm`` script (its ``#!`` line). Wrappers such as ``taskset -c 0`` before it
    are skipped. None when there is neither."""
    for item in command:
        name = Path(item).name
        if _PYTHON_NAME.fullmatch(name):
            python = _which(item, path)
            return None if python is None else (python, python)
        if name == "vllm":
            script = _which(item, path)
            python = None if script is None else read_script_python(script, path)
            return None if script is None or python is None else (script, python)
    return None


def _which(program: str, path: str | None) -> Path | None:
    found = shutil.which(program, path=path)
    return Path(found) if found else None


def read_script_python(script: Path, path: str | None) -> Path | None:
    """The python of a console script: its ``#!`` line (``#!/usr/bin/env python3`` too), or the
    interpreter of pip's ``/bin/sh`` launcher for long paths, or None for anything else."""
    try:
        with script.open("rb") as file:
            head = file.read(1024).decode("utf-8", errors="replace")
    except OSError:
        return None
    if not head.startswith("#!"):
        return None
    words = head[2:].splitlines()[0].split()
    if words and Path(words[0]).name == "env" and len(words) > 1:
        words = words[1:]
    if words and _PYTHON_NAME.fullmatch(Path(words[0]).name):
        return _which(words[0], path)
    launcher = _SH_EXEC.search(head)
    return _which(launcher.group(1), path) if launcher else None


def read_installed_version(python: Path, env: Mapping[str, str]) -> str | None:
    """The ``vllm`` distribution's version where ``python`` runs with ``env`` (``0.32.0+cpu``),
    or None when it has none or cannot say."""
    try:
        done = subprocess.run([str(python), "-c", _VERSION_PROGRAM], env={**env, **_QUIET},
                              capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("the vLLM version of %s could not be read: %s", python, exc)
        return None
    lines = done.stdout.split()
    version = lines[-1] if done.returncode == 0 and lines else None
    return version if version is not None and parse_release(version) is not None else None


def flags_cache_dir() -> Path:
    base = os.environ.get("TRACKER_CACHE_DIR") or Path.home() / ".cache" / "tracker"
    return Path(base).expanduser() / "vllm-flags"


def load_installed_flags(python: Path, version: str, env: Mapping[str, str]) -> VllmFlags | None:
    """``version``'s flags: from the cache, else read from the installation and cached, or None
    (with a warning) when they cannot be read, so only the retired flags are checked."""
    path = flags_cache_dir() / (re.sub(r"[^A-Za-z0-9._+-]", "_", version) + ".json")
    try:
        return parse_flags(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not cached yet, or unreadable: read it again
    log.warning("reading vLLM %s's flags from its installation (%s), once per version", version,
                python)
    try:
        body = read_installed_flags(python, env)
    except RuntimeError as exc:
        log.warning("%s; its engine flags are not checked", exc)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(body, sort_keys=True), encoding="utf-8")
    partial.replace(path)
    return parse_flags(body)


def read_installed_flags(python: Path, env: Mapping[str, str] | None = None) -> dict[str, object]:
    """``{"version", "options": {flag: choices or None}}`` from ``vllm serve``'s own parser, as
    the installation of ``python`` builds it. It raises ``RuntimeError`` when it cannot."""
    try:
        done = subprocess.run([str(python), "-c", _FLAGS_PROGRAM],
                              env={**(os.environ if env is None else env), **_QUIET},
                              capture_output=True, text=True, timeout=FLAGS_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"vLLM's flags could not be read with {python}: {exc}") from None
    for line in done.stdout.splitlines():
        if line.startswith(_MARK):
            body: dict[str, object] = json.loads(line.removeprefix(_MARK))
            return body
    last = [line for line in done.stderr.splitlines() if line.strip()][-1:] or ["no output"]
    raise RuntimeError(f"vLLM's flags could not be read with {python} (exit {done.returncode}: "
                       f"{redact_one_line(last[0])[:300]})")


def parse_flags(body: Mapping[str, object]) -> VllmFlags:
    options = body["options"]
    if not isinstance(options, dict):
        raise TypeError("options must be a mapping")
    return VllmFlags(str(body["version"]), {
        str(flag): None if choices is None else tuple(str(c) for c in choices)
        for flag, choices in options.items()})


def render_entry(flags: VllmFlags) -> str:
    """The table entry of ``flags`` as Python source for tracker/inputs/vllm_args.py."""
    suffix = "_".join(public_version(flags.version).split(".")[:2])
    free = sorted(flag for flag, choices in flags.options.items() if choices is None)
    lines = [f"# vLLM {flags.version}: {len(flags.options)} options, read from its argparse",
             f'_FREE_{suffix} = """', *_wrap(" ".join(free), 99), '"""',
             f"_CHOICES_{suffix}: Mapping[str, tuple[str, ...]] = {{"]
    for flag, choices in sorted(flags.options.items()):
        if choices is None:
            continue
        key = json.dumps(flag)
        items = ", ".join(json.dumps(choice) for choice in choices)
        if len(f"    {key}: ({items},),") <= 100:
            lines.append(f"    {key}: ({items}{',' if len(choices) == 1 else ''}),")
        else:
            lines += [f"    {key}: (", *("        " + line for line in _wrap(items + ",", 92)),
                      "    ),"]
    return "\n".join([*lines, "}"])


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        say("usage: python -m tracker.targets.vllm_install PATH/TO/bin/vllm", err=True)
        return 2
    found = find_launch_python([argv[0]], os.environ.get("PATH"))
    if found is None:
        say(f"{argv[0]}: not a vllm script or a python", err=True)
        return 2
    say(render_entry(parse_flags(read_installed_flags(found[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
