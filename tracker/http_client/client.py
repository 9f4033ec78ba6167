"""The load generator's HTTP client: where requests go, and one interface for both ways there.

``parse_route`` reads the endpoint's scheme, host and port, and the proxy the environment names for
it (``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``, minus ``NO_PROXY``), as the OpenAI SDK and
aiohttp's ``trust_env`` honour them. ``WireClient`` sends plain HTTP straight to the endpoint over
its own keep-alive ``Http1Connection`` pool (``connection.py``), the hot path. It sends https, and
anything that goes through a proxy, with aiohttp (``AiohttpExchange``), which does the TLS, the
``CONNECT`` tunnel and the proxy's credentials. Either way ``exchange`` takes the same request bytes,
feeds the same sink and answers with the same ``Response`` under a total timeout. Failures are
``StreamError`` with a class (``connection_refused``, ``proxy_error``, ``tls_error``, ``timeout``…),
which the load generator turns into a failed request record.
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
from types import SimpleNamespace, TracebackType

import aiohttp

from tracker import __version__
from tracker.errors import ConfigError
from tracker.http_client.connection import (
    MAX_KEPT_BODY_BYTES,
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
REUSED = "reused"  # in an exchange's stamp while aiohttp reuses a kept-alive connection
USER_AGENT = f"tracker/{__version__}"


@dataclass(frozen=True, slots=True)
class Route:
    scheme: str  # "http" or "https"
    host: str
    port: int
    proxy: str | None = None  # the proxy's URL, credentials removed
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
    """Where requests to ``base_url`` go, raising ConfigError for a URL that cannot be measured."""
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
        port = proxy.port or 80
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
    host = f"[{proxy.hostname}]" if ":" in proxy.hostname else proxy.hostname
    url = f"http://{host}:{port}"
    return Route(route.scheme, route.host, route.port, url, f"{name}={url}", auth)


def _check_header(name: str, value: str) -> None:
    if any(c in name or c in value for c in "\r\n\0"):  # never echo the value: it may be a key
        raise StreamError("bad_request", f"the {name} header holds a line break (value hidden); "
                                         "check the variable it comes from")


def _connect_error(route: Route, exc: OSError) -> StreamError:
    reason = exc.strerror or str(exc) or type(exc).__name__
    if route.proxy is not None:
        return StreamError("proxy_error", f"local proxy failed: {route.proxy_label} ({reason}); "
                                          "start the proxy or unset the variable")
    if isinstance(exc, socket.gaierror):
        return StreamError("connection_refused", f"cannot resolve {route.host!r} ({reason}); "
                                                 "check base_url")
    kind = "connection_refused" if isinstance(exc, ConnectionRefusedError) else "connection_error"
    return StreamError(kind, f"cannot connect to {route.authority} ({reason}); is the server "
                             "up and is base_url right?")


class WireClient:
    """Keep-alive connections to one endpoint (use ``async with``)."""

    def __init__(self, base_url: str, clock: Clock) -> None:
        self.route = parse_route(base_url)
        self.loop = asyncio.get_running_loop()
        self.clock = PollClock(self.loop, clock)
        self.handoff = Handoff(self.loop)
        self.idle: list[Http1Connection] = []
        self.heads: dict[str, bytes] = {}  # the caller's cache of prepared heads
        direct = self.route.scheme == "http" and self.route.proxy is None
        self.aiohttp = None if direct else AiohttpExchange(self.route, clock)
        self.own_opened = 0  # connections the plain pool opened so far

    @property
    def opened(self) -> int:
        """Connections opened so far."""
        return self.own_opened if self.aiohttp is None else self.aiohttp.opened

    async def __aenter__(self) -> WireClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        for connection in self.idle:
            connection.abort("closed by the client")
        self.idle.clear()
        if self.aiohttp is not None:
            await self.aiohttp.session.close()

    def prepare(self, method: str, url: str, headers: dict[str, str]) -> bytes:
        """The head of a request for ``url`` (on this client's endpoint) up to its blank line,
        less the body length (see ``request``)."""
        parts = urllib.parse.urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.route.authority}",
                 f"User-Agent: {USER_AGENT}", "Accept-Encoding: identity"]
        for name, value in headers.items():
            _check_header(name, value)
            lines.append(f"{name}: {value}")
        return ("\r\n".join(lines) + "\r\n").encode("latin-1", "replace")

    @staticmethod
    def request(prepared: bytes, body: bytes) -> bytes:
        return b"%sContent-Length: %d\r\n\r\n%s" % (prepared, len(body), body)

    async def exchange(self, data: bytes, *, sink: Sink | None, timeout_s: float,
                       stamp: dict[str, float]) -> Response:
        """Send one request and wait for its answer, raising StreamError on any failure.

        The plain pool retries once on a fresh connection when a reused one was closed before it
        answered."""
        if self.aiohttp is not None:
            return await self.aiohttp.exchange(data, sink, timeout_s, stamp)
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
            raise StreamError("timeout", f"could not connect to {self.route.authority} within "
                                         f"{connect_timeout_s:g} s") from None

    def _factory(self) -> Http1Connection:
        return Http1Connection(self.loop, self.clock, self.handoff)

    async def _open(self) -> Http1Connection:
        try:
            _, connection = await self.loop.create_connection(self._factory, self.route.host,
                                                              self.route.port)
        except OSError as exc:
            raise _connect_error(self.route, exc) from None
        self.own_opened += 1
        return connection


class AiohttpExchange:
    """An https or proxied endpoint's requests, each read back from the bytes ``WireClient`` made.

    The send stamp is taken as aiohttp writes the request's last part. Each read of the body goes to
    the sink stamped when the coroutine reading it wakes (the plain pool stamps it where it lands).
    """

    def __init__(self, route: Route, clock: Clock) -> None:
        self.route, self.clock, self.opened = route, clock, 0
        trace = aiohttp.TraceConfig()
        trace.on_connection_create_end.append(self._count)
        trace.on_connection_reuseconn.append(self._reused)
        trace.on_request_headers_sent.append(self._stamp)
        trace.on_request_chunk_sent.append(self._stamp)
        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=None,
                                         ssl=ssl.create_default_context())  # SSL_CERT_FILE now
        self.session = aiohttp.ClientSession(connector=connector, trace_configs=[trace],
                                             auto_decompress=False, timeout=aiohttp.ClientTimeout(
                                                 total=None, connect=CONNECT_TIMEOUT_S))

    async def _count(self, *_: object) -> None:
        self.opened += 1

    async def _stamp(self, _session: object, context: SimpleNamespace, _params: object) -> None:
        context.trace_request_ctx["sent"] = self.clock()

    async def _reused(self, _session: object, context: SimpleNamespace, _params: object) -> None:
        context.trace_request_ctx[REUSED] = 1.0

    async def exchange(self, data: bytes, sink: Sink | None, timeout_s: float,
                       stamp: dict[str, float]) -> Response:
        head, _, body = data.partition(b"\r\n\r\n")
        line, *fields = head.decode("latin-1").split("\r\n")
        method, target, _ = line.split(" ", 2)
        headers = {name: value for name, _, value in (text.partition(": ") for text in fields)}
        route = self.route
        auth = {"Proxy-Authorization": route.proxy_auth} if route.proxy_auth else None
        if auth is not None and route.scheme == "http":
            headers.update(auth)  # aiohttp puts proxy_headers on a CONNECT only
        url = f"{route.scheme}://{route.authority}{target}"
        try:
            async with asyncio.timeout(timeout_s):
                for attempt in (1, 2):  # the second on a new connection, as the plain pool does
                    answered = False
                    try:
                        async with self.session.request(
                                method, url, headers=headers, data=body or None, proxy=route.proxy,
                                proxy_headers=auth, allow_redirects=False,
                                trace_request_ctx=stamp) as response:
                            answered = True
                            stamp.pop(REUSED, None)
                            return await self._read(response, sink)
                    except aiohttp.ServerDisconnectedError:
                        # A kept-alive connection the server closed as the request went out.
                        if answered or attempt == 2 or stamp.pop(REUSED, None) is None:
                            raise
                        stamp.pop("sent", None)
                raise AssertionError("unreachable")  # pragma: no cover
        except TimeoutError as exc:
            if isinstance(exc, aiohttp.ConnectionTimeoutError):
                where = f"the proxy ({route.proxy_label})" if route.proxy else route.authority
                raise StreamError("timeout", f"could not connect to {where} within "
                                             f"{CONNECT_TIMEOUT_S:g} s") from None
            raise StreamError("timeout", f"no complete answer within {timeout_s:g} s") from None
        except aiohttp.ClientError as exc:
            raise self._error(exc) from None

    async def _read(self, response: aiohttp.ClientResponse, sink: Sink | None) -> Response:
        headers = {name.lower(): ", ".join(response.headers.getall(name)) for name in response.headers}
        if response.status != 200 or "text/event-stream" not in headers.get("content-type", ""):
            sink = None
        kept = bytearray()
        async for data in response.content.iter_any():
            if sink is not None:
                sink(data, self.clock())
            elif len(kept) < MAX_KEPT_BODY_BYTES:
                kept += data[:MAX_KEPT_BODY_BYTES - len(kept)]
        return Response(response.status, response.reason or "", headers, bytes(kept), sink is not None)

    def _error(self, exc: aiohttp.ClientError) -> StreamError:
        route = self.route
        if isinstance(exc, aiohttp.ClientSSLError):
            via = f" through {route.proxy_label}" if route.proxy else ""
            return StreamError("tls_error", f"TLS with {route.authority}{via} failed: {exc.os_error}")
        if isinstance(exc, aiohttp.ClientConnectorError):
            return _connect_error(route, exc.os_error)
        if isinstance(exc, aiohttp.ClientHttpProxyError):
            return StreamError("proxy_error", f"the proxy ({route.proxy_label}) refused to tunnel to "
                                              f"{route.authority}: HTTP {exc.status} {exc.message}")
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            return StreamError("connection_reset", "the server closed the connection before answering")
        return StreamError("connection_reset", f"the exchange with {route.authority} broke off: "
                                               f"{type(exc).__name__}: {exc}")
