"""The client against servers of the HTTP+SSE transport of 2024-11-05 (a GET opens the stream, whose first event,
``endpoint``, names the URL every message is POSTed to; everything the server says comes on the stream).

Real peers we did not write (the official Python SDK's ``SseServerTransport`` under uvicorn, the TypeScript SDK's
``SSEServerTransport`` under node), and a server of our own under uvicorn that misbehaves on purpose: the fallback
decision, the endpoint's origin, sign-in on every request, the stream ending mid-call, hostile streams.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elicitor import Client, ConnectionClosed, ElicitorError, JSONRPCError, LegacyRefused, ScriptedHandler
from elicitor.client._legacy import falls_back, message_url
from elicitor.transports._sse import SSEDecoder

from .conftest import ROOT, free_port, serving

pytestmark = pytest.mark.anyio

TS_SDK = ROOT / ".cache" / "ts-sdk-1.32.2"
NODE22 = ROOT / ".cache" / "node22" / "node_modules" / "node" / "bin" / "node"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def answering(url: str) -> None:
    """Return once the server at ``url`` answers HTTP (whatever it says), within a minute."""
    with anyio.fail_after(60):
        while True:
            try:
                async with httpx.AsyncClient() as http:
                    await http.post(url)
                return
            except httpx.TransportError:
                await anyio.sleep(0.1)


@asynccontextmanager
async def peer(command: list[str], port: int) -> AsyncIterator[str]:
    """Run a server process that listens on ``port``; yields its stream's URL once it answers."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/sse"
    try:
        await answering(url)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_the_official_python_sdk_sse_server(anyio_backend: str) -> None:
    """Found by the spec's fallback (its /sse answers a POST with 405), or asked for; the server's elicitation
    comes on the stream and the answer goes back as a POST, on both handshake revisions."""
    port = free_port()
    async with peer(
        [sys.executable, str(ROOT / "tests" / "peers" / "mcp_server.py"), "--sse-port", str(port)], port
    ) as url:
        for protocol, transport in [("auto", "auto"), ("2025-06-18", "auto"), ("2025-11-25", "sse")]:
            handler = ScriptedHandler([{"name": "Grace"}, {"confirm": True}])
            with anyio.fail_after(60):
                async with Client.http(url, elicitation=handler, protocol=protocol, transport=transport) as client:
                    assert client.protocol_version == ("2025-11-25" if protocol == "auto" else protocol)
                    assert "push_ask" in {tool.name for tool in await client.list_tools()}
                    assert (await client.call_tool("push_ask")).text == "hello Grace, 30"
                    assert (await client.call_tool("confirm_delete")).text == "deleted"
            assert [request.message for request in handler.requests] == ["Who are you?", "Delete the file?"]
        # `elicitor proxy` in front of it (its upstream is this client): a stdio client of today reaches it.
        command = [sys.executable, "-m", "elicitor", "proxy", "--ui", "none", url]
        handler = ScriptedHandler([{"name": "Kit", "age": 7}])
        async with Client.stdio(command, elicitation=handler, protocol="2026-07-28", probe_timeout=60) as client:
            with anyio.fail_after(60):
                assert client.server_info is not None and client.server_info.name == "official-peer"
                assert (await client.call_tool("push_ask")).text == "hello Kit, 7"
        # Asked for Streamable HTTP only, the client does not fall back: it says what the server answered.
        with anyio.fail_after(60), pytest.raises(JSONRPCError, match="HTTP 405"):
            async with Client.http(url, transport="streamable-http", probe_timeout=30):
                pass


async def test_a_fastmcp_sse_server(anyio_backend: str) -> None:
    """FastMCP's ``transport="sse"``; its URL-mode question comes on the stream too (2025-11-25)."""
    port = free_port()
    command = [sys.executable, str(ROOT / "tests" / "peers" / "fastmcp_server.py"), "--sse-port", str(port)]
    async with peer(command, port) as url:
        handler = ScriptedHandler([{"value": True}, "accept"], modes=frozenset({"form", "url"}))
        with anyio.fail_after(60):
            async with Client.http(url, elicitation=handler) as client:
                assert client.protocol_version == "2025-11-25"
                assert (await client.call_tool("confirm_delete")).text == "deleted"
                assert (await client.call_tool("sign_in")).text == "accept"


async def test_a_server_gone_mid_call_fails_the_call(anyio_backend: str) -> None:
    """The official SDK's server killed while its question waits for an answer: the call fails at once."""
    port = free_port()
    command = [sys.executable, str(ROOT / "tests" / "peers" / "mcp_server.py"), "--sse-port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/sse"
        await answering(url)

        class KillsTheServer:
            async def __call__(self, request: Any) -> Any:
                process.kill()
                await anyio.sleep_forever()

        with anyio.fail_after(60):
            async with Client.http(url, elicitation=KillsTheServer()) as client:
                with pytest.raises(JSONRPCError, match="event stream ended before it answered"):
                    await client.call_tool("push_ask")
    finally:
        process.kill()
        process.wait(timeout=10)


def ts_node() -> str:
    if not (TS_SDK / "node_modules" / "@modelcontextprotocol" / "sdk").exists():
        pytest.skip("the TypeScript SDK is not installed: run `make test` (or scripts/conformance.py --install-only)")
    found = str(NODE22) if NODE22.exists() else shutil.which("node")
    if found is None:
        pytest.skip("no node on PATH")
    return found


async def test_the_typescript_sdk_sse_server(anyio_backend: str) -> None:
    node = ts_node()
    script = TS_SDK / "ts_server.mjs"  # it imports the SDK from beside it
    source = (ROOT / "tests" / "peers" / "ts_server.mjs").read_text()
    if not script.exists() or script.read_text() != source:
        script.write_text(source)
    port = free_port()
    async with peer([node, str(script), "--sse-port", str(port)], port) as url:
        handler = ScriptedHandler([{"name": "Ada"}])
        with anyio.fail_after(60):
            async with Client.http(url, elicitation=handler) as client:
                assert client.protocol_version == "2025-11-25"
                assert (await client.call_tool("ask")).text == "hello Ada"


# ---- a server of the old transport that does what each test needs -------------------------------------------------


class OldServer:
    """A 2024-11-05 HTTP+SSE server: ``/sse`` (GET: the stream; POST: ``post_status``) and ``/messages``.

    It speaks revision 2024-11-05 (no elicitation): ``initialize``, ``tools/list`` and ``tools/call`` of
    ``echo``; ``hang`` is never answered and ends the stream (or sends ``hostile`` bytes on it), ``silent`` is
    never answered, ``forget`` is answered and then every POST is refused with 404. ``token``: every request must
    carry ``Authorization: Bearer <token>`` (else 401).
    """

    def __init__(
        self,
        *,
        post_status: int = 405,
        post_body: bytes = b"Method Not Allowed",
        post_type: bytes = b"text/plain",
        endpoint: str = "/messages?session=1",
        first: bytes | None = None,
        token: str | None = None,
        hostile: bytes = b"",
    ) -> None:
        self.post_status = post_status
        self.post_body = post_body
        self.post_type = post_type
        self.endpoint = endpoint
        self.first = first
        self.token = token
        self.hostile = hostile
        self.endpoint_alive = True
        self.stream_path = "/sse"
        self.cookie: bytes | None = None
        """Set on the stream's response, if given (a balancer's affinity)."""
        self.cookies: list[str | None] = []
        """The ``Cookie`` of every POST to the message URL."""
        self.seen: list[tuple[str, str, str | None]] = []
        """Every request: method, path with query, Authorization."""
        self._out: anyio.abc.ObjectSendStream[bytes | None] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        headers = dict(scope["headers"])
        authorization = headers.get(b"authorization", b"").decode() or None
        target = scope["path"] + ("?" + scope["query_string"].decode() if scope["query_string"] else "")
        self.seen.append((scope["method"], target, authorization))
        if self.token is not None and authorization != f"Bearer {self.token}":
            await self._respond(send, 401, b"", [(b"www-authenticate", b"Bearer")])
        elif scope["path"] == self.stream_path and scope["method"] == "GET":
            async with anyio.create_task_group() as tg:

                async def until_gone() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(until_gone)
                await self._stream(send)
                tg.cancel_scope.cancel()
        elif scope["path"] == self.stream_path:
            await self._respond(send, self.post_status, self.post_body, [(b"content-type", self.post_type)])
        elif scope["path"] == "/messages" and not self.endpoint_alive:
            await self._respond(send, 404, b"Could not find session", [])
        elif scope["path"] == "/messages" and scope["method"] == "POST":
            self.cookies.append(headers.get(b"cookie", b"").decode() or None)
            body = b""
            while True:
                event = await receive()
                body += event.get("body", b"")
                if not event.get("more_body"):
                    break
            await self._respond(send, 202, b"Accepted", [])
            await self._answer(json.loads(body))
        else:
            await self._respond(send, 404, b"Not Found", [])

    async def _respond(self, send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _stream(self, send: Any) -> None:
        self._out, inbox = anyio.create_memory_object_stream[bytes | None](100)
        headers = [(b"content-type", b"text/event-stream")]
        if self.cookie is not None:
            headers.append((b"set-cookie", self.cookie))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        first = self.first if self.first is not None else f"event: endpoint\ndata: {self.endpoint}\n\n".encode()
        await send({"type": "http.response.body", "body": first, "more_body": True})
        with self._out, inbox:
            async for chunk in inbox:
                if chunk is None:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    async def _say(self, message: dict[str, Any]) -> None:
        assert self._out is not None
        await self._out.send(b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n")

    async def _answer(self, message: dict[str, Any]) -> None:
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            result = {
                "protocolVersion": "2024-11-05",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "old-server", "version": "0.1"},
            }
            await self._say({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("echo", "hang", "silent", "forget")]
            await self._say({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
        elif method == "tools/call" and message["params"]["name"] == "echo":
            content = [{"type": "text", "text": json.dumps(message["params"].get("arguments", {}))}]
            await self._say({"jsonrpc": "2.0", "id": request_id, "result": {"content": content}})
        elif method == "tools/call" and message["params"]["name"] == "silent":
            pass  # never answered, the stream kept open
        elif method == "tools/call" and message["params"]["name"] == "forget":
            self.endpoint_alive = False  # the server forgets the stream's session; the stream itself stays
            await self._say({"jsonrpc": "2.0", "id": request_id, "result": {"content": []}})
        elif method == "tools/call" and message["params"]["name"] == "hang":
            assert self._out is not None
            if self.hostile:
                await self._out.send(self.hostile)
            else:
                await self._out.send(None)  # the stream ends; the call is never answered


async def call(url: str, *, tool: str = "echo", **options: Any) -> str:
    """Connect to ``url``, call ``tool`` with ``{"n": 1}`` and return its text."""
    with anyio.fail_after(60):
        async with Client.http(url, **options) as client:
            assert client.protocol_version == "2024-11-05"  # accepted, without elicitation
            return (await client.call_tool(tool, {"n": 1})).text


def sse_url(url: str) -> str:
    return url.removesuffix("/mcp") + "/sse"


def events(server: OldServer, url: str) -> str:
    """The server's stream moved to ``/events``: a URL that does not end in ``/sse`` is POSTed to first."""
    server.stream_path = "/events"
    return url.removesuffix("/mcp") + "/events"


@pytest.mark.parametrize(
    ("status", "body", "kind", "falls"),
    [
        (405, b"Method Not Allowed", b"text/plain", True),
        (404, b"Cannot POST /sse", b"text/html", True),
        (400, b"", b"text/plain", True),
        (405, b'{"detail":"Method Not Allowed"}', b"application/json", True),  # JSON, but no JSON-RPC error
        (
            400,
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"No session"}}',
            b"application/json",
            False,
        ),
        (500, b"Internal Server Error", b"text/plain", False),
        (403, b"Forbidden", b"text/plain", False),
        (401, b"", b"text/plain", False),
    ],
)
async def test_which_refusals_of_the_first_post_fall_back(
    anyio_backend: str, status: int, body: bytes, kind: bytes, falls: bool
) -> None:
    """400, 404 and 405 without a JSON-RPC error fall back to a GET; a JSON-RPC error (a Streamable HTTP server
    saying why), a server error and 401 (sign-in's business) do not."""
    server = OldServer(post_status=status, post_body=body, post_type=kind)
    async with serving(server) as url:
        stream = events(server, url)
        if falls:
            assert await call(stream) == '{"n": 1}'
        else:
            with pytest.raises(JSONRPCError):
                await call(stream, probe_timeout=30)
    gets = [seen for seen in server.seen if seen[0] == "GET"]
    assert len(gets) == (1 if falls else 0)
    if falls:  # the probe found the old transport; initialize, initialized and the call went to its URL
        assert [seen[1] for seen in server.seen if seen[0] == "POST"] == ["/events"] + ["/messages?session=1"] * 3


@pytest.mark.parametrize("status", [405, 500, 401])
async def test_a_url_ending_in_sse_opens_the_old_stream_first(anyio_backend: str, status: int) -> None:
    """``.../sse`` is where the old transport's stream lives: its GET goes first, so a server whose stream URL
    answers a POST in a way that says nothing of the old transport (500, say) is still reached, and nothing is
    POSTed to the stream's URL."""
    server = OldServer(post_status=status, post_body=b"no", post_type=b"text/plain")
    async with serving(server) as url:
        assert await call(sse_url(url)) == '{"n": 1}'
    assert server.seen[0][:2] == ("GET", "/sse")
    assert [seen[1] for seen in server.seen if seen[0] == "POST"] == ["/messages?session=1"] * 3


async def test_a_url_ending_in_sse_of_a_streamable_http_server(anyio_backend: str) -> None:
    """A Streamable HTTP server at ``.../sse`` refuses the GET (no session yet): the client goes on with
    Streamable HTTP."""
    from elicitor import Server
    from elicitor.server.http import HttpApp

    server = Server("at-sse")

    @server.tool()
    async def echo(n: int) -> str:
        return f"n={n}"

    async with serving(HttpApp(server, path="/sse")) as url:
        with anyio.fail_after(60):
            async with Client.http(sse_url(url)) as client:
                assert client.protocol_version == "2026-07-28"
                assert (await client.call_tool("echo", {"n": 1})).text == "n=1"


def test_the_fallback_decision() -> None:
    assert falls_back(405, b"") and falls_back(404, b"<html>") and falls_back(400, b"not json {")
    assert falls_back(400, b'{"jsonrpc":"2.0","result":{}}')  # not an error: not a server of today saying why
    assert not falls_back(400, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"v"}}')
    assert not falls_back(401, b"") and not falls_back(403, b"") and not falls_back(503, b"")


async def test_sign_in_covers_the_stream_and_every_post(anyio_backend: str) -> None:
    """A 401 goes to the client's auth flow (here one that answers a challenge with a token), on the probe, the
    stream's GET and the POSTs; never does the fallback GET go out without the credentials."""

    class AnswerChallenge(httpx.Auth):
        def __init__(self) -> None:
            self.challenged = 0

        def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
            if self.challenged:
                request.headers["Authorization"] = "Bearer s3cret"
            response = yield request
            if response.status_code == 401:
                self.challenged += 1
                request.headers["Authorization"] = "Bearer s3cret"
                yield request

    server = OldServer(token="s3cret")
    auth = AnswerChallenge()
    async with serving(server) as url:
        assert await call(events(server, url), auth=auth) == '{"n": 1}'
    assert auth.challenged == 1
    assert server.seen[0] == ("POST", "/events", None)  # challenged: 401
    assert all(seen[2] == "Bearer s3cret" for seen in server.seen[1:])
    assert {seen[:2] for seen in server.seen[1:]} == {
        ("POST", "/events"),
        ("GET", "/events"),
        ("POST", "/messages?session=1"),
    }


async def test_the_oauth_sign_in_covers_the_stream_and_every_post(anyio_backend: str) -> None:
    """The spec's sign-in, against a real authorization server: the first POST's 401 starts it, and the token it
    gets goes on the fallback GET and on every POST to the message URL."""
    from elicitor import OAuth
    from elicitor.client.auth import MemoryTokenStore

    from .test_auth_client import Deployment, _json

    old = OldServer()
    old.stream_path = "/mcp"

    class OldDeployment(Deployment):
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] == "/messages":
                token = dict(scope["headers"]).get(b"authorization", b"").decode().removeprefix("Bearer ")
                if token not in self.access:
                    return await _json(send, 401, {"error": "invalid_token"}, "Bearer")
                return await old(scope, receive, send)
            return await super().__call__(scope, receive, send)

    deployment = OldDeployment()
    deployment.mcp = old  # type: ignore[assignment]
    async with serving(deployment) as url:
        deployment.base = url.removesuffix("/mcp")
        assert await call(url, auth=OAuth(store=MemoryTokenStore())) == '{"n": 1}'
    assert len(deployment.authorizations) == 1
    (token,) = deployment.access
    assert {seen[:2] for seen in old.seen} == {("POST", "/mcp"), ("GET", "/mcp"), ("POST", "/messages?session=1")}
    assert all(seen[2] == f"Bearer {token}" for seen in old.seen)


@pytest.mark.parametrize("transport", ["auto", "sse"])
async def test_an_endpoint_of_another_origin_is_refused(anyio_backend: str, transport: str) -> None:
    """The stream cannot send the client's messages (and its Authorization header) to another host or port."""
    elsewhere = OldServer()
    async with serving(elsewhere) as other:
        server = OldServer(endpoint=other.removesuffix("/mcp") + "/messages")
        async with serving(server) as url:
            error = LegacyRefused if transport == "sse" else JSONRPCError
            with anyio.fail_after(60), pytest.raises(error, match="another origin"):
                async with Client.http(sse_url(url), transport=transport, headers={"authorization": "Bearer t"}):
                    pass
    assert elsewhere.seen == []
    assert [seen[0] for seen in server.seen if seen[1] != "/sse"] == []


def test_the_endpoint_url() -> None:
    base = "http://127.0.0.1:8000/sse"
    assert message_url(base, "/messages/?session_id=ab") == "http://127.0.0.1:8000/messages/?session_id=ab"
    assert message_url(base, "messages?s=1") == "http://127.0.0.1:8000/messages?s=1"
    assert message_url("https://h.example/mcp/sse", "https://H.example:443/m") == "https://h.example/m"
    for hostile in [
        "http://127.0.0.1:8001/messages",
        "https://127.0.0.1:8000/messages",
        "//evil.example/messages",
        "http://evil.example/messages",
        "http://user:pw@127.0.0.1:8000/messages",
        "",
        "/m\r\nX-Injected: 1",
    ]:
        with pytest.raises(LegacyRefused):
            message_url(base, hostile)


@pytest.mark.parametrize(
    ("first", "words"),
    [
        (b'event: message\ndata: {"jsonrpc":"2.0","method":"ping"}\n\n', "not endpoint"),
        (b": a comment only, then the end\n\n", "ended before its endpoint event"),
        (b"event: endpoint\ndata: " + b"x" * (5 << 20) + b"\n\n", "longer than"),
    ],
)
async def test_a_stream_that_names_no_endpoint_is_refused(anyio_backend: str, first: bytes, words: str) -> None:
    server = OldServer(first=first)

    async def stream_then_end(send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": first, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    server._stream = stream_then_end  # type: ignore[method-assign]
    async with serving(server) as url:
        with anyio.fail_after(60), pytest.raises(LegacyRefused, match=words):
            async with Client.http(sse_url(url), transport="sse"):
                pass


@pytest.mark.parametrize("stage", ["headers", "endpoint"])
async def test_a_server_that_says_nothing_is_refused_in_time(
    anyio_backend: str, stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``transport="sse"`` opens the stream before the handshake and its deadline: a server that takes the GET
    and sends no headers, or headers and no endpoint event, is refused after ``ENDPOINT_WAIT``, not waited on."""
    from elicitor.client import _legacy

    monkeypatch.setattr(_legacy, "ENDPOINT_WAIT", 1.0)
    server = OldServer()

    async def mute(send: Any) -> None:
        if stage == "endpoint":
            start = {"type": "http.response.start", "status": 200}
            await send({**start, "headers": [(b"content-type", b"text/event-stream")]})
        await anyio.sleep_forever()

    server._stream = mute  # type: ignore[method-assign]
    async with serving(server) as url:
        with anyio.fail_after(60), pytest.raises(LegacyRefused, match="no endpoint event in 1 s"):
            async with Client.http(sse_url(url), transport="sse"):
                pass


async def test_the_stream_ending_mid_call_fails_the_call_and_ends_the_connection(anyio_backend: str) -> None:
    async with serving(OldServer()) as url:
        with anyio.fail_after(60):
            async with Client.http(sse_url(url)) as client:
                with pytest.raises(JSONRPCError, match="event stream ended before it answered"):
                    await client.call_tool("hang")
                with pytest.raises(ConnectionClosed):
                    await client.call_tool("echo")


@pytest.mark.parametrize(
    ("hostile", "words"),
    [
        (b"data: " + b"x" * (5 << 20) + b"\n\n", "longer than"),  # one line over the limit
        (b"".join(b"data: " + b"y" * 4096 + b"\n" for _ in range(1100)), "bytes of data"),  # short lines adding up
    ],
    ids=["long-line", "many-lines"],
)
async def test_a_hostile_stream_ends_the_connection_with_a_clear_error(
    anyio_backend: str, hostile: bytes, words: str
) -> None:
    async with serving(OldServer(hostile=hostile)) as url:
        with anyio.fail_after(60):
            async with Client.http(sse_url(url)) as client:
                with pytest.raises(JSONRPCError, match=words):
                    await client.call_tool("hang")


async def test_a_cookie_the_stream_sets_goes_with_every_post(anyio_backend: str) -> None:
    """A balancer's affinity cookie on the stream's response must come back on the POSTs, or they may reach
    another backend, which does not know the stream."""
    server = OldServer()
    server.cookie = b"affinity=backend-2; Path=/"
    async with serving(server) as url:
        assert await call(sse_url(url)) == '{"n": 1}'
    assert server.cookies == ["affinity=backend-2"] * 3


async def test_a_silent_stream_is_the_request_timeouts_business(anyio_backend: str) -> None:
    """A server that keeps its stream open and never answers: the call ends on ``request_timeout``."""
    async with serving(OldServer()) as url:
        with anyio.fail_after(60):
            async with Client.http(sse_url(url), request_timeout=1.0) as client:
                with pytest.raises(TimeoutError):
                    await client.call_tool("silent")
                assert (await client.call_tool("echo", {"n": 2})).text == '{"n": 2}'


async def test_a_message_the_server_refuses_fails_its_request(anyio_backend: str) -> None:
    """404 from the message URL (the server forgot the stream's session): the request fails saying so."""
    async with serving(OldServer()) as url:
        with anyio.fail_after(60):
            async with Client.http(sse_url(url)) as client:
                await client.call_tool("forget")
                with pytest.raises(JSONRPCError, match="HTTP 404: Could not find session"):
                    await client.call_tool("echo")


async def test_noise_on_the_stream_is_ignored(anyio_backend: str) -> None:
    """Events of other types, a second endpoint event, comments, an answer to nothing, a line that is not JSON:
    the connection goes on."""
    noise = (
        b": keep-alive\n\n"
        b"event: endpoint\ndata: http://evil.example/messages\n\n"
        b"event: surprise\ndata: {}\n\n"
        b'event: message\ndata: {"jsonrpc":"2.0","id":"nobody-asked","result":{}}\n\n'
        b"event: message\ndata: not json\n\n"
    )
    server = OldServer(first=b"event: endpoint\ndata: /messages?session=1\n\n" + noise)
    async with serving(server) as url:
        assert await call(sse_url(url)) == '{"n": 1}'
    assert all(seen[1].startswith(("/sse", "/messages")) for seen in server.seen)


async def test_transport_is_checked(anyio_backend: str) -> None:
    with pytest.raises(ValueError, match="transport must be"):
        Client.http("http://127.0.0.1:1/sse", transport="websocket")
    assert issubclass(LegacyRefused, ElicitorError)


# ---- any bytes on the stream, in any split -----------------------------------------------------------------------


class _Canned:
    """A response whose body is ``chunks``, then the end (or a cut: ``httpx.ReadError``); if ``held``, the end
    waits for ``last`` (a request can then be sent while the stream is open)."""

    def __init__(self, chunks: list[bytes], cut: bool, held: bool = False) -> None:
        self.status_code = 200
        self.headers = {"content-type": "text/event-stream"}
        self._chunks = chunks
        self._cut = cut
        self.last = anyio.Event()
        self._held = held

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk
        if self._held:
            await self.last.wait()
        if self._cut:
            raise httpx.ReadError("cut")

    async def aread(self) -> bytes:
        return b""

    async def aclose(self) -> None:
        pass


class _Road:
    """An ``Endpoint`` that answers the GET with a canned stream and every POST with 202."""

    def __init__(self, response: _Canned) -> None:
        self.url = "http://127.0.0.1:9/sse"
        self.response = response

    def at(self, url: str) -> _Road:
        return self

    async def open(self, method: str, headers: dict[str, str], content: bytes = b"", *, brief: bool = False) -> Any:
        if method == "GET":
            return self.response
        accepted = _Canned([], cut=False)
        accepted.status_code = 202
        return accepted


hostile_lines = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.sampled_from(
            [b"event: endpoint\n", b"event: message\n", b"data: ", b'data: {"jsonrpc":"2.0","id":1}',
             b"\n", b"\r", b"\r\n", b":", b"id: \x00", b"retry: 99999999999999999999", b"data: \xff\xfe",
             b"event: endpoint\ndata: http://evil.example/\n\n"]
        ),
    ),
    max_size=30,
)  # fmt: skip


def _opens(chunks: list[bytes]) -> bool:
    """Whether these chunks bring a usable ``endpoint`` event first, read as the client reads them."""
    decoder = SSEDecoder(256)
    for chunk in chunks:
        try:
            events = decoder.feed(chunk)
        except ValueError:
            return False
        if events:
            try:
                message_url("http://127.0.0.1:9/sse", events[0].data)
            except LegacyRefused:
                return False
            return events[0].event == "endpoint"
    return False


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    endpoint_first=st.booleans(), lines=hostile_lines, splits=st.lists(st.integers(0, 600), max_size=8),
    cut=st.booleans(),
)  # fmt: skip
def test_any_stream_ends_cleanly_and_fails_what_waits(
    endpoint_first: bool, lines: list[bytes], splits: list[int], cut: bool
) -> None:
    """Whatever the stream carries, in whatever chunks: opening it either succeeds or raises ``LegacyRefused``,
    and once open, reading it never raises out of its task, ends exactly once, and fails each request still
    waiting exactly once; only ``message`` events reach the client."""
    from elicitor.client._legacy import OldTransport

    body = (b"event: endpoint\ndata: /messages?s=1\n\n" if endpoint_first else b"") + b"".join(lines)
    cuts = sorted({min(at, len(body)) for at in splits})
    chunks = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True) if body[a:b]]
    put: list[bytes] = []
    failed: list[Any] = []
    ended: list[bool] = []

    async def main() -> None:
        stream = _Canned(chunks, cut, held=_opens(chunks))
        old = OldTransport(
            _Road(stream),  # type: ignore[arg-type]
            {},
            put=put.append,
            fail=lambda request_id, reason, data: failed.append(request_id),
            ended=lambda: ended.append(True),
            heard=lambda: None,
            max_message=256,
        )
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                try:
                    await old.start(tg)
                except LegacyRefused:
                    assert not ended and not stream._held  # refused exactly when no usable endpoint came first
                    return
                await old.send(b'{"jsonrpc":"2.0","id":"waits","method":"ping"}', "waits")
                stream.last.set()  # the stream ends (unless it broke already) with the request waiting
        assert ended == [True] and old.gone is not None
        assert failed.count("waits") == 1 and not old.pending

    anyio.run(main)
    assert all(isinstance(message, bytes) for message in put)
