"""Read a YAML file into a validated pydantic model, with errors that name the file and line.

A file is read within limits, so a hostile or mistaken one is refused in well under a second
with one line that names the file and the limit: at most ``MAX_YAML_BYTES``, nesting at most
``MAX_YAML_DEPTH`` levels, at most ``MAX_YAML_NODES`` values once aliases are expanded (an alias
bomb of a few hundred bytes expands to a billion), and no alias inside its own anchor.
"""

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

MAX_YAML_BYTES = 1024 * 1024  # a config, suite or schedule file is a few KiB
MAX_YAML_DEPTH = 64  # nesting levels (a config needs about five)
MAX_YAML_NODES = 20_000  # values (keys, items, scalars) with every alias expanded


class YamlLimitError(Exception):
    """A limit crossed or a value unreadable. ``line`` is 1-based, or None for the whole file."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


def read_yaml_mapping(path: Path, what: str) -> tuple[dict[str, Any], dict[Loc, int]]:
    """Parse ``path`` as a YAML mapping and return it with the line number of every key path."""
    text = _read_text(path, what)
    try:
        node, data = parse_yaml(text)
    except YamlLimitError as exc:
        at = f"{path}:{exc.line}" if exc.line is not None else str(path)
        raise ConfigError(f"{at}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "nesting depth" in problem:  # libyaml's own limit, met before ours while scanning
            raise ConfigError(f"{where}: {_too_deep()}") from None
        raise ConfigError(f"{where}: invalid YAML: {problem}; fix the syntax on that line") from None
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise ConfigError(f"{path}: a {what} must be a YAML mapping of keys to values (got {got})")
    lines: dict[Loc, int] = {}
    if node is not None:
        _collect_lines(node, (), lines)
    return data, lines


def load_bounded_yaml(text: str) -> Any:
    """One YAML document from outside (another tool's report), within the same limits as a
    config: size, depth, values with aliases expanded. Raises ``YamlLimitError`` (with the
    line where known) for a limit crossed and for invalid YAML. The caller names the file.
    Every YAML the tracker reads goes through here or ``read_yaml_mapping``."""
    if len(text) > MAX_YAML_BYTES:
        raise YamlLimitError(f"{len(text)} characters of YAML, over the limit of "
                             f"{MAX_YAML_BYTES} (1 MiB); refused: check that this is the file "
                             "you meant", None)
    try:
        return parse_yaml(text)[1]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "nesting depth" in problem:
            raise YamlLimitError(_too_deep(), line) from None
        raise YamlLimitError(f"invalid YAML: {problem}", line) from None


def parse_yaml(text: str, loader: type[_Limits] | None = None) -> tuple[yaml.Node | None, Any]:
    """One YAML document as its node tree and its value, within the depth and size limits.

    ``loader`` is one of ``LOADERS`` (default: the first, libyaml's where PyYAML has it).
    Raises ``yaml.YAMLError`` for invalid YAML and ``YamlLimitError`` for a limit crossed or a
    value that cannot be read (``read_yaml_mapping`` turns both into a ConfigError)."""
    parser = (loader or LOADERS[0])(text)
    try:
        node = parser.get_single_node()
        if node is None:
            return None, None
        _check_expanded(node)
        return node, parser.construct_document(node)
    finally:
        parser.dispose()


class _Limits(yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """The safe loader's composer and constructor, counting nesting and values while composing
    (aliases stay shared nodes) and naming the line of a value that cannot be constructed."""

    def __init__(self, text: str) -> None:
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._depth = 0
        self._nodes = 0
        self._open_anchors: set[str] = set()

    def dispose(self) -> None:
        """Drop the parser's state (overridden by the reader the loader combines with)."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[attr-defined]
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise YamlLimitError(_too_many(), line)
        anchor: str | None = getattr(event, "anchor", None)
        if isinstance(event, yaml.AliasEvent):
            if anchor in self._open_anchors:
                raise YamlLimitError(f"alias *{anchor} is inside its own anchor &{anchor} (a "
                                  "recursive alias); refused: write the value out instead", line)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise YamlLimitError(_too_deep(), line)
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open_anchors.discard(anchor)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # 2001-13-45, an int of 5,000 digits
            kind = str(node.tag).rsplit(":", 1)[-1]
            problem = str(exc).split(";")[0]
            raise YamlLimitError(f"not a valid {kind} ({problem}); quote it if it is text",
                              node.start_mark.line + 1) from None


class _PythonLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, _Limits):
    """PyYAML's own parser, in Python."""

    def __init__(self, text: str) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _Limits.__init__(self, text)

    def dispose(self) -> None:
        yaml.parser.Parser.dispose(self)


LOADERS: tuple[type[_Limits], ...] = (_PythonLoader,)  # the first is used; tests try each
if yaml.__with_libyaml__:  # libyaml parses in C, ~10x faster; the composer above stays in charge
    from yaml._yaml import CParser

    class _LibyamlLoader(_Limits, CParser):
        """libyaml's parser, with composing and constructing kept in Python, within the limits."""

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            _Limits.__init__(self, text)

        def dispose(self) -> None:
            CParser.dispose(self)

    LOADERS = (_LibyamlLoader, _PythonLoader)


def _too_deep() -> str:
    return (f"YAML nested deeper than {MAX_YAML_DEPTH} levels; refused (a config, suite or "
            "schedule needs a few): check that this is the file you meant")


def _too_many() -> str:
    return (f"YAML with more than {MAX_YAML_NODES} values once aliases are expanded; refused "
            "(an alias bomb?): write the values out, or check that this is the file you meant")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded(root: yaml.Node) -> None:
    """Refuse a node graph whose aliases expand past the depth or value limits.

    Each node is visited once (its expanded size and depth remembered), without recursion."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        line = node.start_mark.line + 1
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(kid)] for kid in kids)
            depth[key] = 1 + max((depth[id(kid)] for kid in kids), default=0)
            if size[key] > MAX_YAML_NODES:
                raise YamlLimitError(_too_many(), line)
            if depth[key] > MAX_YAML_DEPTH:
                raise YamlLimitError(_too_deep(), line)
        elif key not in size:
            if key in entered:  # the composer refuses these first; never recurse forever
                raise YamlLimitError("a recursive alias; refused: write the value out instead", line)
            entered.add(key)
            stack.append((node, True))
            stack.extend((kid, False) for kid in _children(node))


def _read_text(path: Path, what: str) -> str:
    if not path.exists():
        raise ConfigError(f"{path}: {what} file not found; check the path")
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, expected a {what} YAML file")
    try:
        with path.open("rb") as file:  # never more than the limit: /dev/zero is a file too
            raw = file.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} file: {exc.strerror}") from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(f"{path}: {_size_of(path)}, over the limit of {MAX_YAML_BYTES} bytes "
                          f"(1 MiB) for a {what} file; refused: check that this is the file you "
                          "meant")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text() would


def _size_of(path: Path) -> str:
    try:
        size_bytes = path.stat().st_size
    except OSError:
        size_bytes = 0
    if size_bytes > MAX_YAML_BYTES:
        return f"the file is {size_bytes} bytes"
    return f"the file holds more than {MAX_YAML_BYTES} bytes"  # a device or a pipe


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
    return isinstance(part, str) and part in UNION_TAGS


# The tags of the suites' tagged unions (prompt sources): not a key of the file.
UNION_TAGS = frozenset({"synthetic", "fixed", "dataset", "trace", "conversations"})


def _describe_one(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    got = error.get("input")
    if kind == "extra_forbidden":
        return "unknown key; remove it or fix its spelling"
    if kind == "missing":
        return "required key is missing"
    msg = str(error["msg"])
    msg = msg.removeprefix("Value error, ")
    if "value hidden" in msg:  # the value may be a key pasted in the wrong place
        return msg
    return f"{msg} (got {_short(got)})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
