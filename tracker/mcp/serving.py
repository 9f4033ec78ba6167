"""`tracker mcp`: serve the MCP server on stdio (the default), or over streamable HTTP.

HTTP follows the dashboard's rules (``tracker.dashboard.access``): on a loopback address no
sign-in is needed (whoever reaches it is on this machine, and a triage is recorded as
``local:<user>``), and the SDK's DNS-rebinding protection accepts only loopback Host and Origin
headers. Any other address is refused unless ``--trust-proxy-auth`` says a reverse proxy in front
authenticates every request and names the user in one header (``X-Forwarded-User`` unless
``--user-header`` names another). Then a request without exactly one value of it is answered
401 before it reaches the server, and a triage is recorded as that value.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from sqlalchemy.engine import make_url

from tracker import redaction
from tracker.dashboard.access import (
    DEFAULT_USER_HEADER,
    AuthMode,
    check_user_header,
    compute_viewer,
    is_loopback,
)
from tracker.errors import StoreError, UsageError
from tracker.mcp.context import ALLOW_WRITES_FLAG, ToolContext
from tracker.mcp.server import Viewers, build_server
from tracker.store.db import open_store, redact_url

HOST = "127.0.0.1"
DEFAULT_PORT = 8765
HTTP_PATH = "/mcp"
Transport = Literal["stdio", "http"]
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ServeOptions:
    transport: Transport = "stdio"
    host: str | None = None  # None: HOST (HTTP only)
    port: int | None = None  # None: DEFAULT_PORT (HTTP only)
    allow_writes: bool = False
    trust_proxy_auth: bool = False
    user_header: str | None = None


def choose_viewers(options: ServeOptions) -> Viewers:
    """Who requests are, by the dashboard's rules. A wide address without a sign-in is refused."""
    http_only = {"--host": options.host is not None, "--port": options.port is not None,
                 "--trust-proxy-auth": options.trust_proxy_auth,
                 "--user-header": options.user_header is not None}
    if options.transport == "stdio":
        given = [flag for flag, used in http_only.items() if used]
        if given:
            raise UsageError(f"{', '.join(given)}: only with --transport http (stdio answers "
                             "the process that started it)")
        return Viewers(AuthMode.LOCAL)
    if options.user_header is not None and not options.trust_proxy_auth:
        raise UsageError("--user-header: only with --trust-proxy-auth (it names the header a "
                         "trusted reverse proxy sets)")
    host = options.host or HOST
    if options.trust_proxy_auth:
        return Viewers(AuthMode.PROXY, check_user_header(options.user_header
                                                         or DEFAULT_USER_HEADER))
    if is_loopback(host):
        return Viewers(AuthMode.LOCAL)
    raise UsageError(f"--host {host}: serving the MCP server beyond this machine needs a "
                     "sign-in, and none is configured; serve it behind a reverse proxy that "
                     "authenticates every request and pass --trust-proxy-auth, or keep the "
                     f"default {HOST}")


def check_database(url: str) -> None:
    """A SQLite file that is not there is an error, not a new empty store."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and not Path(parsed.database or "").exists():
        raise StoreError(f"{redact_url(url)}: no database there; point --db at the tracker's "
                         f"store, or fill one with `tracker demo --db {redact_url(url)}`")


def serve(url: str, options: ServeOptions) -> None:
    """Serve until the client closes stdin (stdio) or Ctrl-C (HTTP)."""
    viewers = choose_viewers(options)
    check_database(url)
    engine = open_store(url)
    try:
        context = ToolContext(engine, url, options.allow_writes)
        server = build_server(context, viewers)
        writes = "on" if options.allow_writes else f"off (pass {ALLOW_WRITES_FLAG} to allow)"
        if options.transport == "stdio":
            say(f"tracker mcp: on stdio over {redact_url(url)}; writes {writes}")
            anyio.run(serve_stdio, server)
        else:
            serve_http(server, options, viewers, f"over {redact_url(url)}; writes {writes}")
    finally:
        engine.dispose()


def say(line: str) -> None:
    redaction.say(line, err=True)  # stdout is the protocol's on stdio


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_http(server: Server[Any], options: ServeOptions, viewers: Viewers, what: str) -> None:
    import uvicorn

    host, port = options.host or HOST, options.port if options.port is not None else DEFAULT_PORT
    proxied = viewers.mode is AuthMode.PROXY
    app: App = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host,
                                          transport_security=host_checks(host, proxied))
    if proxied and viewers.user_header is not None:
        app = ProxyUserGuard(app, viewers.user_header)
    shown = f"[{host}]" if ":" in host else host
    sign_in = f"the reverse proxy's {viewers.user_header} header" if proxied \
        else "none (loopback only)"
    say(f"tracker mcp: on http://{shown}:{port}{HTTP_PATH} {what}; sign-in: {sign_in} "
        "(Ctrl-C stops)")
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_config=None,
                                  log_level="warning", lifespan="on")).run()


def host_checks(host: str, proxied: bool) -> TransportSecuritySettings:
    """DNS-rebinding protection: on loopback, only loopback Host and Origin headers are accepted
    (a web page elsewhere cannot reach the server through a browser). Behind a proxy, the
    proxy's public name arrives, and the proxy is what guards the door."""
    if proxied:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = sorted({f"[{host}]" if ":" in host else host, "127.0.0.1", "localhost", "[::1]"})
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=[f"{name}:*" for name in names],
                                     allowed_origins=[f"http://{name}:*" for name in names])


class ProxyUserGuard:
    """Refuses (401) an HTTP request without exactly one value of the proxy's user header."""

    def __init__(self, app: App, header: str) -> None:
        self.app = app
        self.header = header.lower().encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            values = [value.decode("latin-1") for name, value in scope.get("headers", [])
                      if name.lower() == self.header]
            if compute_viewer(AuthMode.PROXY, {}, values, "") is None:
                await refuse(send, f"error: this MCP server answers only through the reverse "
                                   f"proxy that authenticates: the request needs exactly one "
                                   f"{self.header.decode()} header")
                return
        await self.app(scope, receive, send)


async def refuse(send: Send, text: str) -> None:
    body = text.encode("utf-8")
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
