"""Read a YAML file into a validated pydantic model, with errors that name the file and line."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ValidationError

from tracker.errors import ConfigError

ModelT = TypeVar("ModelT", bound=BaseModel)
Loc = tuple[str | int, ...]


def read_yaml_mapping(path: Path, what: str) -> tuple[dict[str, Any], dict[Loc, int]]:
    """Parse ``path`` as a YAML mapping; return it and the line number of every key path."""
    text = _read_text(path, what)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}; fix the syntax on that line") from None
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise ConfigError(f"{path}: a {what} must be a YAML mapping of keys to values (got {got})")
    lines: dict[Loc, int] = {}
    if node is not None:
        _collect_lines(node, (), lines)
    return data, lines


def _read_text(path: Path, what: str) -> str:
    if not path.exists():
        raise ConfigError(f"{path}: {what} file not found; check the path")
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, expected a {what} YAML file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} file: {exc.strerror}") from None


def _collect_lines(node: yaml.Node, loc: Loc, lines: dict[Loc, int]) -> None:
    lines[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = (*loc, str(key_node.value))
            lines[key] = key_node.start_mark.line + 1
            _collect_lines(value_node, key, lines)
            lines[key] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _collect_lines(item, (*loc, index), lines)


def format_loc(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def line_of(loc: Loc, lines: Mapping[Loc, int]) -> int | None:
    """The line of the deepest key of ``loc`` that exists in the file."""
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def where(path: Path, loc: Loc, lines: Mapping[Loc, int]) -> str:
    line = line_of(loc, lines)
    return f"{path}:{line}" if line is not None else str(path)


def validate_model(
    model: type[ModelT], data: Mapping[str, Any], path: Path, lines: Mapping[Loc, int]
) -> ModelT:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe_validation_error(exc, model, path, lines)) from None


def _describe_validation_error(exc: ValidationError, model: type[BaseModel], path: Path,
                               lines: Mapping[Loc, int]) -> str:
    errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    loc: Loc = _clean_loc(first["loc"])
    message = _describe_one(first)
    if first["type"] == "extra_forbidden":
        message += _did_you_mean(model, loc, errors)
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    suffix = more if len(errors) > 1 else ""
    return f"{where(path, loc, lines)}: {format_loc(loc)}: {message}{suffix}"


def _clean_loc(loc: Any) -> Loc:
    return tuple(p for p in loc if not _is_union_tag(p))


def _did_you_mean(model: type[BaseModel], loc: Loc, errors: list[Any]) -> str:
    """For a misspelt key: the missing key at the same level it resembles, else a known key."""
    missing = [str(_clean_loc(e["loc"])[-1]) for e in errors
               if e["type"] == "missing" and _clean_loc(e["loc"])[:-1] == loc[:-1]]
    close = difflib.get_close_matches(str(loc[-1]), missing, n=1) or \
        difflib.get_close_matches(str(loc[-1]), sorted(_keys_at(model, loc[:-1])), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _keys_at(model: type[BaseModel], loc: Loc) -> set[str]:
    """The keys the schema allows at ``loc`` (list indices skipped)."""
    models = [model]
    for part in loc:
        if isinstance(part, int):
            continue
        models = [m for parent in models if part in parent.model_fields
                  for m in _models_in(parent.model_fields[part].annotation)]
    return {name for m in models for name in m.model_fields}


def _is_union_tag(part: str | int) -> bool:
    # pydantic puts the chosen member of a tagged union into loc, e.g. ('prompts', 'synthetic', ..)
    return isinstance(part, str) and part in {"synthetic", "fixed"}


def _describe_one(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    got = error.get("input")
    if kind == "extra_forbidden":
        return "unknown key; remove it or fix its spelling"
    if kind == "missing":
        return "required key is missing"
    msg = str(error["msg"])
    msg = msg.removeprefix("Value error, ")
    return f"{msg} (got {_short(got)})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
