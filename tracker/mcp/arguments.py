"""A tool's arguments: validated once at the boundary, and a refusal in the house's words.

Every tool declares a pydantic model (``Arguments``: unknown keys are refused, not ignored). Its
JSON Schema is the tool's input schema, so an agent sees the bounds before it calls. A call whose
arguments fail gets one line per bad argument: where, what was wrong, the bad value (redacted,
cut short) and the fix, e.g. ``list_regressions: limit: must be at most 500 (got 100000)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from tracker.metrics import REGISTRY
from tracker.redaction import redact_text

MAX_ID = 2**63 - 1  # a stored id: the databases' 64-bit integers
SHOWN_CHARS = 80  # of a bad value quoted back
WHOLE = "must be a whole number"
TIME_HINT = "must be an ISO 8601 date or time in UTC, e.g. 2026-05-01 or 2026-05-01T12:00:00Z"
VERSION_HINT = ("must be a config version: 6 to 64 hex digits (the sha256 or its prefix, as "
                "config_versions and `tracker runs` show it)")


def _utc(value: datetime) -> datetime:
    """A time without a zone is read as UTC (every stored time is UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


StoredId = Annotated[int, Field(ge=1, le=MAX_ID)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
VersionRef = Annotated[str, StringConstraints(pattern=r"^[0-9a-fA-F]{6,64}$")]
UtcTime = Annotated[datetime, AfterValidator(_utc)]
Note = Annotated[str, StringConstraints(max_length=2000)]


def _known_metric(name: str) -> str:
    if name not in REGISTRY:
        raise ValueError("not in the metric registry; the resource tracker://metrics lists every "
                         "name with its unit and direction, e.g. ttft_p99_s")
    return name


MetricName = Annotated[str, StringConstraints(max_length=64), AfterValidator(_known_metric)]


class Arguments(BaseModel):
    """The base of every tool's arguments: no unknown key, nothing mutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def describe_invalid(tool: str, model: type[BaseModel], exc: ValidationError) -> str:
    """One line for the caller: each bad argument with why and its value, then the fix."""
    known = ", ".join(model.model_fields) or "none"
    parts = [_describe_error(error, known) for error in exc.errors(include_url=False)]
    return (f"{tool}: {'; '.join(parts)}; fix the arguments and call again (the tool's input "
            "schema in tools/list gives each one's type and bounds)")


def _describe_error(error: Mapping[str, Any], known: str) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "arguments"
    kind = str(error["type"])
    if kind == "extra_forbidden":
        return f"{where}: not an argument of this tool (its arguments: {known})"
    if kind == "missing":
        return f"{where}: required"
    return f"{where}: {_why(kind, error)} (got {_shown(error.get('input'))})"


def _why(kind: str, error: Mapping[str, Any]) -> str:
    context = error.get("ctx") or {}
    reasons = {
        "less_than_equal": f"must be at most {context.get('le')}",
        "less_than": f"must be less than {context.get('lt')}",
        "greater_than_equal": f"must be at least {context.get('ge')}",
        "greater_than": f"must be more than {context.get('gt')}",
        "string_too_long": f"must be at most {context.get('max_length')} characters",
        "string_too_short": f"must be at least {context.get('min_length')} characters",
        "too_long": f"must hold at most {_items(context.get('max_length'))}",
        "too_short": f"must hold at least {_items(context.get('min_length'))}",
        "string_pattern_mismatch": VERSION_HINT,
        "literal_error": f"must be one of {context.get('expected')}",
        "int_parsing": WHOLE, "int_type": WHOLE, "int_from_float": WHOLE,
        "datetime_from_date_parsing": TIME_HINT, "datetime_parsing": TIME_HINT,
        "datetime_type": TIME_HINT,
    }
    if kind == "value_error":
        return str(context.get("error", "is not valid"))
    if kind in reasons:
        return reasons[kind]
    message = str(error.get("msg", "is not valid"))
    return message[:1].lower() + message[1:]


def _items(count: Any) -> str:
    return f"{count} item{'' if count == 1 else 's'}"


def _shown(value: Any) -> str:
    text = " ".join(redact_text(repr(value)).split())  # redacted, then cut: no secret half-shown
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"
