"""A config: its stored versions, and the one config diff between any two.

A version is the sha256 of the config's canonical form (``tracker.inputs.configs``). The store
keeps each version's canonical body, which holds no secret (a config names variables, never
values), and the diff passes the redaction besides (``tracker.inputs.config_diff``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from sqlalchemy.orm import Session

from tracker.errors import NotFoundError
from tracker.inputs.config_diff import compute_config_diff
from tracker.mcp.arguments import Arguments, Name, VersionRef
from tracker.mcp.context import ToolContext
from tracker.mcp.registry import ToolSpec
from tracker.mcp.shapes import changes_json, short
from tracker.store.queries import fetch_config_history, fetch_trend_options
from tracker.store.regressions import fetch_config_version


class ConfigName(Arguments):
    config: Name = Field(description="config name, e.g. demo-chat")
    with_bodies: bool = Field(False, description="also each version's canonical body")


class ConfigDiff(Arguments):
    config: Name = Field(description="config name")
    base_version: VersionRef = Field(description="the older side (6+ hex digits)")
    head_version: VersionRef = Field(description="the newer side (6+ hex digits)")


def config_versions(context: ToolContext, query: ConfigName) -> dict[str, Any]:
    with Session(context.engine) as session:
        history = fetch_config_history(session, query.config)
        if not history:
            names = fetch_trend_options(session).configs
            raise NotFoundError(f"config: no config named {query.config!r} in the store; it "
                                f"holds {', '.join(names[:20]) or 'none'}")
    versions = []
    for i, entry in enumerate(history):
        before = history[i - 1].canonical if i else None
        versions.append({
            "version": short(entry.version), "sha256": entry.version,
            "first_seen_at": entry.first_seen_at, "runs": entry.runs,
            "last_run_at": entry.last_run_at,
            "changes_from_previous": None if before is None
            else changes_json(compute_config_diff(before, entry.canonical)),
            **({"body": dict(entry.canonical)} if query.with_bodies else {}),
        })
    return {"config": query.config, "versions": versions,
            "notes": "oldest first; a version is the sha256 of the canonical body; "
                     "changes_from_previous: the one config diff from the version before"}


def config_diff(context: ToolContext, query: ConfigDiff) -> dict[str, Any]:
    with Session(context.engine) as session:
        name, base = fetch_config_version(session, f"{query.config}@{query.base_version}")
        _, head = fetch_config_version(session, f"{query.config}@{query.head_version}")
    changes = compute_config_diff(base.canonical, head.canonical)
    return {"config": name, "base_version": short(base.version),
            "head_version": short(head.version), "changes": changes_json(changes),
            "summary": "; ".join(change.render() for change in changes) or "no difference"}


TOOLS = (
    ToolSpec("config_versions", "A config's versions",
             "Every stored version of a config, oldest first: when it was first seen, how many "
             "runs used it, and the config diff from the version before (optionally each "
             "canonical body).", ConfigName, config_versions),
    ToolSpec("config_diff", "Diff two config versions",
             "The one config diff between two stored versions of a config, field by field "
             "(dotted paths; '(default)': not set).", ConfigDiff, config_diff),
)
