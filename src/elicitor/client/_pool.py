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
transport altogether (see ``client/_http.py``). What this transport does not speak: HTTP/2 (pass ``http=`` a
client made with ``http2=True``) and pipelining (never needed: one request per connection at a time).

Errors are ``httpx``'s, as its own transport raises them (``ConnectError``, ``ReadError``, ``RemoteProtocolError``,
timeouts), so callers handle one family whatever the transport.
"""

from __future__ import annotations

import contextlib
import functools
import select
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import httptools
import httpx2 as httpx
from anyio.streams.tls import TLSAttribute

DEFAULT_LIMITS = httpx.Limits(max_connections=4096, max_keepalive_connections=32, keepalive_expiry=4.0)
"""The default for ``Client.http``: room for thousands of calls waiting at once (each holds a connection), and up
to 32 idle connections per server kept for reuse for 4 seconds: less than the 5 s after which uvicorn, hypercorn
and Node close an idle connection, so a request is not sent on a connection the server is closing that moment
(a connection a server already closed is noticed before use, whatever its timeout)."""

MAX_HEAD = 64 * 1024
"""The most bytes a response's status line and headers may take: a server that sends more is refused."""

_READ = 64 * 1024

Timeouts = dict[str, "float | None"]
"""Seconds per phase, as ``httpx`` names them: ``connect``, ``write``, ``read``, ``pool`` (``None``: no limit)."""


@functools.cache
def default_tls() -> ssl.SSLContext:
    """The verifying TLS context every connection of this process shares.

    Making one loads the system's certificate authorities, about 20 ms of CPU: a program that opens a client per
    session (50 sessions, say) paid that for each, a second of CPU, even for ``http://`` servers. A context is
    safe to share between connections; ``verify=`` given to the transport still wins.
    """
    context = httpx.create_ssl_context()
    context.set_alpn_protocols(["http/1.1"])
    return context


def _tls_context(verify: ssl.SSLContext | bool) -> ssl.SSLContext:
    if isinstance(verify, ssl.SSLContext):
        return verify
    if verify is True:
        return default_tls()
    context = httpx.create_ssl_context(verify=verify)
    context.set_alpn_protocols(["http/1.1"])
    return context


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
        self._idle: dict[tuple[bytes, bytes, int], deque[_Connection]] = {}
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
        body = _body(request)
        connection = await self.exchange(
            url.raw_scheme, url.raw_host, url.port, _head(request), body, timeouts, request.method == "HEAD", request
        )
        if body is None:  # a streamed body: sent after the head (exchange has read nothing yet)
            try:
                await _stream_body(connection, request, timeouts.get("write"))
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
    ) -> _Connection:
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

    async def _take_idle(self, origin: tuple[bytes, bytes, int]) -> _Connection | None:
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
    ) -> _Connection:
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
            return _Connection(await _connect_stream(origin, self._verify, timeouts.get("connect"), request), origin)
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

    async def _release(self, connection: _Connection) -> None:
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

    async def _drop(self, connection: _Connection) -> None:
        self._open -= 1
        self._wake()
        await connection.close()


class _Connection:
    """One HTTP/1.1 connection and the parser of the response being read on it."""

    __slots__ = (
        "_body_length",
        "_filled",
        "_head_size",
        "_keep_alive",
        "_messages",
        "_parser",
        "_problem",
        "_raw_socket",
        "chunks",
        "complete",
        "head_done",
        "headers",
        "idle_since",
        "origin",
        "status",
        "stream",
    )

    def __init__(self, stream: anyio.abc.ByteStream, origin: tuple[bytes, bytes, int]) -> None:
        self.stream = stream
        self.origin = origin
        self._raw_socket: Any = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        self.idle_since = 0.0
        self.prepare()

    def prepare(self) -> None:
        """Ready for the next request on this connection: a new parser, nothing read."""
        self._parser = httptools.HttpResponseParser(self)
        self._messages = 0
        self._head_size = 0
        self._filled = False
        self._problem: str | None = None
        self._keep_alive = False
        self._body_length: str | None = None  # "length", "chunked", or "close" (the body ends with the connection)
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.head_done = False
        self.complete = False

    # httptools' callbacks (the parser calls them on this object as it reads)

    def on_message_begin(self) -> None:
        self._messages += 1

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._messages == 1 and not self.head_done:  # after the head: a chunked body's trailers, not headers
            self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self._messages != 1:
            return  # a response after the one asked for: ignored, and the connection is not used again
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.headers = []  # an informational response (103 Early Hints, say): the real one follows
            self._messages -= 1
            return
        self.status = status
        self.head_done = True
        if sum(len(name) + len(value) + 4 for name, value in self.headers) > MAX_HEAD:
            self._problem = "the response's headers are too large"
        elif status < 100:
            self._problem = f"the server's status {status} is not an HTTP status"
        elif status == 101:  # nothing here asks to switch protocols (and llhttp upgrades only with Upgrade)
            self._problem = "the server switched protocols unasked"
        codings = b",".join(value for name, value in self.headers if name.lower() == b"transfer-encoding")
        if status in (204, 304):
            self._body_length = "length"
        elif codings:  # chunked only when it is the last coding; any other ends with the connection (RFC 9112, 6.3)
            last = codings.rsplit(b",", 1)[-1].strip().lower()
            self._body_length = "chunked" if last == b"chunked" else "close"
        elif any(name.lower() == b"content-length" for name, _ in self.headers):
            self._body_length = "length"
        else:
            self._body_length = "close"

    def on_body(self, body: bytes) -> None:
        if self._messages == 1:
            self.chunks.append(body)

    def on_message_complete(self) -> None:
        if self.head_done and self._messages == 1:
            self.complete = True
            self._keep_alive = self._parser.should_keep_alive()

    # reading and writing

    async def write(self, data: bytes, timeout: float | None, request: httpx.Request | None) -> None:
        try:
            if timeout is None:
                await self.stream.send(data)
            else:
                with anyio.fail_after(timeout):
                    await self.stream.send(data)
        except TimeoutError as exc:
            raise httpx.WriteTimeout("sending the request timed out", request=request) from exc
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpx.WriteError(str(exc) or "the connection is closed", request=request) from exc

    async def read_head(self, timeout: float | None, request: httpx.Request | None, head_only: bool) -> None:
        while not self.head_done:
            await self.fill(timeout, request)
        if head_only:  # a HEAD response has no body, whatever its headers say
            self.chunks.clear()
            self.complete = True
            self._keep_alive = False

    async def fill(self, timeout: float | None, request: httpx.Request | None) -> None:
        """Read what the server sent next and parse it (at least one byte, or the end of the body)."""
        try:
            if timeout is None:
                data = await self.stream.receive(_READ)
            else:
                with anyio.fail_after(timeout):
                    data = await self.stream.receive(_READ)
        except anyio.EndOfStream:
            if self.head_done and self._body_length == "close":
                self.complete = True  # the body ended with the connection, as its headers said it would
                self._keep_alive = False
                return
            what = "sending the rest of the response" if self.head_done else "sending a response"
            raise httpx.RemoteProtocolError(
                f"the server closed the connection without {what}", request=request
            ) from None
        except TimeoutError as exc:
            raise httpx.ReadTimeout("reading the response timed out", request=request) from exc
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpx.ReadError(str(exc) or "the connection is closed", request=request) from exc
        self._filled = len(data) >= _READ
        if not self.head_done:
            self._head_size += len(data)
            if self._head_size > MAX_HEAD + _READ:
                raise httpx.RemoteProtocolError("the response's headers are too large", request=request)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            raise httpx.RemoteProtocolError("the server switched protocols unasked", request=request) from exc
        except httptools.HttpParserError as exc:
            if not self.complete:
                problem = f"the server's response is not HTTP/1.1: {exc}"
                raise httpx.RemoteProtocolError(problem, request=request) from exc
            self._messages += 1  # what follows a complete response is not ours to read: the connection is spent
        if self._problem is not None:
            raise httpx.RemoteProtocolError(self._problem, request=request)

    @property
    def http_version(self) -> bytes:
        major, minor = self._parser.get_http_version().split(".")
        return b"HTTP/%s.%s" % (major.encode(), minor.encode())

    def reusable(self) -> bool:
        """Whether the next request may use this connection: its response ended cleanly, the server keeps it
        open, nothing followed the response, and the last read was not a full one (anyio may hold the rest of a
        longer read, which ``stale`` cannot see)."""
        return self.complete and self._keep_alive and self._messages == 1 and not self._filled

    def stale(self) -> bool:
        """Whether an idle connection has something to read: the server closed it (or sent what it should not)."""
        sock = self._raw_socket
        if sock is None:
            return False
        try:
            if _poll is not None:  # no ceiling on descriptor numbers, unlike select (1024)
                poller = _poll()
                poller.register(sock, select.POLLIN)
                return bool(poller.poll(0))
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    async def close(self) -> None:
        await _close_quietly(self.stream)


class _Body(httpx.AsyncByteStream):
    """A response's body as it arrives; closing it gives the connection back to the pool (or closes it)."""

    __slots__ = ("_connection", "_open", "_request", "_timeout", "_transport")

    def __init__(
        self, transport: PooledTransport, connection: _Connection, timeout: float | None, request: httpx.Request | None
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


async def _connect_stream(
    origin: tuple[bytes, bytes, int],
    verify: ssl.SSLContext | bool,
    timeout: float | None,
    request: httpx.Request | None,
) -> anyio.abc.ByteStream:
    """A TCP (and for https, TLS speaking HTTP/1.1) stream to ``origin``, or ``httpx``'s connect errors."""
    scheme, host, port = origin
    name = host.decode("ascii")
    stream: anyio.abc.ByteStream
    try:
        with anyio.fail_after(timeout):
            if scheme == b"https":
                context = _tls_context(verify)
                stream = await anyio.connect_tcp(name, port, ssl_context=context, tls_standard_compatible=False)
            else:
                stream = await anyio.connect_tcp(name, port)
    except TimeoutError as exc:
        raise httpx.ConnectTimeout(f"connecting to {name}:{port} timed out", request=request) from exc
    except (OSError, ssl.SSLError, anyio.BrokenResourceError) as exc:
        raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
    chosen = stream.extra(TLSAttribute.alpn_protocol, None) if scheme == b"https" else None
    if chosen not in (None, "http/1.1"):  # a context of the caller's that offered h2, say
        await _close_quietly(stream)
        message = f"the server chose {chosen!r}, and this transport speaks HTTP/1.1 (pass http= for HTTP/2)"
        raise httpx.ConnectError(message, request=request)
    return stream


async def _close_quietly(stream: anyio.abc.ByteStream) -> None:
    with anyio.CancelScope(shield=True), contextlib.suppress(OSError, anyio.BrokenResourceError, ssl.SSLError):
        await stream.aclose()


_poll = getattr(select, "poll", None)
_BAD_NAME = frozenset(b' \t\r\n:\0(),/;<=>?@[\\]{}"')
_BAD_VALUE = frozenset(b"\r\n\0")


def _head(request: httpx.Request) -> bytes:
    """The request line and headers, as sent; a header that would break the request is refused (httpx leaves
    that to its transport: an ``Authorization`` value from a token server, say, is sent as it came)."""
    url = request.url
    target = url.raw_path or b"/"
    lines = [request.method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    for name, value in request.headers.raw:
        _check(name, value)
        lines += (name, b": ", value, b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


def _body(request: httpx.Request) -> bytes | None:
    """The request's body when it is already in memory (``content=`` bytes, JSON...), else ``None`` (streamed)."""
    try:
        content = request.content
    except httpx.RequestNotRead:
        return None
    if b"transfer-encoding" in {name.lower() for name, _ in request.headers.raw}:  # read already, but chunked
        return b"%x\r\n%s\r\n0\r\n\r\n" % (len(content), content) if content else b"0\r\n\r\n"
    return content


async def _stream_body(connection: _Connection, request: httpx.Request, timeout: float | None) -> None:
    """Send a streamed request body: as is under ``Content-Length``, else chunked (httpx sets the header)."""
    chunked = b"transfer-encoding" in {name.lower() for name, _ in request.headers.raw}
    stream = request.stream
    assert isinstance(stream, httpx.AsyncByteStream)
    async for chunk in stream:
        if chunk:
            await connection.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk, timeout, request)
    if chunked:
        await connection.write(b"0\r\n\r\n", timeout, request)


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


def check_header(name: str, value: str) -> tuple[bytes, bytes]:
    """A header as the lean path sends it (lowercase name); one that would break the request is refused."""
    try:
        pair = name.lower().encode("ascii"), value.encode("latin-1")
    except UnicodeEncodeError:
        raise httpx.LocalProtocolError(f"header {name!r} cannot be sent: it is not Latin-1") from None
    _check(*pair)
    return pair


def _check(name: bytes, value: bytes) -> None:
    """Refuse a header name that is not a token or a value with a line break or NUL (RFC 9110, 5.1 and 5.5)."""
    if not name or _BAD_NAME.intersection(name) or _BAD_VALUE.intersection(value):
        raise httpx.LocalProtocolError(f"header {name[:64]!r} cannot be sent: its name or value is malformed")
