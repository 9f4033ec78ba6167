"""The MCP server: the tracker's judgements as tools, its definitions as resources.

Built on the SDK's low-level ``Server`` so that every call takes one path
(``tracker.mcp.registry.answer_call``): arguments validated by the tool's own model, the store
read in a worker thread, the answer redacted, an error answered in one line. A tool name the
server does not have is a protocol error (-32602) that lists the names it has. So is a resource
it does not have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListResourcesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    TextResourceContents,
)

from tracker import __version__
from tracker.dashboard.access import AuthMode, compute_viewer
from tracker.errors import NotFoundError
from tracker.mcp import (
    config_tools,
    queue_tools,
    regression_tools,
    run_tools,
    series_tools,
    triage_tools,
)
from tracker.mcp.context import ToolContext, local_viewer
from tracker.mcp.registry import ToolSpec, answer_call
from tracker.mcp.resources import list_resources, read_resource
from tracker.redaction import redact_one_line

TOOLS: tuple[ToolSpec, ...] = (
    *regression_tools.TOOLS, *series_tools.TOOLS, *run_tools.TOOLS, *config_tools.TOOLS,
    *queue_tools.TOOLS, *triage_tools.TOOLS,
)

INSTRUCTIONS = """\
The performance-regression tracker of an LLM inference service, over its store of nightly runs.
Its tools answer with the tracker's own judgements, never raw tables: list_regressions (what
regressed, with the change point, the size and interval, the config diff and the triage),
get_series (a metric's trend with change points and config-version boundaries), get_run,
compare_runs and compare_versions (judged by the one comparison policy the CI gate uses),
config_versions and config_diff. Values are in the metric's SI unit (seconds, bytes, tokens/s),
named with each value; read tracker://metrics for every metric's unit and direction, and the
tracker://docs/ pages for the definitions. Work that needs a GPU is queued, never run here
(queue_run, queue_bisection; get_request reads the result later), and writes (queueing, triage)
need the server started with --allow-writes."""


@dataclass(frozen=True, slots=True)
class Viewers:
    """Who is asking: this machine's user, or the name a trusted proxy put in its header."""

    mode: AuthMode = AuthMode.LOCAL
    user_header: str | None = None

    def of(self, request: Any) -> str | None:
        if self.mode is AuthMode.LOCAL or self.user_header is None:
            return local_viewer()
        headers = getattr(request, "headers", None)
        values = [] if headers is None else list(headers.getlist(self.user_header))
        return compute_viewer(AuthMode.PROXY, {}, values, "")


def build_server(context: ToolContext, viewers: Viewers | None = None) -> Server[Any]:
    """The server over ``context``'s store. ``viewers`` says who each request is."""
    specs = {spec.name: spec for spec in TOOLS}
    who = viewers or Viewers()

    async def on_list_tools(ctx: ServerRequestContext[Any],
                            params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[spec.describe() for spec in specs.values()])

    async def on_call_tool(ctx: ServerRequestContext[Any],
                           params: CallToolRequestParams) -> CallToolResult:
        spec = specs.get(params.name)
        if spec is None:
            raise MCPError(INVALID_PARAMS, f"unknown tool {redact_one_line(params.name, 80)!r}; "
                                           f"the tools are {', '.join(specs)} (tools/list)")
        call = context.for_viewer(who.of(ctx.request))
        return await anyio.to_thread.run_sync(answer_call, spec, call, params.arguments or {})

    async def on_list_resources(ctx: ServerRequestContext[Any],
                                params: PaginatedRequestParams | None) -> ListResourcesResult:
        found = await anyio.to_thread.run_sync(list_resources)
        return ListResourcesResult(resources=[
            Resource(uri=r.uri, name=r.name, description=r.description, mime_type=r.mime_type)
            for r in found])

    async def on_read_resource(ctx: ServerRequestContext[Any],
                               params: ReadResourceRequestParams) -> ReadResourceResult:
        uri = str(params.uri)
        try:
            text, mime_type = await anyio.to_thread.run_sync(read_resource, uri)
        except NotFoundError as exc:
            raise MCPError(INVALID_PARAMS, redact_one_line(str(exc), 600)) from None
        return ReadResourceResult(contents=[TextResourceContents(uri=uri, text=text,
                                                                 mime_type=mime_type)])

    return Server("tracker", version=__version__, title="tracker: LLM serving regressions",
                  instructions=INSTRUCTIONS, on_list_tools=on_list_tools,
                  on_call_tool=on_call_tool, on_list_resources=on_list_resources,
                  on_read_resource=on_read_resource)
