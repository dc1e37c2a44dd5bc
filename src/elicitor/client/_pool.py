"""The client's HTTP/1.1 connections: an ``httpx`` transport on anyio streams, parsed by httptools.

Why not httpx's own transport: over Streamable HTTP every answer to a server's question is a POST of its own, and
a client with many calls waiting holds one response stream open per call. Profiled on the benchmark's 50 sessions,
httpx's default transport (httpcore's pool and h11's pure-Python parser) took about three quarters of the client's
CPU and elicitor's own code 5 %; with a thousand streams open, httpcore's pool also looked at every connection on
each request, so answering n waiting questions cost O(n²). Here the parsing is llhttp's (through httptools, which
the server side already uses for uvicorn), the pool is a stack of idle connections per origin (O(1) to take and
give back), and nothing else runs per request: one write for the request head and a small body, one read loop.

What stays httpx's: the client API (``Client.http(http=...)`` takes any ``httpx.AsyncClient``), auth flows (OAuth
sign-in is an ``httpx.Auth``), cookies and redirects; a proxy from the environment is left to ``httpx``'s own
transport altogether (see ``client/_endpoint.py``). What this transport does not speak: HTTP/2 (pass ``http=`` a
client made with ``http2=True``) and pipelining (never needed: one request per connection at a time).

Errors are ``httpx``'s, as its own transport raises them (``ConnectError``, ``ReadError``, ``RemoteProtocolError``,
timeouts), so callers handle one family whatever the transport.
"""

from __future__ import annotations

import ssl
import time
from collections import deque
from collections.abc import AsyncIterator

import anyio
import anyio.abc
import httpx2 as httpx

from ._connection import Connection, connect_stream, request_body, request_head, stream_body

DEFAULT_LIMITS = httpx.Limits(max_connections=4096, max_keepalive_connections=32, keepalive_expiry=4.0)
"""The default for ``Client.http``: room for thousands of calls waiting at once (each holds a connection), and up
to 32 idle connections per server kept for reuse for 4 seconds: less than the 5 s after which uvicorn, hypercorn
and Node close an idle connection, so a request is not sent on a connection the server is closing that moment
(a connection a server already closed is noticed before use, whatever its timeout)."""


Timeouts = dict[str, "float | None"]
"""Seconds per phase, as ``httpx`` names them: ``connect``, ``write``, ``read``, ``pool`` (``None``: no limit)."""


class PooledTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 for ``httpx.AsyncClient``: connections kept per origin, responses parsed by llhttp.

    Args:
        limits: ``max_connections`` bounds the open connections (``None``: no bound), and a request beyond it
            waits for one (``httpx``'s ``pool`` timeout); ``max_keepalive_connections`` idle connections per
            origin are kept for reuse (``None``: as many as are open) for ``keepalive_expiry`` seconds.
        verify: ``True`` (the system's authorities, or ``SSL_CERT_FILE``), ``False`` (no check: for tests), or an
            ``ssl.SSLContext`` of your own (``ssl.create_default_context(cafile=...)``).
    """

    def __init__(self, limits: httpx.Limits = DEFAULT_LIMITS, *, verify: ssl.SSLContext | bool = True) -> None:
        self._max_connections = limits.max_connections
        self._max_idle = limits.max_keepalive_connections
        self._expiry = limits.keepalive_expiry
        self._verify = verify
        self._idle: dict[tuple[bytes, bytes, int], deque[Connection]] = {}
        self._open = 0
        self._freed: anyio.Event | None = None
        self._closed = False

    @property
    def connections(self) -> int:
        """How many connections are open, idle or busy (for tests and diagnostics)."""
        return self._open

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        body = request_body(request)
        connection = await self.exchange(
            url.raw_scheme,
            url.raw_host,
            url.port,
            request_head(request),
            body,
            timeouts,
            request.method == "HEAD",
            request,
        )
        if body is None:  # a streamed body: sent after the head (exchange has read nothing yet)
            try:
                await stream_body(connection, request, timeouts.get("write"))
                await connection.read_head(timeouts.get("read"), request, request.method == "HEAD")
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._drop(connection)
                raise
        return httpx.Response(
            connection.status,
            headers=connection.headers,
            stream=_Body(self, connection, timeouts.get("read"), request),
            extensions={"http_version": connection.http_version, "reason_phrase": b""},
        )

    async def request(
        self, url: Target, method: bytes, headers: list[tuple[bytes, bytes]], body: bytes, timeouts: Timeouts
    ) -> RawResponse:
        """Send one request and return its response once its head is in, the body still to read.

        The lean path for ``Client.http``'s own requests (no ``httpx`` models on the way): ``headers`` are sent as
        given after ``Host`` (the URL's, unless ``headers`` has one) and ``Content-Length``, and must already be
        valid, by lowercase name, without ``Content-Length`` or ``Transfer-Encoding`` (see :func:`check_header`).
        """
        host = [] if any(name == b"host" for name, _ in headers) else [b"host: ", url.host_header, b"\r\n"]
        head = b"".join(
            [method, b" ", url.target, b" HTTP/1.1\r\n", *host, b"content-length: ", str(len(body)).encode(),
             b"\r\n", *[b"%s: %s\r\n" % pair for pair in headers], b"\r\n"]
        )  # fmt: skip
        connection = await self.exchange(url.scheme, url.host, url.port, head, body, timeouts, method == b"HEAD")
        return RawResponse(connection.status, connection.headers, _Body(self, connection, timeouts.get("read"), None))

    async def exchange(
        self,
        scheme: bytes,
        host: bytes,
        port: int | None,
        head: bytes,
        body: bytes | None,
        timeouts: Timeouts,
        head_only: bool,
        request: httpx.Request | None = None,
    ) -> Connection:
        """Send ``head`` and ``body`` on a connection to the origin; with a body, read the response's head too."""
        if self._closed:
            raise httpx.ConnectError("the client's connections are closed", request=request)
        if scheme not in (b"http", b"https"):
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{scheme.decode()}://'.")
        origin = (scheme, host, port or (443 if scheme == b"https" else 80))
        connection = await self._take_idle(origin) or await self._connect(origin, timeouts, request)
        try:
            if body is None:
                await connection.write(head, timeouts.get("write"), request)
            else:
                await connection.write(head + body, timeouts.get("write"), request)
                await connection.read_head(timeouts.get("read"), request, head_only)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._drop(connection)
            raise
        return connection

    async def aclose(self) -> None:
        self._closed = True
        self._wake()  # a request waiting for a connection learns that none will come
        idle = [connection for stack in self._idle.values() for connection in stack]
        self._idle.clear()
        with anyio.CancelScope(shield=True):
            for connection in idle:
                await self._drop(connection)

    # ---- the pool --------------------------------------------------------------------------------------------

    async def _take_idle(self, origin: tuple[bytes, bytes, int]) -> Connection | None:
        """The most recently used idle connection to ``origin`` that is still good, if any."""
        stack = self._idle.get(origin)
        if not stack:
            return None
        now = time.monotonic()
        while stack:
            connection = stack.pop()
            if (self._expiry is not None and now - connection.idle_since > self._expiry) or connection.stale():
                await self._drop(connection)
                continue
            return connection
        return None

    async def _connect(
        self, origin: tuple[bytes, bytes, int], timeouts: Timeouts, request: httpx.Request | None
    ) -> Connection:
        """A new connection to ``origin``; at the limit, one given back meanwhile, or room made by closing an idle
        connection to another origin, or else a wait for either."""
        limit = self._max_connections
        if limit is not None and self._open >= limit:
            try:
                with anyio.fail_after(timeouts.get("pool")):
                    while self._open >= limit:
                        if self._closed:
                            raise httpx.ConnectError("the client's connections are closed", request=request)
                        if not await self._evict_one_idle():
                            if self._freed is None:
                                self._freed = anyio.Event()
                            await self._freed.wait()
                            reused = await self._take_idle(origin)
                            if reused is not None:
                                return reused
            except TimeoutError as exc:
                raise httpx.PoolTimeout(f"no connection became free within {limit} open", request=request) from exc
        self._open += 1
        try:
            return Connection(await connect_stream(origin, self._verify, timeouts.get("connect"), request), origin)
        except BaseException:
            self._open -= 1
            self._wake()
            raise

    async def _evict_one_idle(self) -> bool:
        """Close an idle connection to another origin (the oldest of the first one found), to make room."""
        for stack in self._idle.values():
            if stack:
                await self._drop(stack.popleft())
                return True
        return False

    def _wake(self) -> None:
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    async def _release(self, connection: Connection) -> None:
        """A response is closed: keep its connection for the next request if it can serve one, else close it."""
        if connection.reusable() and not self._closed:
            stack = self._idle.setdefault(connection.origin, deque())
            if self._max_idle is None or len(stack) < self._max_idle:
                connection.prepare()
                connection.idle_since = time.monotonic()
                stack.append(connection)
                self._wake()
                return
        await self._drop(connection)

    async def _drop(self, connection: Connection) -> None:
        self._open -= 1
        self._wake()
        await connection.close()


class _Body(httpx.AsyncByteStream):
    """A response's body as it arrives; closing it gives the connection back to the pool (or closes it)."""

    __slots__ = ("_connection", "_open", "_request", "_timeout", "_transport")

    def __init__(
        self, transport: PooledTransport, connection: Connection, timeout: float | None, request: httpx.Request | None
    ) -> None:
        self._transport = transport
        self._connection = connection
        self._timeout = timeout
        self._request = request
        self._open = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while True:
            if connection.chunks:
                chunks = connection.chunks
                connection.chunks = []
                for chunk in chunks:
                    yield chunk
            if connection.complete or not self._open:
                return
            await connection.fill(self._timeout, self._request)

    @property
    def http_version(self) -> str:
        """The HTTP version of the response on this connection (``HTTP/1.1``)."""
        return self._connection.http_version.decode("ascii")

    async def aclose(self) -> None:
        if not self._open:
            return
        self._open = False
        connection = self._connection
        if connection.reusable():
            await self._transport._release(connection)
        else:
            with anyio.CancelScope(shield=True):
                await self._transport._drop(connection)


class Target:
    """Where the lean path sends requests: one URL, taken apart once."""

    __slots__ = ("host", "host_header", "port", "scheme", "target")

    def __init__(self, url: str) -> None:
        parsed = httpx.URL(url)
        self.scheme = parsed.raw_scheme
        self.host = parsed.raw_host
        self.port = parsed.port
        self.target = parsed.raw_path or b"/"
        self.host_header = parsed.netloc


class RawResponse:
    """A response read by :meth:`PooledTransport.request`: its status, headers and body, as ``httpx`` names them.

    Close it (:meth:`aclose`) once done, read or not: that gives its connection back.
    """

    __slots__ = ("_body", "_raw", "headers", "status_code")

    def __init__(self, status: int, raw: list[tuple[bytes, bytes]], body: _Body) -> None:
        self.status_code = status
        self._raw = raw
        self.headers = _Headers(raw)
        self._body = body

    @property
    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        return self._raw

    @property
    def http_version(self) -> str:
        """The HTTP version the server answered in (``HTTP/1.1``), as ``httpx`` names it: for telemetry, which
        asks only when it is on (the parser's version is not read on every response)."""
        return self._body.http_version

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        async for chunk in self._body:
            yield chunk

    async def aread(self) -> bytes:
        return b"".join([chunk async for chunk in self._body])

    async def aclose(self) -> None:
        await self._body.aclose()


class _Headers:
    """Response headers by lowercase name (joined with ", " when repeated, as HTTP allows)."""

    __slots__ = ("_values",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        values: dict[str, str] = {}
        for name, value in raw:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            values[key] = f"{values[key]}, {text}" if key in values else text
        self._values = values

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values
