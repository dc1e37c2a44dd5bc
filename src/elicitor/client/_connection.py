"""One HTTP/1.1 connection of the client's pool (``_pool``): opening it (TCP, and TLS for https), writing a
request, and reading the response through llhttp (httptools), within the limits a hostile server cannot stretch.

The pool decides which connection serves a request and when one is kept or closed; this module knows nothing of
other connections. Errors are ``httpx``'s, as its own transport raises them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import select
import ssl
from typing import Any

import anyio
import anyio.abc
import httptools
import httpx2 as httpx
from anyio.streams.tls import TLSAttribute

MAX_HEAD = 64 * 1024
"""The most bytes a response's status line and headers may take: a server that sends more is refused."""


_READ = 64 * 1024


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


class Connection:
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
        "_transport",
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
        transport = getattr(stream, "_transport", None)  # anyio's TCP stream on asyncio; not a TLS stream's
        self._transport = transport if isinstance(transport, asyncio.WriteTransport) else None
        """The asyncio transport under a plain TCP stream, which :meth:`write` hands a request to directly."""
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
        """Send ``data`` within ``timeout``.

        On plain TCP over asyncio ``data`` goes to the transport as anyio's stream would hand it, and when the
        kernel took every byte (a request's head and small body almost always) that is all: no timeout's cancel
        scope and none of the stream's checkpoint, a pass of the event loop after every write. Bytes left in the
        transport's buffer are waited for through the stream, as before, within ``timeout``.
        """
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(data)
            if not transport.get_write_buffer_size():
                return
            data = b""  # already buffered: what is left is to wait until the transport takes more
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
        await close_quietly(self.stream)


async def connect_stream(
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
        await close_quietly(stream)
        message = f"the server chose {chosen!r}, and this transport speaks HTTP/1.1 (pass http= for HTTP/2)"
        raise httpx.ConnectError(message, request=request)
    return stream


async def close_quietly(stream: anyio.abc.ByteStream) -> None:
    with anyio.CancelScope(shield=True), contextlib.suppress(OSError, anyio.BrokenResourceError, ssl.SSLError):
        await stream.aclose()


_poll = getattr(select, "poll", None)


_BAD_NAME = frozenset(b' \t\r\n:\0(),/;<=>?@[\\]{}"')


_BAD_VALUE = frozenset(b"\r\n\0")


def request_head(request: httpx.Request) -> bytes:
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


def request_body(request: httpx.Request) -> bytes | None:
    """The request's body when it is already in memory (``content=`` bytes, JSON...), else ``None`` (streamed)."""
    try:
        content = request.content
    except httpx.RequestNotRead:
        return None
    if b"transfer-encoding" in {name.lower() for name, _ in request.headers.raw}:  # read already, but chunked
        return b"%x\r\n%s\r\n0\r\n\r\n" % (len(content), content) if content else b"0\r\n\r\n"
    return content


async def stream_body(connection: Connection, request: httpx.Request, timeout: float | None) -> None:
    """Send a streamed request body: as is under ``Content-Length``, else chunked (httpx sets the header)."""
    chunked = b"transfer-encoding" in {name.lower() for name, _ in request.headers.raw}
    stream = request.stream
    assert isinstance(stream, httpx.AsyncByteStream)
    async for chunk in stream:
        if chunk:
            await connection.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk, timeout, request)
    if chunked:
        await connection.write(b"0\r\n\r\n", timeout, request)


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
