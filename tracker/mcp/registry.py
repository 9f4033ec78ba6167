"""A tool: its name, its arguments, what it does, and the one way a call is answered.

``answer_call`` is every call's path: a write tool on a read-only server is refused, the
arguments are validated (``tracker.mcp.arguments``), the handler runs, and the answer leaves
through ``shapes.to_json`` (every string redacted). Whatever goes wrong is answered as a tool
error (``isError``, the MCP way for the model to read and correct) in one line: a
``TrackerError``'s own message (what, where, the value, the fix), a database that cannot be read,
or, for a bug, its type only. Never a traceback: the server's log gets one with
``TRACKER_DEBUG=1``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from tracker.errors import TrackerError
from tracker.mcp.arguments import Arguments, describe_invalid
from tracker.mcp.context import ALLOW_WRITES_FLAG, ToolContext
from tracker.mcp.shapes import to_json
from tracker.redaction import redact_one_line

log = logging.getLogger(__name__)

Handler = Callable[[ToolContext, Any], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool. ``writes`` means it changes the store (queues work, triages), so it is refused
    unless the server was started with ``--allow-writes``."""

    name: str
    title: str
    description: str
    arguments: type[Arguments]
    handler: Handler
    writes: bool = False

    def describe(self) -> Tool:
        access = (f" Needs the server started with `tracker mcp {ALLOW_WRITES_FLAG}`."
                  if self.writes else "")
        return Tool(name=self.name, title=self.title, description=self.description + access,
                    input_schema=self.arguments.model_json_schema(),
                    annotations=ToolAnnotations(title=self.title, read_only_hint=not self.writes,
                                                destructive_hint=False, idempotent_hint=False,
                                                open_world_hint=False))


def answer_call(spec: ToolSpec, context: ToolContext, arguments: Mapping[str, Any]
                ) -> CallToolResult:
    """Run one call of ``spec`` and shape its answer (blocking: the store is read here)."""
    if spec.writes and not context.writes_allowed:
        return refusal(f"{spec.name}: this server is read-only, so it queues and triages "
                       f"nothing; restart it with `tracker mcp {ALLOW_WRITES_FLAG}` to allow "
                       "writes")
    try:
        parsed = spec.arguments.model_validate(dict(arguments))
    except ValidationError as exc:
        return refusal(describe_invalid(spec.name, spec.arguments, exc))
    try:
        answer = spec.handler(context, parsed)
    except TrackerError as exc:
        return refusal(f"{spec.name}: {exc}")
    except SQLAlchemyError as exc:
        log.warning("%s: the database failed: %s", spec.name, redact_one_line(str(exc)))
        return refusal(f"{spec.name}: the database could not be read ({type(exc).__name__}: "
                       f"{redact_one_line(str(exc), 200)}); check it with `tracker runs --db …` "
                       "and call again")
    except Exception as exc:  # the job boundary: a bug, answered in one line
        log.error("%s: internal error: %s", spec.name, type(exc).__name__,
                  exc_info=bool(os.environ.get("TRACKER_DEBUG")))
        return refusal(f"{spec.name}: internal error: {type(exc).__name__} (a bug in the "
                       "tracker; run the server with TRACKER_DEBUG=1 for the traceback in its "
                       "log, and please report it)")
    return answered(answer)


def answered(answer: Mapping[str, Any]) -> CallToolResult:
    shaped = to_json(answer)
    text = json.dumps(shaped, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=shaped)


def refusal(message: str) -> CallToolResult:
    text = to_json(" ".join(message.split()))
    return CallToolResult(content=[TextContent(type="text", text=f"error: {text}")],
                          is_error=True)
