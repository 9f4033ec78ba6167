"""Quality sets: JSONL files of prompts with one right answer each, checked once at load.

One JSON object a line (blank lines and lines starting with ``//`` are skipped)::

    {"id": "add-1", "prompt": "What is 17 + 25? Answer with the number only.",
     "expected": 42, "scorer": "numeric", "params": {"tolerance": 0}}

- ``id``: unique in the set (answers are matched by it across runs, for the drift).
- ``prompt``: sent as the only user message, at temperature 0.
- ``expected`` and ``scorer``: ``exact``/``contains`` (text), ``regex`` (a pattern searched in the
  answer), ``numeric`` (a number, whose ``params`` are ``tolerance`` and ``relative_tolerance``),
  ``choice`` (one letter, whose ``params`` are ``options``, default ``ABCD``), ``json`` (a JSON
  Schema 2020-12, ``check_json_schema``). Text scorers take ``params.case_sensitive`` (default
  false).
- ``answer`` (optional): a reference answer. Loading checks that it passes its own scorer, and
  the simulator says it when it answers the item right.
- ``max_tokens`` (optional): overrides the suite's ``quality.max_tokens`` for this item.
- ``temperature`` (default 0) and ``samples`` (default 1): an item at temperature 0 is asked
  once (its answer does not vary). A sampled one (temperature > 0) is asked ``samples`` times,
  each ask a result of its own, ``<id>#1`` … ``<id>#N`` (``ask_ids``), scored and paired like an
  item. A sampled ask's answer varies by design, so it counts in the accuracy and not in the
  drift.

A line may instead be GSM8K-style (``question``, ``answer`` ending in ``#### number``) or
multiple choice (``question``, ``choices``, ``answer`` as a letter or index): see
``tracker.quality.formats``. ``compute_sample`` draws a seeded subset (a suite's
``quality.sample``) for a cheap nightly.

A set's version is the sha256 of its items in canonical JSON, so any change to an item changes
the version of every suite that uses the set.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveInt,
    ValidationError,
    model_validator,
)
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012, SchemaRegistry

from tracker.errors import QualitySetError
from tracker.jsontext import UntrustedJSONError, parse_untrusted_json
from tracker.quality.formats import convert_line

ScorerName = Literal["exact", "contains", "regex", "numeric", "choice", "json"]
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"
ASK_SEPARATOR = "#"  # never in an item id: ``<id>#k`` is the k-th ask of a sampled item
# A json item's $ref resolves within its own schema or not at all: this registry fetches nothing.
LOCAL_SCHEMA_REFS: SchemaRegistry = Registry()


def is_sampled_ask(result_id: str) -> bool:
    """Whether a result id is one ask of a sampled item (its answer varies by design)."""
    return ASK_SEPARATOR in result_id




class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextParams(_Strict):
    case_sensitive: bool = False


class NumericParams(_Strict):
    tolerance: NonNegativeFloat = 0.0  # absolute
    relative_tolerance: NonNegativeFloat = 0.0  # of |expected|


class ChoiceParams(_Strict):
    options: str = Field(default="ABCD", pattern=r"^[A-Z]{2,26}$")


class JsonParams(_Strict):
    pass


PARAMS: dict[str, type[_Strict]] = {
    "exact": TextParams, "contains": TextParams, "regex": TextParams,
    "numeric": NumericParams, "choice": ChoiceParams, "json": JsonParams,
}


class QualityItem(_Strict):
    id: str = Field(pattern=ID_PATTERN, max_length=200)
    prompt: str = Field(min_length=1)
    expected: str | int | float | dict[str, Any]
    scorer: ScorerName
    params: dict[str, Any] = Field(default_factory=dict)
    answer: str | None = None
    max_tokens: PositiveInt | None = None
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    samples: PositiveInt = Field(default=1, le=100)

    @model_validator(mode="after")
    def _fits_scorer(self) -> QualityItem:
        if self.samples > 1 and self.temperature == 0.0:
            raise ValueError(f"samples: an item at temperature 0 is asked once, its answer does "
                             f"not vary (got samples {self.samples}); set temperature > 0 to "
                             "sample it, or drop samples")
        PARAMS[self.scorer].model_validate(self.params)
        expected = self.expected
        if self.scorer == "json":
            check_json_schema(expected, "expected")
        elif isinstance(expected, dict):
            raise ValueError(f"expected: a {self.scorer} item expects text or a number, not an "
                             "object (only scorer 'json' takes a schema)")
        elif self.scorer == "numeric" and isinstance(expected, str):
            raise ValueError(f"expected: scorer 'numeric' needs a number (got {expected!r})")
        elif self.scorer == "choice":
            options = ChoiceParams.model_validate(self.params).options
            if not (isinstance(expected, str) and len(expected) == 1 and expected in options):
                raise ValueError(f"expected: one of the letters {options} (got {expected!r})")
        elif self.scorer == "regex":
            try:
                re.compile(str(expected))
            except re.error as exc:
                raise ValueError(f"expected: not a regular expression: {exc}") from None
        return self

    @property
    def ask_ids(self) -> tuple[str, ...]:
        """The result id of each ask: the item's id, or ``<id>#k`` for a sampled item."""
        if self.samples == 1:
            return (self.id,)
        return tuple(f"{self.id}{ASK_SEPARATOR}{k}" for k in range(1, self.samples + 1))

    @property
    def reference_answer(self) -> str | None:
        """What a right answer looks like: ``answer``, else ``expected`` where that is one."""
        if self.answer is not None:
            return self.answer
        if self.scorer in ("regex", "json"):
            return None
        return str(self.expected)


@dataclass(frozen=True, slots=True)
class QualitySet:
    name: str  # the file's stem
    version: str  # sha256 of the items' canonical JSON
    path: str
    items: tuple[QualityItem, ...]

    @property
    def short_version(self) -> str:
        return self.version[:12]


def check_json_schema(schema: object, where: str) -> None:
    """Raise ValueError naming the place in ``schema`` (``where`` plus its JSON path) where it is
    not a JSON Schema 2020-12, or a ``$ref`` that does not resolve within it."""
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where}: a schema must be a JSON object (got {type(schema).__name__})")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"{where}{exc.json_path.removeprefix('$')}: {exc.message}") from None
    root = DRAFT202012.create_resource(schema)
    todo = [(root, LOCAL_SCHEMA_REFS.resolver_with_root(root))]
    while todo:  # each subschema, resolving as the validator will: from its base URI
        resource, resolver = todo.pop()
        for key in ("$ref", "$dynamicRef"):
            ref = resource.contents.get(key) if isinstance(resource.contents, Mapping) else None
            if not isinstance(ref, str):
                continue
            try:
                resolver.lookup(ref)
            except Unresolvable:
                raise ValueError(f"{where}: {key} {ref!r} points to nothing in the schema; a "
                                 "schema is never fetched, so put what it points to under "
                                 "$defs and refer to it as '#/$defs/NAME'") from None
        todo += [(child, resolver.in_subresource(child)) for child in resource.subresources()]


def compute_sample(quality_set: QualitySet, size: int | None, seed: int) -> QualitySet:
    """``size`` items drawn without replacement (seeded), in the file's order, as a set of its own
    version, or the whole set when ``size`` is None or not smaller than the set."""
    if size is None or size >= len(quality_set.items):
        return quality_set
    chosen = sorted(random.Random(seed).sample(range(len(quality_set.items)), size))
    items = tuple(quality_set.items[i] for i in chosen)
    return replace(quality_set, version=compute_set_version(items), items=items)


def compute_set_version(items: tuple[QualityItem, ...]) -> str:
    canonical = [item.model_dump(mode="json", exclude_defaults=True) for item in items]
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _validation_message(exc: ValidationError) -> str:
    error = exc.errors()[0]
    loc = ".".join(str(part) for part in error["loc"]) or "(item)"
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = f"unknown key; allowed: {', '.join(QualityItem.model_fields)}"
    return f"{loc}: {message}"


def parse_quality_item(line: str, where: str, number: int = 0) -> QualityItem:
    """One line of a set file: the tracker's own item, or a GSM8K-style or multiple-choice line
    (``tracker.quality.formats``). ``number``, the line's, names an item without an id."""
    try:
        data = parse_untrusted_json(line)
    except UntrustedJSONError as exc:
        if exc.too_deep:  # a hostile line of [[[[…: nothing a quality item needs
            raise QualitySetError(f"{where}: JSON nested too deeply to be a quality item; "
                                  "refused") from None
        raise QualitySetError(f"{where}: not JSON ({exc.msg} at column {exc.colno}); "
                              "each line must be one JSON object") from None
    if not isinstance(data, Mapping):
        raise QualitySetError(f"{where}: each line must be a JSON object "
                              f"(got {type(data).__name__})")
    try:
        data = convert_line(data, number)
    except ValueError as exc:
        raise QualitySetError(f"{where}: {exc}") from None
    try:
        return QualityItem.model_validate(data)
    except ValidationError as exc:
        raise QualitySetError(f"{where}: {_validation_message(exc)}") from None
