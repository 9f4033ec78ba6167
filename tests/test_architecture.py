"""Imports follow the pipeline: each package imports only packages of earlier stages.

    base (errors, redaction, results, metrics, eventloop, jsontext)
      → quality → inputs → ingest → http_client → load → telemetry → sim → targets → runner → store
      → analysis → pipeline → demo → gate → bisection → reports → scheduling → dashboard → mcp → cli

Lazy imports inside functions and ``TYPE_CHECKING`` imports count: a dependency is a dependency.
Besides the order: ``analysis`` and ``results`` are pure (no I/O library, no store, no network),
so the one place that decides "regression" can be tested on literal series.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tracker"
BASE = ("errors", "redaction", "results", "metrics", "eventloop", "jsontext")
STAGES = ("quality", "inputs", "ingest", "http_client", "load", "telemetry", "sim", "targets",
          "runner", "store", "analysis", "pipeline", "demo", "gate", "bisection",
          "reports", "scheduling", "dashboard", "mcp", "cli")
RANK = {**dict.fromkeys(BASE, 0), **{name: rank for rank, name in enumerate(STAGES, start=1)},
        "__main__": len(STAGES) + 1}  # python -m tracker: the command line's entry
# What a pure module may import: nothing that reaches a file, a socket, a process or the store.
IO_LIBRARIES = frozenset({
    "aiohttp", "asyncio", "http", "psycopg", "pynvml", "requests", "socket", "sqlalchemy",
    "ssl", "streamlit", "subprocess", "urllib", "uvloop", "yaml", "alembic", "apscheduler",
    "shutil", "tempfile", "sqlite3", "threading",
})
PURE = {"analysis": frozenset({*BASE, "analysis", "inputs"}), "results": frozenset({"results"})}


@dataclass(frozen=True, slots=True)
class Import:
    module: str  # the importing module, e.g. tracker.load.generator
    line: int
    target: str  # the imported module, e.g. tracker.store.db or sqlalchemy.orm


def stage_of(module: str) -> str:
    """``tracker.load.generator`` → ``load``; a top-level module is its own stage."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tracker"


def find_imports(module: str, source: str) -> Iterator[Import]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield Import(module, node.lineno, node.module)
            if node.module == "tracker":  # from tracker import redaction
                for alias in node.names:
                    yield Import(module, node.lineno, f"tracker.{alias.name}")


def check_import(found: Import) -> str | None:
    """Why this import breaks the layering, or None when it is allowed."""
    source = stage_of(found.module)
    if found.target.startswith("tracker."):
        target = stage_of(found.target)
        if source == target or source == "tracker" or target == "tracker":
            return None
        if source in PURE and target not in PURE[source]:
            return f"{source} is pure and may import only {sorted(PURE[source])}"
        if RANK.get(target, 0) > RANK.get(source, 0):
            return f"{source} (a stage before {target}) must not import {target}"
        return None
    root = found.target.split(".")[0]
    if source in PURE and root in IO_LIBRARIES:
        return f"{source} is pure: no I/O library ({root})"
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_package_is_placed_in_the_pipeline() -> None:
    stages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert stages <= set(STAGES), f"place {sorted(stages - set(STAGES))} in STAGES"
    assert modules <= set(BASE), f"a new top-level module {sorted(modules - set(BASE))}: put it " \
                                 "in a stage's package, or add it to BASE if every stage needs it"


def test_imports_go_one_way_through_the_pipeline() -> None:
    broken = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        for found in find_imports(module, path.read_text(encoding="utf-8")):
            why = check_import(found)
            if why is not None:
                broken.append(f"{path.relative_to(PACKAGE.parent)}:{found.line}: imports "
                              f"{found.target}: {why}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(("module", "source", "why"), [
    ("tracker.store.runs", "from tracker.analysis import compare_samples",
     "store (a stage before analysis) must not import analysis"),
    ("tracker.inputs.configs", "def f():\n    from tracker.store.db import open_store",
     "inputs (a stage before store) must not import store"),
    ("tracker.load.generator", "from tracker import runner", "load (a stage before runner)"),
    ("tracker.analysis.compare", "import sqlalchemy.orm", "analysis is pure: no I/O library"),
    ("tracker.analysis.compare", "from tracker.store.db import open_store", "analysis is pure"),
    ("tracker.results", "from tracker.metrics import REGISTRY", "results is pure"),
    ("tracker.gate.gating", "from tracker.cli.output import write_text",
     "gate (a stage before cli) must not import cli"),
])
def test_a_forbidden_import_is_reported(module: str, source: str, why: str) -> None:
    reasons = [check_import(found) for found in find_imports(module, source)]
    assert any(reason is not None and why in reason for reason in reasons), reasons


@pytest.mark.parametrize(("module", "source"), [
    ("tracker.gate.gating", "from tracker.analysis import compare_samples"),
    ("tracker.cli.main", "from tracker.store.db import open_store"),
    ("tracker.analysis.attribution", "from tracker.inputs.config_diff import Change"),
    ("tracker.load.generator", "from tracker.errors import StoreError\nimport asyncio"),
])
def test_an_import_down_the_pipeline_is_allowed(module: str, source: str) -> None:
    assert [check_import(found) for found in find_imports(module, source)] == \
        [None] * len(list(find_imports(module, source)))


def test_every_package_ships_in_the_wheel() -> None:
    # pyproject lists the packages one by one: a new package left out installs from a checkout
    # (editable) and is missing from the wheel, which fails only where users install it
    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(PACKAGE.parent).parts)
             for init in PACKAGE.rglob("__init__.py") if "__pycache__" not in init.parts}
    assert found <= listed, f"add {sorted(found - listed)} to pyproject.toml's packages"
