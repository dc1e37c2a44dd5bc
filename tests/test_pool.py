"""The client's HTTP/1.1 connections (client/_pool.py): reuse, limits, hostile responses, TLS, and the lean path.

Servers are real: uvicorn for well-behaved ones, a raw TCP listener for a server that sends what it should not.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2 as httpx
import pytest

from elicitor import Accepted, Client, Context, Outcome, Server
from elicitor.client._connection import _READ, MAX_HEAD, default_tls
from elicitor.client._http import HttpClientTransport
from elicitor.client._pool import PooledTransport, Target
from elicitor.server.http._asgi import read_body

from .conftest import self_signed, serving

ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio


class Held:
    """An ASGI app whose every response streams until ``release`` is set; it counts the connections it saw."""

    def __init__(self, hold: bool = True) -> None:
        self.release = anyio.Event()
        self.waiting = 0
        self.peers: list[Any] = []
        self.hold = hold

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = await read_body(receive, 1 << 20) or b""
        self.peers.append(tuple(scope["client"]))
        headers = [(b"content-type", b"text/plain")]
        if scope["path"] == "/cookie":
            headers.append((b"set-cookie", b"affinity=replica-2; Path=/"))
        if scope["path"] == "/echo":
            cookie = dict(scope["headers"]).get(b"cookie", b"-")
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body + b"|" + cookie})
            return
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"start ", "more_body": True})
        if self.hold:
            self.waiting += 1
            await self.release.wait()
        await send({"type": "http.response.body", "body": b"done"})


async def hold(http: httpx.AsyncClient, url: str, bodies: list[bytes]) -> None:
    async with http.stream("GET", url) as response:
        bodies.append(b"".join([chunk async for chunk in response.aiter_bytes()]))


@ASYNCIO
@pytest.mark.parametrize("max_connections", [None, 40])
async def test_streams_wait_for_a_connection_within_the_limit(anyio_backend: str, max_connections: int | None) -> None:
    app = Held()
    transport = PooledTransport(httpx.Limits(max_connections=max_connections, max_keepalive_connections=None))
    bodies: list[bytes] = []
    async with serving(app) as url, httpx.AsyncClient(transport=transport, timeout=30) as http:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(70):
                    tg.start_soon(hold, http, url, bodies)
                expected = 70 if max_connections is None else max_connections
                while app.waiting < expected:
                    await anyio.sleep(0.01)
                await anyio.sleep(0.1)  # any request beyond the limit would have reached the app by now
                assert app.waiting == expected  # the rest wait for a connection
                assert transport.connections == expected
                app.release.set()
    assert bodies == [b"start done"] * 70
    assert len(set(app.peers)) == (max_connections or 70)  # those beyond the limit took connections given back


@ASYNCIO
async def test_a_connection_is_reused_and_a_response_closed_early_is_not(anyio_backend: str) -> None:
    app = Held(hold=False)
    transport = PooledTransport()
    async with serving(app) as url, httpx.AsyncClient(transport=transport) as http:
        for _ in range(5):
            assert (await http.post(url, content=b"x")).content == b"start done"
        assert len(set(app.peers)) == 1 and transport.connections == 1
        app.hold = True  # its body cannot end before the block is left, however fast the loopback
        async with http.stream("GET", url) as response:  # left before its body ended: the connection cannot serve
            assert response.status_code == 200
        assert transport.connections == 0
        app.release.set()
        assert (await http.get(url)).content == b"start done"
        assert len(set(app.peers)) == 2


@ASYNCIO
@pytest.mark.parametrize(
    ("expiry", "server", "idle"),
    [(60.0, {"timeout_keep_alive": 1}, 1.5), (0.2, {}, 0.4)],
    ids=["closed-by-the-server", "past-its-expiry"],
)
async def test_an_idle_connection_the_server_closed_or_past_its_expiry_is_not_used(
    anyio_backend: str, expiry: float, server: dict[str, Any], idle: float
) -> None:
    """uvicorn closes an idle connection after its keep-alive timeout, and ours expire: a new one is taken."""
    app = Held(hold=False)
    transport = PooledTransport(httpx.Limits(keepalive_expiry=expiry))
    async with serving(app, **server) as url, httpx.AsyncClient(transport=transport) as http:
        assert (await http.get(url)).content == b"start done"
        assert (await http.get(url)).content == b"start done"
        await anyio.sleep(idle)
        assert (await http.get(url)).content == b"start done"
    assert len(set(app.peers)) == 2


@ASYNCIO
async def test_a_streamed_request_body_is_sent_chunked(anyio_backend: str) -> None:
    app = Held(hold=False)

    async def parts() -> AsyncIterator[bytes]:
        for part in (b"one ", b"", b"two"):
            yield part

    async with serving(app) as url, httpx.AsyncClient(transport=PooledTransport()) as http:
        response = await http.post(url.replace("/mcp", "/echo"), content=parts())
    assert response.content == b"one two|-"


@ASYNCIO
async def test_a_body_larger_than_the_socket_takes_at_once_arrives_whole(anyio_backend: str) -> None:
    """Most of a large body waits in the connection's buffer until the server reads it: all of it arrives, in
    order, on the httpx path and on the lean path, and the connection serves the next request."""
    body = bytes(range(256)) * 3000  # 768 kB, more than the kernel's socket buffers take at once
    transport = PooledTransport()
    async with serving(Held(hold=False)) as url, httpx.AsyncClient(transport=transport) as http:
        with anyio.fail_after(20):
            first = await http.post(url.replace("/mcp", "/echo"), content=body)
            timeouts: dict[str, float | None] = {"connect": 5.0, "write": 5.0, "pool": 5.0, "read": 5.0}
            lean = await transport.request(Target(url.replace("/mcp", "/echo")), b"POST", [], body, timeouts)
            try:
                second = await lean.aread()
            finally:
                await lean.aclose()
            third = await http.post(url.replace("/mcp", "/echo"), content=b"small")
        assert transport.connections == 1
    assert first.content == body + b"|-" and second == body + b"|-" and third.content == b"small|-"


# ---- a server that sends what it should not ---------------------------------------------------------------------


@asynccontextmanager
async def listening(handler: Callable[[anyio.abc.SocketStream], Awaitable[None]]) -> AsyncIterator[str]:
    """A TCP server on loopback running ``handler`` for each connection (a peer that leaves ends it quietly)."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def serve(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await handler(stream)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            tg.cancel_scope.cancel()


def raw_server(reply: Callable[[anyio.abc.SocketStream], Awaitable[None]]) -> AbstractAsyncContextManager[str]:
    """A server that reads a request's head and then lets ``reply`` write whatever it likes."""

    async def handler(stream: anyio.abc.SocketStream) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            head += await stream.receive()
        await reply(stream)

    return listening(handler)


def sends(*chunks: bytes, close: bool = True) -> Callable[[anyio.abc.SocketStream], Awaitable[None]]:
    async def reply(stream: anyio.abc.SocketStream) -> None:
        for chunk in chunks:
            await stream.send(chunk)
            await anyio.sleep(0.01)
        if not close:
            await anyio.sleep(5)

    return reply


@ASYNCIO
@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ((b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhel", b"lo"), b"hello"),
        ((b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nhel\r\n", b"2\r\nlo\r\n0\r\n\r\n"), b"hello"),
        ((b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nhel", b"lo"), b"hello"),  # ends with the connection
        ((b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n", b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"), b"ok"),
    ],
    ids=["length", "chunked", "close-delimited", "early-hints"],
)
async def test_what_a_server_may_send_is_read(anyio_backend: str, chunks: tuple[bytes, ...], expected: bytes) -> None:
    async with raw_server(sends(*chunks)) as url, httpx.AsyncClient(transport=PooledTransport()) as http:
        with anyio.fail_after(5):
            response = await http.get(url)
    assert response.status_code == 200 and response.content == expected


@ASYNCIO
@pytest.mark.parametrize(
    ("chunks", "complaint"),
    [
        ((b"SSH-2.0-OpenSSH_9.6\r\n",), "not HTTP/1.1"),
        ((b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf",), "without sending the rest of the response"),
        ((b"",), "without sending a response"),
        ((b"HTTP/1.1 200 OK\r\n" + b"x-filler: " + b"a" * (MAX_HEAD + 10) + b"\r\n\r\n",), "too large"),
        ((b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\n",), "switched protocols"),
    ],
    ids=["not-http", "short-body", "nothing", "huge-head", "upgrade"],
)
async def test_a_hostile_response_is_a_protocol_error(
    anyio_backend: str, chunks: tuple[bytes, ...], complaint: str
) -> None:
    transport = PooledTransport()
    async with raw_server(sends(*chunks)) as url, httpx.AsyncClient(transport=transport) as http:
        with anyio.fail_after(5), pytest.raises(httpx.RemoteProtocolError, match=complaint):
            await http.get(url)
    assert transport.connections == 0  # nothing kept of it


@ASYNCIO
async def test_an_endless_header_stream_is_cut_off(anyio_backend: str) -> None:
    """A server that sends header lines forever is refused after MAX_HEAD bytes, not read into memory forever."""

    async def endless(stream: anyio.abc.SocketStream) -> None:
        await stream.send(b"HTTP/1.1 200 OK\r\n")
        for _ in range(10_000):
            await stream.send(b"x-more: " + b"a" * 1000 + b"\r\n")

    async with raw_server(endless) as url, httpx.AsyncClient(transport=PooledTransport()) as http:
        with anyio.fail_after(10), pytest.raises(httpx.RemoteProtocolError, match="too large"):
            await http.get(url)


@ASYNCIO
async def test_a_second_response_nobody_asked_for_spoils_the_connection(anyio_backend: str) -> None:
    both = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nno"
    transport = PooledTransport()
    async with raw_server(sends(both, close=False)) as url, httpx.AsyncClient(transport=transport) as http:
        with anyio.fail_after(5):
            response = await http.get(url)
    assert response.content == b"ok" and transport.connections == 0  # not kept: what follows is not ours


@ASYNCIO
async def test_a_silent_server_times_out_as_httpx_says(anyio_backend: str) -> None:
    async with raw_server(sends(close=False)) as url, httpx.AsyncClient(transport=PooledTransport()) as http:
        with anyio.fail_after(5), pytest.raises(httpx.ReadTimeout):
            await http.get(url, timeout=httpx.Timeout(5, read=0.2))


@ASYNCIO
async def test_a_server_that_reads_nothing_is_a_write_timeout(anyio_backend: str) -> None:
    """A body the server never reads fills the socket's buffers: the write times out (not the read after it).

    The server is a listening socket that never accepts: the kernel takes the connection and holds what arrives,
    up to a small receive buffer, and nothing more is read."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)  # what an accepted connection would get
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}/mcp"
        async with httpx.AsyncClient(transport=PooledTransport()) as http:
            with anyio.fail_after(8), pytest.raises(httpx.WriteTimeout):
                await http.post(url, content=b"x" * (16 << 20), timeout=httpx.Timeout(5, write=0.3, read=3))


@ASYNCIO
async def test_nobody_listening_is_a_connect_error(anyio_backend: str) -> None:
    from .conftest import free_port

    async with httpx.AsyncClient(transport=PooledTransport()) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{free_port()}/mcp")


# ---- TLS --------------------------------------------------------------------------------------------------------


@ASYNCIO
async def test_tls_verified_against_the_callers_authority_and_refused_otherwise(
    anyio_backend: str, tmp_path: Path
) -> None:
    cert, key = self_signed("localhost", tmp_path)
    app = Held(hold=False)
    async with serving(app, ssl_certfile=str(cert), ssl_keyfile=str(key)) as url:
        url = url.replace("http://127.0.0.1", "https://localhost")
        trusting = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(transport=PooledTransport(verify=trusting)) as http:
            assert (await http.get(url)).content == b"start done"
            assert (await http.get(url)).content == b"start done"
        assert len(set(app.peers)) == 1  # one TLS connection, kept
        async with httpx.AsyncClient(transport=PooledTransport()) as http:  # the system's authorities
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await http.get(url)


def test_every_pool_shares_one_tls_context() -> None:
    """Making a verifying TLS context costs ~20 ms of CPU (the CA bundle): one per process, not one per client."""
    from elicitor.client._connection import _tls_context

    assert _tls_context(True) is default_tls() is _tls_context(True)
    assert _tls_context(False) is not default_tls()  # a caller's choice still wins
    assert _tls_context(False).verify_mode == ssl.CERT_NONE


# ---- the MCP client on these connections ------------------------------------------------------------------------


@ASYNCIO
async def test_a_thousand_waiting_calls_are_answered(anyio_backend: str) -> None:
    """1,000 calls wait on a person at once over one session (each holds its response stream), then all are
    answered: the default limits leave room for them."""
    server = Server("many")
    pending = 0
    full, release = anyio.Event(), anyio.Event()

    @server.tool()
    async def ask(ctx: Context) -> str:
        return (await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})).action

    async def answer(request: Any) -> Outcome[Any]:
        nonlocal pending
        pending += 1
        if pending == 1000:
            full.set()
        await release.wait()
        return Accepted({"name": "x"})

    results: list[str] = []
    app = server.http_app()
    peers: set[Any] = set()

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            peers.add(tuple(scope["client"]))
        await app(scope, receive, send)

    async with serving(counted) as url:
        client = Client.http(url, elicitation=answer, protocol="2025-11-25")
        async with client:

            async def call() -> None:
                results.append((await client.call_tool("ask")).text)

            with anyio.fail_after(100):
                async with anyio.create_task_group() as tg:
                    for _ in range(1000):
                        tg.start_soon(call)
                    await full.wait()
                    release.set()
    assert results == ["accept"] * 1000
    # A thousand answers sent at once take turns on a few connections (at most 32 at a time) beside the thousand
    # response streams, rather than opening a thousand more for the server to hold (about 2,000 connections).
    assert len(peers) < 1200, len(peers)


@ASYNCIO
async def test_the_lean_path_sends_the_clients_headers_and_takes_cookies_to_httpx(anyio_backend: str) -> None:
    """Requests skip httpx's models, with the same headers; a server that sets a cookie (a balancer's affinity)
    gets it back on every later request, through httpx's jar."""
    app = Held(hold=False)
    async with serving(app) as url, anyio.create_task_group() as tg:
        base = url.removesuffix("/mcp")
        async with HttpClientTransport.connect(f"{base}/cookie", headers={"X-Team": "blue"}) as transport:
            assert transport._endpoint.lean is not None
            response = await transport._endpoint.open("POST", {"accept": "text/plain"}, b"one")
            assert (await response.aread()) == b"start done"
            await response.aclose()
            assert transport._endpoint.lean is None  # the cookie moved it to httpx's path
            transport._endpoint.url = f"{base}/echo"
            response = await transport._endpoint.open("POST", {}, b"two")
            assert (await response.aread()) == b"two|affinity=replica-2"
            await response.aclose()
        tg.cancel_scope.cancel()


@ASYNCIO
async def test_a_header_that_would_split_the_request_is_refused(anyio_backend: str) -> None:
    with pytest.raises(httpx.LocalProtocolError, match="malformed"):
        async with HttpClientTransport.connect("http://127.0.0.1:1/mcp", headers={"X-Team": "blue\r\nX-Evil: 1"}):
            pass


@ASYNCIO
async def test_a_client_of_your_own_carries_everything_with_your_headers(anyio_backend: str) -> None:
    server = Server("own")

    @server.tool()
    async def ask(ctx: Context) -> str:
        return (await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})).action

    async def answer(request: Any) -> Outcome[Any]:
        return Accepted({"name": "x"})

    seen: list[tuple[str, str | None]] = []

    async def record(request: httpx.Request) -> None:
        seen.append((request.method, request.headers.get("x-team")))

    async with serving(server.http_app()) as url, httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        client = Client.http(url, http=http, headers={"X-Team": "blue"}, elicitation=answer, protocol="2025-11-25")
        async with client:
            assert (await client.call_tool("ask")).text == "accept"
        assert not http.is_closed  # the caller's client stays theirs
    assert {method for method, _ in seen} >= {"POST", "DELETE"}
    assert all(team == "blue" for _, team in seen)


def test_limits_belong_on_a_client_of_your_own() -> None:
    with pytest.raises(ValueError, match="set limits on the http= client"):
        Client.http("http://127.0.0.1:1/mcp", http=httpx.AsyncClient(), limits=httpx.Limits(max_connections=5))


# ---- what a review of this transport found, each pinned ------------------------------------------------------------


class Requests:
    """A raw server that records each request's head and answers every one with ``reply`` (or ``first``)."""

    def __init__(self, reply: bytes, first: bytes | None = None) -> None:
        self.reply, self.first = reply, first
        self.heads: list[bytes] = []
        self.connections = 0

    async def __call__(self, stream: anyio.abc.SocketStream) -> None:
        self.connections += 1
        buffer = b""
        while True:  # until the client leaves (EndOfStream, which listening() takes quietly)
            while b"\r\n\r\n" not in buffer:
                buffer += await stream.receive()
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(buffer) < length:
                buffer += await stream.receive()
            buffer = buffer[length:]
            self.heads.append(head)
            await stream.send(self.first if self.first is not None and len(self.heads) == 1 else self.reply)


OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


@ASYNCIO
async def test_connections_are_reused_whatever_the_descriptor_numbers(anyio_backend: str) -> None:
    """select() cannot take a descriptor over 1023: a client holding a thousand streams must still reuse."""
    spare = [os.dup(0) for _ in range(1100)]
    try:
        server = Requests(OK)
        async with listening(server) as url, httpx.AsyncClient(transport=PooledTransport()) as http:
            for _ in range(4):
                assert (await http.post(url, content=b"{}")).content == b"{}"
        assert server.connections == 1
    finally:
        for fd in spare:
            os.close(fd)


@ASYNCIO
async def test_a_proxy_in_the_environment_gets_the_requests(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    proxy = Requests(OK)
    async with listening(proxy) as proxy_url:
        monkeypatch.setenv("HTTP_PROXY", proxy_url.removesuffix("/mcp"))
        async with HttpClientTransport.connect("http://mcp.test/mcp") as transport:
            assert transport._endpoint.lean is None
            response = await transport._endpoint.open("POST", {"content-type": "application/json"}, b"{}")
            assert await response.aread() == b"{}"
            await response.aclose()
    assert proxy.heads and proxy.heads[0].startswith(b"POST http://mcp.test/mcp HTTP/1.1")
    for local in ("http://127.0.0.1:1/mcp", "http://localhost:1/mcp", "http://[::1]:1/mcp"):
        async with HttpClientTransport.connect(local) as transport:
            assert transport._endpoint.lean is not None  # a server on this machine is never reached through a proxy


@ASYNCIO
async def test_a_header_value_that_would_split_the_request_is_refused_on_httpx_path_too(anyio_backend: str) -> None:
    """An auth flow may put a token server's text in Authorization: a CR LF in it must not reach the wire."""

    class Token(httpx.Auth):
        def auth_flow(self, request: httpx.Request) -> Any:
            request.headers["Authorization"] = "Bearer abc\r\nX-Injected: yes"
            yield request

    server = Requests(OK)
    async with listening(server) as url, httpx.AsyncClient(transport=PooledTransport(), auth=Token()) as http:
        with pytest.raises(httpx.LocalProtocolError, match="Authorization"):
            await http.get(url)
    assert server.heads == []


@ASYNCIO
async def test_the_lean_path_lets_the_callers_headers_replace_its_own(anyio_backend: str) -> None:
    server = Requests(OK)
    async with listening(server) as url:
        headers = {"Host": "api.example", "User-Agent": "mine/1"}
        async with HttpClientTransport.connect(url, headers=headers) as transport:
            response = await transport._endpoint.open("POST", {"content-type": "application/json"}, b"{}")
            await response.aread()
            await response.aclose()
    lines = [line.lower() for line in server.heads[0].split(b"\r\n")[1:]]
    assert [line for line in lines if line.startswith(b"host:")] == [b"host: api.example"]
    assert [line for line in lines if line.startswith(b"user-agent:")] == [b"user-agent: mine/1"]
    with pytest.raises(ValueError, match="Content-Length"):
        async with HttpClientTransport.connect(url, headers={"Content-Length": "5"}):
            pass


@ASYNCIO
async def test_credentials_in_the_url_are_sent(anyio_backend: str) -> None:
    server = Requests(OK)
    async with listening(server) as url, HttpClientTransport.connect(url.replace("//", "//alice:secret@")) as transport:
        assert transport._endpoint.lean is None  # httpx turns them into Basic authorization
        response = await transport._endpoint.open("POST", {"content-type": "application/json"}, b"{}")
        await response.aclose()
    assert b"authorization: basic " in server.heads[0].lower()


@ASYNCIO
@pytest.mark.parametrize(
    ("reply", "body"),
    [
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nmcp-session-id: x\r\n\r\n", b"hi"),
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\nraw",
            b"raw",
        ),  # not chunked last: ends with the connection
    ],
    ids=["trailer", "not-chunked-last"],
)
async def test_trailers_are_not_headers_and_other_codings_end_with_the_connection(
    anyio_backend: str, reply: bytes, body: bytes
) -> None:
    async with raw_server(sends(reply)) as url:
        transport = PooledTransport()
        response = await transport.request(Target(url), b"GET", [], b"", {"read": 5})
        assert await response.aread() == body
        assert response.headers.get("mcp-session-id") is None
        await response.aclose()
        await transport.aclose()


@ASYNCIO
async def test_what_follows_a_response_ending_on_a_full_read_is_never_the_next_answer(anyio_backend: str) -> None:
    """A response that ends exactly where a read ends, with more bytes behind it: the connection is not reused."""
    head = b"HTTP/1.1 200 OK\r\ncontent-length: %05d\r\n\r\n"
    size = _READ - len(head % 0)
    first = (head % size) + b"x" * size + b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nSTALE"
    server = Requests(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nfresh", first=first)
    async with listening(server) as url:
        transport = PooledTransport()
        for expected in (b"x" * size, b"fresh"):
            response = await transport.request(Target(url), b"POST", [], b"{}", {"read": 5})
            assert await response.aread() == expected
            await response.aclose()
            await anyio.sleep(0.1)
        await transport.aclose()


@ASYNCIO
async def test_an_empty_streamed_body_is_terminated(anyio_backend: str) -> None:
    async def nothing() -> AsyncIterator[bytes]:
        return
        yield b""

    server = Requests(OK)
    async with listening(server) as url, httpx.AsyncClient(transport=PooledTransport()) as http:
        request = http.build_request("POST", url, content=nothing())
        await request.aread()  # read already, still chunked
        with anyio.fail_after(5):
            response = await http.send(request)
    assert response.content == b"{}"


@ASYNCIO
async def test_a_server_that_picks_http2_is_refused_with_a_clear_error(anyio_backend: str, tmp_path: Path) -> None:
    cert, key = self_signed("localhost", tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])

    async def serve(stream: anyio.abc.SocketStream) -> None:
        with suppress(ssl.SSLError):  # the client hangs up once it sees h2 chosen
            tls = await anyio.streams.tls.TLSStream.wrap(stream, server_side=True, ssl_context=context)
            await tls.receive()

    offering = ssl.create_default_context(cafile=str(cert))
    offering.set_alpn_protocols(["h2", "http/1.1"])
    transport = PooledTransport(verify=offering)
    async with listening(serve) as url, httpx.AsyncClient(transport=transport) as http:
        with pytest.raises(httpx.ConnectError, match=r"speaks HTTP/1\.1"):
            await http.get(url.replace("http://127.0.0.1", "https://localhost"))
    assert transport.connections == 0
