"""A small subset of JSON Schema, enough to say what a quality item's JSON answer must be.

Keywords: ``type`` (object, array, string, number, integer, boolean, null, or a list of them),
``properties``, ``required``, ``additionalProperties`` (true/false or a schema), ``items``,
``enum``, ``const``, ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``,
``minLength``, ``maxLength``, ``pattern``, ``minItems``, ``maxItems``. Any other keyword is refused
when the set is loaded (``check_schema``), so a schema never silently checks less than it says.
As in JSON Schema, ``true`` is a boolean and not an integer, and ``1.0`` is an integer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
    "pattern", "minItems", "maxItems", "description", "title",
})
TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")


def check_schema(schema: object, where: str = "schema") -> None:
    """Raise ValueError naming the place of the first keyword or value this subset cannot check."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where}: a schema must be a JSON object (got {type(schema).__name__})")
    unknown = sorted(set(schema) - KEYWORDS)
    if unknown:
        raise ValueError(f"{where}: unsupported keyword {unknown[0]!r}; supported: "
                         f"{', '.join(sorted(KEYWORDS))}")
    types = schema.get("type")
    for name in [types] if isinstance(types, str) else (types or []):
        if name not in TYPES:
            raise ValueError(f"{where}.type: unknown type {name!r}; one of {', '.join(TYPES)}")
    for key, child in (schema.get("properties") or {}).items():
        check_schema(child, f"{where}.properties.{key}")
    for key in ("items", "additionalProperties"):
        child = schema.get(key)
        if child is not None and not isinstance(child, bool):
            check_schema(child, f"{where}.{key}")
    if "pattern" in schema:
        try:
            re.compile(str(schema["pattern"]))
        except re.error as exc:
            raise ValueError(f"{where}.pattern: not a regular expression: {exc}") from None


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    checks: dict[str, Callable[[Any], bool]] = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
    }
    return checks[name](value)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: booleans are not numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def find_violation(value: Any, schema: Mapping[str, Any], where: str = "$") -> str | None:
    """The first way ``value`` breaks ``schema`` (a checked schema), or None when it matches."""
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_is_type(value, name) for name in names):
            return f"{where}: expected {' or '.join(names)}, got {type(value).__name__}"
    if "const" in schema and not _same(value, schema["const"]):
        return f"{where}: expected {schema['const']!r}, got {value!r}"
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        return f"{where}: {value!r} is not one of {schema['enum']!r}"
    for check in (_check_number, _check_string, _check_array, _check_object):
        problem = check(value, schema, where)
        if problem is not None:
            return problem
    return None


def _check_number(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    bounds: tuple[tuple[str, Callable[[float, float], bool]], ...] = (
        ("minimum", lambda v, b: v >= b), ("maximum", lambda v, b: v <= b),
        ("exclusiveMinimum", lambda v, b: v > b), ("exclusiveMaximum", lambda v, b: v < b))
    for key, holds in bounds:
        if key in schema and not holds(value, schema[key]):
            return f"{where}: {value!r} breaks {key} {schema[key]!r}"
    return None


def _check_string(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    if not isinstance(value, str):
        return None
    if "minLength" in schema and len(value) < schema["minLength"]:
        return f"{where}: shorter than {schema['minLength']} characters"
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return f"{where}: longer than {schema['maxLength']} characters"
    if "pattern" in schema and re.search(str(schema["pattern"]), value) is None:
        return f"{where}: {value!r} does not match {schema['pattern']!r}"
    return None


def _check_array(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    if not isinstance(value, list):
        return None
    if "minItems" in schema and len(value) < schema["minItems"]:
        return f"{where}: fewer than {schema['minItems']} items"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return f"{where}: more than {schema['maxItems']} items"
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            problem = find_violation(item, items, f"{where}[{index}]")
            if problem is not None:
                return problem
    return None


def _check_object(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    if not isinstance(value, dict):
        return None
    for key in schema.get("required", ()):
        if key not in value:
            return f"{where}: missing required key {key!r}"
    properties: Mapping[str, Any] = schema.get("properties") or {}
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        child = properties.get(key)
        if child is None and extra is False:
            return f"{where}: unexpected key {key!r}"
        if child is None and isinstance(extra, Mapping):
            child = extra
        if child is not None:
            problem = find_violation(item, child, f"{where}.{key}")
            if problem is not None:
                return problem
    return None
