"""The load generator's HTTP client: where requests go, a keep-alive pool, one exchange at a time.

- ``parse_route``: the endpoint's scheme, host and port, and the proxy the environment names for
  it (``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``, minus ``NO_PROXY``), as the OpenAI SDK and
  aiohttp's ``trust_env`` honour them: plain http goes to the proxy in absolute form, https through
  a ``CONNECT`` tunnel, then TLS to the endpoint;
- ``WireClient``: a pool of ``Http1Connection`` (``connection.py``) to one endpoint; ``exchange`` writes
  one prepared request and waits for its answer under a total timeout, retrying once on a fresh
  connection when a reused one turns out to have been closed by the server before it answered.
Failures are ``StreamError`` with a class (``connection_refused``, ``proxy_error``, ``tls_error``,
``timeout``…), which the load generator turns into a failed request record.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import ssl
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from types import TracebackType

from tracker import __version__
from tracker.errors import ConfigError
from tracker.http_client.connection import (
    Clock,
    Handoff,
    Http1Connection,
    PollClock,
    Response,
    Sink,
    StaleConnection,
)
from tracker.http_client.sse import StreamError

CONNECT_TIMEOUT_S = 30.0
USER_AGENT = f"tracker/{__version__}"


@dataclass(frozen=True, slots=True)
class Route:
    scheme: str  # "http" or "https"
    host: str
    port: int
    proxy: tuple[str, int] | None = None
    proxy_label: str = ""  # e.g. "HTTPS_PROXY=http://127.0.0.1:3128", credentials removed
    proxy_auth: str | None = field(default=None, repr=False)  # a Proxy-Authorization value

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def strip_credentials(url: str) -> str:
    """``url`` without a user name or password."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def find_proxy(url: str) -> tuple[str, str] | None:
    """(variable, proxy URL) that an HTTP client honouring the environment uses for ``url``:
    ``<scheme>_proxy``, else ``all_proxy``, unless ``no_proxy`` names the host."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    proxies = urllib.request.getproxies()
    key = scheme if scheme in proxies else "all"
    if key not in proxies or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    own = (f"{scheme}_proxy", f"{scheme.upper()}_PROXY") if key == scheme else ()
    for name in (*own, "all_proxy", "ALL_PROXY"):
        if os.environ.get(name):
            return name, proxies[key]
    return f"{key}_proxy", proxies[key]


def parse_route(base_url: str) -> Route:
    """Where requests to ``base_url`` go; ConfigError for a URL that cannot be measured."""
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"base URL {base_url!r}: expected http://host[:port][/path] or "
                          "https://…; fix base_url")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ConfigError(f"base URL {base_url!r}: the port is not a number; fix base_url") from None
    route = Route(parts.scheme, parts.hostname, port)
    found = find_proxy(base_url)
    if found is None:
        return route
    name, proxy_url = found
    return _with_proxy(route, proxy_url, name.upper())


def _with_proxy(route: Route, proxy_url: str, name: str) -> Route:
    proxy = urllib.parse.urlsplit(proxy_url if "://" in proxy_url else f"http://{proxy_url}")
    try:
        port = proxy.port
    except ValueError:
        after_host = proxy.netloc.rpartition("@")[2]
        raise ConfigError(f"{name}={proxy.scheme}://{after_host}: the port is not a port "
                          "number; fix or unset it") from None
    shown = strip_credentials(proxy._replace(path="", query="", fragment="").geturl())
    if proxy.scheme != "http" or not proxy.hostname:
        raise ConfigError(f"{name}={shown}: only http:// proxies are supported; fix or unset it")
    auth = None
    if proxy.username is not None:
        user = urllib.parse.unquote(proxy.username)
        secret = urllib.parse.unquote(proxy.password or "")
        auth = "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
    return Route(route.scheme, route.host, route.port, (proxy.hostname, port or 80),
                 f"{name}={shown}", auth)


def _check_header(name: str, value: str) -> None:
    if any(c in name or c in value for c in "\r\n\0"):  # never echo the value: it may be a key
        raise StreamError("bad_request", f"the {name} header holds a line break (value hidden); "
                                         "check the variable it comes from")


class WireClient:
    """Keep-alive HTTP/1.1 connections to one endpoint (use ``async with``)."""

    def __init__(self, base_url: str, clock: Clock) -> None:
        self.route = parse_route(base_url)
        self.loop = asyncio.get_running_loop()
        self.clock = PollClock(self.loop, clock)
        self.handoff = Handoff(self.loop)
        self.idle: list[Http1Connection] = []
        self.ssl = ssl.create_default_context() if self.route.scheme == "https" else None
        self.heads: dict[str, bytes] = {}  # the caller's cache of prepared heads
        self.opened = 0  # connections opened so far

    async def __aenter__(self) -> WireClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        for connection in self.idle:
            connection.abort("closed by the client")
        self.idle.clear()

    def prepare(self, method: str, url: str, headers: dict[str, str]) -> bytes:
        """The head of a request for ``url`` (on this client's endpoint) up to its blank line,
        less the body length (see ``request``)."""
        route = self.route
        parts = urllib.parse.urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if route.proxy is not None and route.scheme == "http":
            target = f"http://{route.authority}{target}"  # absolute form, to the proxy
        lines = [f"{method} {target} HTTP/1.1", f"Host: {route.authority}",
                 f"User-Agent: {USER_AGENT}", "Accept-Encoding: identity"]
        if route.proxy_auth is not None and route.scheme == "http":
            lines.append(f"Proxy-Authorization: {route.proxy_auth}")
        for name, value in headers.items():
            _check_header(name, value)
            lines.append(f"{name}: {value}")
        return ("\r\n".join(lines) + "\r\n").encode("latin-1", "replace")

    @staticmethod
    def request(prepared: bytes, body: bytes) -> bytes:
        return b"%sContent-Length: %d\r\n\r\n%s" % (prepared, len(body), body)

    async def exchange(self, data: bytes, *, sink: Sink | None, timeout_s: float,
                       stamp: dict[str, float]) -> Response:
        """Send one request and wait for its answer; StreamError on any failure."""
        connection: Http1Connection | None = None
        try:
            async with asyncio.timeout(timeout_s):
                for attempt in (1, 2):  # the second on a new connection
                    connection = await self._acquire(min(timeout_s, CONNECT_TIMEOUT_S),
                                                     reuse=attempt == 1)
                    try:
                        response = await connection.send(data, sink, stamp)
                    except StaleConnection:
                        stamp.pop("sent", None)
                        if attempt == 2:
                            raise StreamError("connection_reset", "the server closed two "
                                              "connections before answering") from None
                        continue
                    self._release(connection)
                    return response
        except TimeoutError:
            if connection is not None:
                connection.abort("timed out")
            raise StreamError("timeout", f"no complete answer within {timeout_s:g} s") from None
        except BaseException:
            if connection is not None and not connection.reusable:
                connection.abort("the request failed")
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _release(self, connection: Http1Connection) -> None:
        if connection.reusable:
            self.idle.append(connection)
        else:
            connection.abort("not kept alive")

    async def _acquire(self, connect_timeout_s: float, *, reuse: bool = True) -> Http1Connection:
        while reuse and self.idle:
            connection = self.idle.pop()
            if connection.reusable:
                return connection
        try:
            async with asyncio.timeout(connect_timeout_s):
                return await self._open()
        except TimeoutError:
            raise StreamError("timeout", f"could not connect to {self._next_hop()} within "
                                         f"{connect_timeout_s:g} s") from None

    def _next_hop(self) -> str:
        route = self.route
        return f"the proxy ({route.proxy_label})" if route.proxy else route.authority

    def _factory(self) -> Http1Connection:
        return Http1Connection(self.loop, self.clock, self.handoff)

    async def _open(self) -> Http1Connection:
        route = self.route
        host, port = route.proxy or (route.host, route.port)
        direct_tls = self.ssl if route.proxy is None else None
        try:
            _, connection = await self.loop.create_connection(
                self._factory, host, port, ssl=direct_tls,
                server_hostname=route.host if direct_tls is not None else None)
        except ssl.SSLError as exc:
            raise StreamError("tls_error", f"TLS with {route.authority} failed: {exc}") from None
        except OSError as exc:
            raise self._connect_error(exc) from None
        if route.proxy is not None and route.scheme == "https":
            try:
                await self._tunnel(connection)
            except BaseException:  # a failure, a timeout, a cancellation: hang up on the proxy
                connection.abort("the tunnel was not opened")
                raise
        self.opened += 1
        return connection

    def _connect_error(self, exc: OSError) -> StreamError:
        route = self.route
        reason = exc.strerror or str(exc) or type(exc).__name__
        if route.proxy is not None:
            return StreamError("proxy_error", f"local proxy failed: {route.proxy_label} "
                                              f"({reason}); start the proxy or unset the variable")
        if isinstance(exc, socket.gaierror):
            return StreamError("connection_refused", f"cannot resolve {route.host!r} ({reason}); "
                                                     "check base_url")
        kind = "connection_refused" if isinstance(exc, ConnectionRefusedError) else \
            "connection_error"
        return StreamError(kind, f"cannot connect to {route.authority} ({reason}); is the server "
                                 "up and is base_url right?")

    async def _tunnel(self, connection: Http1Connection) -> None:
        """CONNECT through the proxy, then TLS with the endpoint on the same connection."""
        route = self.route
        lines = [f"CONNECT {route.host}:{route.port} HTTP/1.1", f"Host: {route.host}:{route.port}"]
        if route.proxy_auth is not None:
            lines.append(f"Proxy-Authorization: {route.proxy_auth}")
        try:
            answer = await connection.send(("\r\n".join(lines) + "\r\n\r\n").encode(), None, {},
                                           tunnel=True)
        except StreamError as exc:
            raise StreamError("proxy_error", f"local proxy failed: {route.proxy_label} "
                                             f"({exc})") from None
        if answer.status != 200:
            connection.abort("the proxy refused the tunnel")
            raise StreamError("proxy_error", f"the proxy ({route.proxy_label}) refused to tunnel "
                                             f"to {route.authority}: HTTP {answer.status} "
                                             f"{answer.reason}")
        assert connection.transport is not None and self.ssl is not None
        try:
            transport = await self.loop.start_tls(connection.transport, connection, self.ssl,
                                                  server_hostname=route.host)
        except (ssl.SSLError, OSError) as exc:
            connection.abort("TLS failed")
            raise StreamError("tls_error", f"TLS with {route.authority} through "
                                           f"{route.proxy_label} failed: {exc}") from None
        assert transport is not None
        transport.set_write_buffer_limits(high=0)
        connection.transport = transport
        connection.requests = 0  # the CONNECT was not an answer to a request of ours
