"""Docstrings read as plain sentences, as the house style's anchors do (httpx, pyperf, asv: 0.0 to
0.1 semicolons per 1,000 docstring characters), not as clauses chained with semicolons."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tracker"
MAX_SEMICOLONS_PER_1000 = 0.3  # a literal message or code example may hold one


def _docstrings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return [text for node in ast.walk(tree) if isinstance(node, kinds)
            if (text := ast.get_docstring(node)) is not None]


def test_docstrings_are_sentences_not_semicolon_chains() -> None:
    texts = {path: _docstrings(path) for path in sorted(PACKAGE.rglob("*.py"))}
    characters = sum(len(text) for found in texts.values() for text in found)
    semicolons = {path.relative_to(PACKAGE): count for path, found in texts.items()
                  if (count := sum(text.count(";") for text in found))}
    rate = 1000 * sum(semicolons.values()) / characters
    worst = sorted(semicolons.items(), key=lambda item: -item[1])[:5]
    assert characters > 100_000  # the docstrings were found
    assert rate <= MAX_SEMICOLONS_PER_1000, (
        f"{rate:.2f} semicolons per 1,000 docstring characters (most in {worst}): write the "
        "clauses as sentences")
