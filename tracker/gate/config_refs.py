"""Naming a config for ``tracker diff`` and ``tracker gate``: a file, a git ref or a stored version.

A config is named by a file (``configs/prod.yaml``), a git ref (``main:configs/prod.yaml``, read
with ``git show``), or a stored version (``NAME@VERSION`` or a version prefix of 6+ hex digits).
Files and git refs go through the same validation as ``tracker run`` (a literal secret is
refused with its value hidden). The diff of two is ``tracker.inputs.config_diff``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tracker.errors import ConfigError, TrackerError
from tracker.inputs.configs import (
    LoadedConfig,
    ServingConfig,
    build_loaded_config,
    load_config,
)
from tracker.inputs.yamlfile import MAX_YAML_BYTES

VERSION_REF = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]*@)?[0-9a-fA-F]{6,64}$")
GIT_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class ConfigSide:
    """One side of a diff: where it came from and the validated config."""

    label: str  # as the user named it
    loaded: LoadedConfig

    @property
    def title(self) -> str:
        return f"{self.label} ({self.loaded.config.name}@{self.loaded.short_version})"


def load_config_ref(ref: str, db_url: str | None = None) -> ConfigSide:
    """A config named by a file, a git ``REV:PATH`` or a stored version."""
    if Path(ref).is_file():
        return ConfigSide(ref, load_config(ref))
    if VERSION_REF.match(ref):
        return ConfigSide(ref, _load_stored(ref, db_url))
    if ":" in ref:
        return ConfigSide(ref, _load_git(ref))
    raise ConfigError(f"{ref}: no such file; name a config by a file, a git ref such as "
                      "main:configs/prod.yaml, or a stored version (NAME@VERSION or 6+ hex digits)")


def _load_stored(ref: str, db_url: str | None) -> LoadedConfig:
    from sqlalchemy.orm import Session

    from tracker.store.db import open_store, resolve_db_url
    from tracker.store.regressions import fetch_config_version

    engine = open_store(resolve_db_url(db_url))
    try:
        with Session(engine) as session:
            name, row = fetch_config_version(session, ref)
    finally:
        engine.dispose()
    config = ServingConfig.model_validate(dict(row.canonical))
    loaded = build_loaded_config(config, f"{name}@{row.short_version}")
    if loaded.version != row.version:  # stored under an older schema: say so, don't guess
        raise ConfigError(f"{ref}: the stored body of {name}@{row.short_version} no longer "
                          "validates to the same version; diff the files instead")
    return loaded


def _load_git(ref: str) -> LoadedConfig:
    if ref.startswith("-"):  # git would read it as an option (--output=FILE writes a file)
        raise ConfigError(f"{ref}: a git ref must not start with '-'; name it as REV:PATH, e.g. "
                          "main:configs/prod.yaml")
    git = shutil.which("git")
    if git is None:
        raise ConfigError(f"{ref}: reading a git ref needs git on PATH; install git or give a file")
    try:
        shown = subprocess.run([git, "show", "--end-of-options", ref], capture_output=True,
                               timeout=GIT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{ref}: `git show` took over {GIT_TIMEOUT_S:.0f} s") from None
    if shown.returncode != 0:
        lines = shown.stderr.decode("utf-8", "replace").strip().splitlines()
        problem = lines[0] if lines else "no output"
        raise ConfigError(f"{ref}: `git show {ref}` failed ({problem}); check the revision and "
                          "the path (relative to the repository root)")
    if len(shown.stdout) > MAX_YAML_BYTES:
        raise ConfigError(f"{ref}: the file is {len(shown.stdout)} bytes, over the limit of "
                          f"{MAX_YAML_BYTES} bytes (1 MiB) for a serving config file; refused: "
                          "check the revision and the path")
    name = Path(ref.split(":", 1)[1]).name or "config.yaml"
    with tempfile.TemporaryDirectory(prefix="tracker-diff-") as folder:
        path = Path(folder) / name
        path.write_bytes(shown.stdout)
        try:
            loaded = load_config(path)
        except TrackerError as exc:  # name the git ref, not the temporary file
            raise type(exc)(str(exc).replace(str(path), ref)) from None
    return LoadedConfig(loaded.config, loaded.version, loaded.canonical, ref)
