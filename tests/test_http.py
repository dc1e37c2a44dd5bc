"""Streamable HTTP: end to end over uvicorn on every revision, and every malformed request in-process."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import httpx2 as httpx
import pytest

from elicitor import Accepted, Client, Context, JSONRPCError, ScriptedHandler, Server
from elicitor.client._http import HttpClientTransport
from elicitor.server import HttpApp, StateSealer, generate_key
from elicitor.state import MemoryEventStore, RedisStore

from .conftest import REVISIONS, request_body, serving
from .replicas import RedisServer

pytestmark = pytest.mark.anyio

server = Server("http-test", "1.0", title="HTTP Test")
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool()
async def greet(ctx: Context) -> str:
    outcome = await ctx.elicit("Your name?", NAME, key="user_name")
    return f"hello {outcome.data['name']}" if isinstance(outcome, Accepted) else outcome.action


@server.tool()
async def chatty(ctx: Context) -> str:
    await ctx.report_progress(1, 2, "half")
    await ctx.log("info", "working")
    outcome = await ctx.elicit("Go on?", bool)
    await ctx.report_progress(2, 2, "done")
    return f"chatty {outcome.action}"


@server.tool()
async def pair(ctx: Context) -> str:
    names: list[str] = []

    async def ask(key: str) -> None:
        outcome = await ctx.elicit(f"Name {key}?", NAME, key=key)
        names.append(outcome.data["name"] if isinstance(outcome, Accepted) else "-")

    async with anyio.create_task_group() as tg:
        for key in "abc":
            tg.start_soon(ask, key)
    return " ".join(sorted(names))


cancelled: list[str] = []


@server.tool()
async def slow(ctx: Context) -> str:
    try:
        await anyio.sleep(30)
    except anyio.get_cancelled_exc_class():
        cancelled.append("slow")
        raise
    return "late"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # uvicorn runs on asyncio


@pytest.mark.parametrize("revision", [*REVISIONS, "auto"])
async def test_elicitation_over_http_on_every_revision(anyio_backend: str, revision: str) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    handler = ScriptedHandler([{"name": "Ada"}, {"value": True}])
    async with (
        serving(server.http_app()) as url,
        Client.http(url, elicitation=handler, protocol=revision, log_level="info") as client,
    ):
        assert client.protocol_version == ("2026-07-28" if revision == "auto" else revision)
        assert client.server_info is not None and client.server_info.title == "HTTP Test"
        assert (await client.call_tool("greet")).text == "hello Ada"
        assert (await client.call_tool("chatty", progress=on_progress)).text == "chatty accept"
    assert progress in ([1, 2], [1, 1, 2, 2], [1, 2, 1, 2])  # one report per round on 2026-07-28 replays
    assert handler.requests[0].message == "Your name?"


async def test_many_concurrent_calls_over_one_session(anyio_backend: str) -> None:
    handler = ScriptedHandler(otherwise={"name": "x"})
    results: list[str] = []
    async with (
        serving(server.http_app()) as url,
        Client.http(url, elicitation=handler, protocol="2025-11-25") as client,
    ):

        async def call() -> None:
            results.append((await client.call_tool("greet")).text)

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(call)
    assert results == ["hello x"] * 20


# ---- malformed requests, in-process -------------------------------------------------------------------------

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@asynccontextmanager
async def asgi(app: HttpApp | None = None) -> AsyncIterator[httpx.AsyncClient]:
    app = app or server.http_app()
    async with app.lifespan():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
            yield http


def rpc(method: str, params: dict[str, Any] | None = None, id: int | None = 1) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        message["id"] = id
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def stateless_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {**JSON_HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


async def initialize(http: httpx.AsyncClient) -> str:
    params = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t"}}
    response = await http.post("/mcp", content=rpc("initialize", params), headers=JSON_HEADERS)
    assert response.status_code == 200
    session = response.headers["mcp-session-id"]
    assert len(session) >= 32
    notified = await http.post(
        "/mcp",
        content=rpc("notifications/initialized", id=None),
        headers={**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"},
    )
    assert notified.status_code == 202
    return session


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        ({"content-type": "text/plain", "accept": JSON_HEADERS["accept"]}, b"{}", 415, -32600),
        ({"content-type": "application/json", "accept": "application/json"}, b"{}", 406, -32600),
        (JSON_HEADERS, b"{not json", 400, -32700),
        (JSON_HEADERS, b"\xff\xfe", 400, -32700),
        (JSON_HEADERS, b"[1, 2]", 400, -32600),
        (JSON_HEADERS, b'"text"', 400, -32600),
        (JSON_HEADERS, b"x" * (5 << 20), 413, -32600),
        (JSON_HEADERS, rpc("tools/list"), 400, -32600),  # handshake era without a session
        ({**JSON_HEADERS, "mcp-session-id": "nope"}, rpc("tools/list"), 404, -32600),
        ({**JSON_HEADERS, "host": "evil.example"}, rpc("tools/list"), 421, -32600),
        ({**JSON_HEADERS, "origin": "https://evil.example"}, rpc("tools/list"), 403, -32600),
    ],
)
async def test_malformed_posts_get_a_specific_4xx_and_jsonrpc_error(
    anyio_backend: str, headers: dict[str, str], body: bytes, status: int, code: int
) -> None:
    async with asgi() as http:
        response = await http.post("/mcp", content=body, headers=headers)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


async def test_other_paths_and_methods(anyio_backend: str) -> None:
    async with asgi() as http:
        assert (await http.post("/other", content=b"{}", headers=JSON_HEADERS)).status_code == 404
        assert (await http.put("/mcp", content=b"{}")).status_code == 405
        assert (await http.get("/mcp", headers={"accept": "text/event-stream"})).status_code == 405
        stateless_get = await http.get(
            "/mcp", headers={"accept": "text/event-stream", "mcp-protocol-version": "2026-07-28"}
        )
        assert stateless_get.status_code == 405
        assert (await http.delete("/mcp")).status_code == 405
        assert (await http.delete("/mcp", headers={"mcp-session-id": "nope"})).status_code == 404
        assert (
            await http.get("/mcp", headers={"accept": "text/event-stream", "mcp-session-id": "nope"})
        ).status_code == 404


async def test_allowed_hosts_and_origins_are_configurable(anyio_backend: str) -> None:
    app = server.http_app(allowed_hosts=["mcp.example.com"], allowed_origins=["https://app.example.com"])
    async with asgi(app) as http:
        headers = {**JSON_HEADERS, "host": "mcp.example.com", "origin": "https://app.example.com"}
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
        assert (await http.post("/mcp", content=rpc("initialize", params), headers=headers)).status_code == 200
        localhost = await http.post("/mcp", content=rpc("initialize", params), headers=JSON_HEADERS)
        assert localhost.status_code == 421


async def test_session_lifecycle(anyio_backend: str) -> None:
    async with asgi() as http:
        session = await initialize(http)
        headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        listed = await http.post("/mcp", content=rpc("tools/list", id=2), headers=headers)
        assert listed.status_code == 200
        assert listed.headers["content-type"] == "application/json"
        assert {t["name"] for t in listed.json()["result"]["tools"]} == {"greet", "chatty", "slow", "pair"}
        bad_version = {**headers, "mcp-protocol-version": "1999-01-01"}
        assert (await http.post("/mcp", content=rpc("ping", id=3), headers=bad_version)).status_code == 400
        # An answer to an elicitation that no longer exists is accepted and ignored.
        stale = json.dumps({"jsonrpc": "2.0", "id": 999, "result": {"action": "accept"}}).encode()
        assert (await http.post("/mcp", content=stale, headers=headers)).status_code == 202
        assert (await http.delete("/mcp", headers=headers)).status_code == 200
        assert (await http.post("/mcp", content=rpc("ping", id=4), headers=headers)).status_code == 404


V9 = {**META, "io.modelcontextprotocol/protocolVersion": "v9"}
NO_CAPS = {**META, "io.modelcontextprotocol/clientCapabilities": {}}
V9_HEADERS = {**stateless_headers("server/discover"), "mcp-protocol-version": "v9"}


def call(name: str, meta: dict[str, Any] = META) -> bytes:
    return rpc("tools/call", {"name": name, "_meta": meta})


@pytest.mark.parametrize(
    ("headers", "body", "status", "code"),
    [
        (stateless_headers("server/discover"), rpc("server/discover", {}), 400, -32602),
        (stateless_headers("server/discover"), rpc("server/discover", {"_meta": V9}), 400, -32020),
        (V9_HEADERS, rpc("server/discover", {"_meta": V9}), 400, -32022),
        ({**JSON_HEADERS, "mcp-protocol-version": "2026-07-28"}, rpc("server/discover", {"_meta": META}), 400, -32020),
        (stateless_headers("tools/list"), rpc("server/discover", {"_meta": META}), 400, -32020),
        (stateless_headers("tools/call"), call("greet"), 400, -32020),
        (stateless_headers("tools/call", "other"), call("greet"), 400, -32020),
        (stateless_headers("tools/call", "=?base64?!!?="), call("greet"), 400, -32020),
        (stateless_headers("tools/call", "gree t"), call("greet"), 400, -32020),
        (stateless_headers("initialize"), rpc("initialize", {"_meta": META}), 404, -32601),
        (stateless_headers("no/such"), rpc("no/such", {"_meta": META}), 404, -32601),
        (stateless_headers("tools/call", "greet"), call("greet", NO_CAPS), 400, -32021),
        (stateless_headers("tools/call", "nope"), call("nope"), 400, -32602),
    ],
)  # fmt: skip
async def test_stateless_requests_are_validated_against_their_headers(
    anyio_backend: str, headers: dict[str, str], body: bytes, status: int, code: int
) -> None:
    async with asgi() as http:
        response = await http.post("/mcp", content=body, headers=headers)
    assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert response.json()["id"] == 1


async def test_whitespace_around_header_values_is_not_part_of_them(anyio_backend: str) -> None:
    body = call("greet")
    headers = {**stateless_headers("tools/call", "greet"), "content-length": str(len(body)), "connection": "close"}
    lines = [f"{name}: {value}" for name, value in headers.items() if name != "mcp-name"]
    head = "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nmcp-name:   greet \t\r\n" + "\r\n".join(lines) + "\r\n\r\n"
    async with serving(server.http_app()) as url:
        port = int(url.split(":")[2].split("/")[0])
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:  # httpx would refuse to send this
            await stream.send(head.encode() + body)
            raw = b""
            with anyio.fail_after(10):
                try:
                    while True:
                        raw += await stream.receive()
                except anyio.EndOfStream:
                    pass
    status, _, rest = raw.partition(b"\r\n")
    assert status.split()[1] == b"200", raw
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["result"]["resultType"] == "input_required"


async def test_stateless_round_trip_and_base64_names(anyio_backend: str) -> None:
    async with asgi() as http:
        first = await http.post(
            "/mcp",
            content=rpc("tools/call", {"name": "greet", "arguments": {}, "_meta": META}),
            headers=stateless_headers("tools/call", "=?base64?Z3JlZXQ=?="),
        )
        assert first.status_code == 200
        result = first.json()["result"]
        assert result["resultType"] == "input_required"
        retry = {
            "name": "greet", "arguments": {}, "_meta": META, "requestState": result["requestState"],
            "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Bo"}}},
        }  # fmt: skip
        done = await http.post(
            "/mcp", content=rpc("tools/call", retry, id=2), headers=stateless_headers("tools/call", "greet")
        )
        assert done.json()["result"]["content"][0]["text"] == "hello Bo"


async def test_stateless_notifications_turn_the_answer_into_sse(anyio_backend: str) -> None:
    params = {
        "name": "chatty",
        "arguments": {},
        "_meta": {**META, "progressToken": 7, "io.modelcontextprotocol/logLevel": "info"},
    }
    async with asgi() as http:
        response = await http.post(
            "/mcp", content=rpc("tools/call", params), headers=stateless_headers("tools/call", "chatty")
        )
    assert response.headers["content-type"] == "text/event-stream"
    messages = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert [m.get("method") for m in messages] == ["notifications/progress", "notifications/message", None]
    assert messages[-1]["result"]["resultType"] == "input_required"


async def test_closing_the_stream_cancels_a_stateless_request(anyio_backend: str) -> None:
    app = server.http_app()
    async with serving(app) as url, httpx.AsyncClient() as http:
        params = {"name": "slow", "arguments": {}, "_meta": META}
        with anyio.move_on_after(0.5):
            await http.post(url, content=rpc("tools/call", params), headers=stateless_headers("tools/call", "slow"))
        # The server noticed the disconnect and cancelled the call.
        with anyio.fail_after(5):
            while not cancelled:
                await anyio.sleep(0.05)


async def test_sse_resumption_with_last_event_id(anyio_backend: str) -> None:
    async with serving(server.http_app()) as url, httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as http:
        session = await initialize(http)
        headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        call = rpc("tools/call", {"name": "greet"}, id=5)
        async with http.stream("POST", "/mcp", content=call, headers=headers) as response:
            assert response.headers["content-type"] == "text/event-stream"
            lines = []
            async for line in response.aiter_lines():
                lines.append(line)
                if line.startswith("data: {"):
                    break  # the elicitation arrived; drop the connection
        ids = [line[4:] for line in lines if line.startswith("id: ")]
        elicitation = json.loads(next(line[6:] for line in lines if line.startswith("data: {")))
        assert elicitation["method"] == "elicitation/create"
        answer = {"jsonrpc": "2.0", "id": elicitation["id"], "result": {"action": "accept", "content": {"name": "Cy"}}}
        assert (await http.post("/mcp", content=json.dumps(answer).encode(), headers=headers)).status_code == 202
        resumed = await http.get(
            "/mcp", headers={"accept": "text/event-stream", "mcp-session-id": session, "last-event-id": ids[-1]}
        )
        data = [json.loads(line[6:]) for line in resumed.text.splitlines() if line.startswith("data: {")]
        assert data == [{"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "hello Cy"}]}}]


async def test_a_client_leaving_an_sse_response_frees_its_stream_and_nothing_is_lost(anyio_backend: str) -> None:
    """The server notices a client that dropped a waiting SSE response by itself (not only when a resume comes):
    the stream is free again, the request goes on, and what follows is delivered to the next connection."""
    app = server.http_app()
    async with serving(app) as url, httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as http:
        session = await initialize(http)
        headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        stream = None
        async with http.stream(
            "POST", "/mcp", content=rpc("tools/call", {"name": "greet"}, id=7), headers=headers
        ) as r:
            async for line in r.aiter_lines():
                if line.startswith("id: "):
                    last = line[4:]
                if line.startswith("data: {"):
                    elicitation = json.loads(line[6:])
                    stream = app._handshake._sessions[session].streams[7]
                    assert stream.attached  # a connection delivers it
                    break
        assert stream is not None
        with anyio.fail_after(10):
            while stream.attached:  # the client left: the server sees it and lets the stream go
                await anyio.sleep(0.02)
        answer = {"jsonrpc": "2.0", "id": elicitation["id"], "result": {"action": "accept", "content": {"name": "Di"}}}
        assert (await http.post("/mcp", content=json.dumps(answer).encode(), headers=headers)).status_code == 202
        resumed = await http.get(
            "/mcp", headers={"accept": "text/event-stream", "mcp-session-id": session, "last-event-id": last}
        )
        data = [json.loads(line[6:]) for line in resumed.text.splitlines() if line.startswith("data: {")]
        assert data == [{"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "hello Di"}]}}]


async def test_an_sse_response_whose_server_cannot_say_any_more_ends_cleanly_and_frees_its_stream(
    anyio_backend: str,
) -> None:
    """An ASGI server whose ``receive()`` fails while a response waits is taken as the client leaving: the response
    ends as any other does (the client reads it to its end) and the stream is free for a resume."""
    app = server.http_app()

    async def failing_receive_once_read(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        reads = 0

        async def receive_then_fail() -> dict[str, Any]:
            nonlocal reads
            reads += 1
            if reads > 1:  # the body is read: what the response waits on fails
                raise RuntimeError("the server cannot say any more")
            return dict(await receive())

        await app(scope, receive_then_fail, send)

    async with (
        serving(failing_receive_once_read) as url,
        httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as http,
    ):
        session = await initialize(http)
        headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        data = []
        with anyio.fail_after(30):
            async with http.stream(
                "POST", "/mcp", content=rpc("tools/call", {"name": "greet"}, id=9), headers=headers
            ) as r:
                async for line in r.aiter_lines():  # read to the end: a response cut short would raise here
                    data.append(line)
        assert any(line.startswith("data: {") for line in data)
        stream = app._handshake._sessions[session].streams[9]
        with anyio.fail_after(10):
            while stream.attached:
                await anyio.sleep(0.02)


async def test_client_starts_a_new_session_when_the_server_forgot_it(anyio_backend: str) -> None:
    app = server.http_app()
    handler = ScriptedHandler(otherwise={"name": "Eve"})
    async with serving(app) as url, Client.http(url, elicitation=handler, protocol="2025-11-25") as client:
        assert (await client.call_tool("greet")).text == "hello Eve"
        transport = client._transport
        assert isinstance(transport, HttpClientTransport)
        first = transport.session_id
        assert first is not None
        forgotten = app._handshake.forget(first)  # the server forgets the session (a restart, an expiry...)
        assert forgotten is not None
        await forgotten.end()
        assert (await client.call_tool("greet")).text == "hello Eve"
        assert transport.session_id not in (None, first)


async def test_delete_ends_the_session_and_cancels_its_pending_elicitation(anyio_backend: str) -> None:
    cancelled.clear()
    async with serving(server.http_app()) as url, httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as http:
        session = await initialize(http)
        headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        body = rpc("tools/call", {"name": "greet"}, id=7)
        async with http.stream("POST", "/mcp", content=body, headers=headers) as response:
            lines = response.aiter_lines()
            async for line in lines:
                if line.startswith("data: {"):
                    assert json.loads(line[6:])["method"] == "elicitation/create"
                    break
            assert (await http.delete("/mcp", headers=headers)).status_code == 200
            # The stream of the cancelled call ends without an answer.
            with anyio.fail_after(5):
                rest = [line async for line in lines if line.startswith("data: {")]
            assert rest == []
        assert (await http.post("/mcp", content=rpc("ping", id=8), headers=headers)).status_code == 404


async def test_mounted_in_starlette_with_the_lifespan(anyio_backend: str) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    app = server.http_app()
    host = Starlette(routes=[Mount("/api", app=app)], lifespan=lambda _: app.lifespan())
    app.path = "/mcp"  # the mount strips /api: the app sees /mcp
    handler = ScriptedHandler([{"name": "Mo"}])
    async with serving(host) as url:
        mounted = url.replace("/mcp", "/api/mcp")
        async with Client.http(mounted, elicitation=handler, protocol="2025-11-25") as client:
            assert (await client.call_tool("greet")).text == "hello Mo"


async def test_standalone_stream_carries_messages_related_to_no_request(anyio_backend: str) -> None:
    changing = Server("changing", "1")

    @changing.tool()
    async def change() -> str:
        changing.notify_tools_changed()
        return "changed"

    async with serving(changing.http_app()) as url, httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as http:
        session = await initialize(http)
        headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        listen = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        async with http.stream("GET", "/mcp", headers=listen) as stream:
            called = await http.post("/mcp", content=rpc("tools/call", {"name": "change"}, id=3), headers=headers)
            assert called.json()["result"]["content"][0]["text"] == "changed"
            with anyio.fail_after(5):
                async for line in stream.aiter_lines():
                    if line.startswith("data: {"):
                        assert json.loads(line[6:]) == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
                        break
            second = await http.get("/mcp", headers=listen)
            assert second.status_code == 409  # one standalone stream per session


async def test_an_error_without_id_still_answers_the_request(anyio_backend: str) -> None:
    """A server that cannot read a request (a wrong endpoint here) answers with id null: fail, do not hang."""
    async with serving(server.http_app()) as url:
        with anyio.fail_after(10), pytest.raises(JSONRPCError) as info:
            async with Client.http(url.replace("/mcp", "/wrong"), protocol="2025-11-25"):
                pass
    assert info.value.code == -32601


async def test_idle_sessions_expire_but_not_while_a_person_answers(anyio_backend: str) -> None:
    app = server.http_app(session_idle_timeout=0.4)
    async with serving(app) as url, httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as http:
        session = await initialize(http)
        headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        body = rpc("tools/call", {"name": "greet"}, id=9)
        async with http.stream("POST", "/mcp", content=body, headers=headers) as response:
            lines = response.aiter_lines()
            async for line in lines:
                if line.startswith("data: {"):
                    request = json.loads(line[6:])
                    break
            await anyio.sleep(1.0)  # longer than the idle timeout, but a call waits on a person
            assert session in app._handshake
            answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}}
            assert (await http.post("/mcp", content=json.dumps(answer).encode(), headers=headers)).status_code == 202
            assert [line async for line in lines if line.startswith("data: {")] != []
        await anyio.sleep(1.0)  # now nothing is in flight and the client is silent: the session expires
        assert session not in app._handshake


async def test_a_session_whose_call_nobody_follows_any_more_expires(anyio_backend: str) -> None:
    """The client leaves while its call waits on a person (it closes the call's stream and never resumes it): no
    answer can come, so the session expires after the idle timeout instead of waiting out the call's
    ``elicitation_timeout`` (an hour; for ever with ``None``), and its call ends.
    """
    app = server.http_app(session_idle_timeout=0.4)
    async with serving(app) as url, httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as http:
        session = await initialize(http)
        headers = {**JSON_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        body = rpc("tools/call", {"name": "greet"}, id=9)
        async with http.stream("POST", "/mcp", content=body, headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: {"):
                    break  # the question: the client goes away without answering
        with anyio.fail_after(20):
            while session in app._handshake:
                await anyio.sleep(0.1)


class SlowEventStore(MemoryEventStore):
    """An event store whose writes yield to other tasks, as a networked one (Redis) does."""

    async def store(self, stream: str, sequence: int, message: bytes) -> None:
        for _ in range(3 - sequence % 3):
            await anyio.lowlevel.checkpoint()
        await super().store(stream, sequence, message)


async def test_concurrent_questions_keep_their_order_when_the_event_store_yields(anyio_backend: str) -> None:
    handler = ScriptedHandler(otherwise=lambda request: {"name": request.message.split()[1].rstrip("?")})
    app = server.http_app(event_store=SlowEventStore())
    with anyio.fail_after(10):
        async with serving(app) as url, Client.http(url, elicitation=handler, protocol="2025-11-25") as client:
            assert (await client.call_tool("pair")).text == "a b c"
    assert sorted(r.message for r in handler.requests) == ["Name a?", "Name b?", "Name c?"]


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_a_gateway_error_on_the_first_request_is_retried_and_no_other_request_is(
    anyio_backend: str, revision: str
) -> None:
    """A balancer may still route the opening request to a replica that just died (502): sending ``initialize``
    or ``server/discover`` again is harmless, so the client does; a tool call is never sent twice."""
    app = server.http_app()
    seen: list[str] = []
    failures = {"initialize": 2, "server/discover": 2, "tools/call": 1}

    async def gateway(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = await request_body(receive)
        method = json.loads(body).get("method", "")
        seen.append(method)
        if failures.get(method, 0):
            failures[method] -= 1
            await send({"type": "http.response.start", "status": 502, "headers": [(b"content-type", b"text/html")]})
            await send({"type": "http.response.body", "body": b"<html>502 Bad Gateway</html>"})
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                message: dict[str, Any] = await receive()
                return message
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    async with serving(gateway) as url:
        client = Client.http(url, elicitation=ScriptedHandler([{"name": "Ada"}]), protocol=revision)
        async with client:
            with pytest.raises(JSONRPCError, match="502"):
                await client.call_tool("greet")
            assert (await client.call_tool("greet")).text == "hello Ada"
    opening = "server/discover" if revision == "2026-07-28" else "initialize"
    assert seen.count(opening) == 3 and seen.count("tools/call") >= 2


async def test_a_kept_call_a_gateway_answered_502_for_is_sent_again_and_charges_once(
    anyio_backend: str, redis: RedisServer
) -> None:
    """2025-11-25: a balancer answers 502 for a replica that died with a call under way (nginx does when the
    replica goes before its first byte), and the replica may have run it: here it ran to its end. The server keeps
    calls under their idempotency key (a shared store), so the client sends the call again under the same key and
    gets the result the first attempt recorded: charged once. It used to fail with the balancer's 502."""
    charged: list[str] = []
    shop = Server("kept-shop", "1.0", state=StateSealer([generate_key()]))
    shop.share(RedisStore(redis.url, prefix=f"gateway{secrets.token_hex(4)}:"))

    @shop.tool()
    async def order(ctx: Context, item: str) -> str:
        await ctx.once("charge", lambda: charged.append(item))
        return f"charged: {item}"

    app = shop.http_app()
    answered_for: list[str] = []

    async def gateway(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = await request_body(receive)
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                message: dict[str, Any] = await receive()
                return message
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        if json.loads(body).get("method") == "tools/call" and not answered_for:
            answered_for.append("tools/call")

            async def lost(message: Any) -> None:
                """The replica's answer, which never reached the balancer."""

            await app(scope, replay, lost)  # the call runs to its end, its answer lost
            await send({"type": "http.response.start", "status": 502, "headers": [(b"content-type", b"text/html")]})
            await send({"type": "http.response.body", "body": b"<html>502 Bad Gateway</html>"})
            return
        await app(scope, replay, send)

    with anyio.fail_after(30):
        async with serving(gateway) as url, Client.http(url, protocol="2025-11-25") as client:
            assert (await client.call_tool("order", {"item": "tea"})).text == "charged: tea"
    assert answered_for == ["tools/call"]
    assert charged == ["tea"]


async def test_a_streams_queue_delivers_in_order_and_ends_on_close(anyio_backend: str) -> None:
    """The per-request queue of a handshake-era stream (server/http/_handshake.py): FIFO, one waiting reader woken
    by a put, close drops what is undelivered and ends the reader, a put after close is refused."""
    from elicitor.server.http._streams import _Queue

    queue = _Queue()
    queue.put((1, b"a", False))
    queue.put((2, b"b", False))
    assert await queue.receive() == (1, b"a", False)
    assert await queue.receive() == (2, b"b", False)
    got: list[tuple[int, bytes, bool]] = []
    async with anyio.create_task_group() as tg:

        async def read() -> None:
            got.append(await queue.receive())

        tg.start_soon(read)
        await anyio.wait_all_tasks_blocked()
        queue.put((3, b"c", True))
    assert got == [(3, b"c", True)]
    queue.put((4, b"d", False))
    queue.close()
    with pytest.raises(anyio.ClosedResourceError):
        await queue.receive()
    with pytest.raises(anyio.ClosedResourceError):
        queue.put((5, b"e", False))


async def test_a_listening_response_is_woken_stopped_or_cancelled_from_elsewhere_as_each_should_be(
    anyio_backend: str,
) -> None:
    """The one task of a waiting SSE response (``Listening``, server/http/_asgi.py) waits on the client itself: a
    wake interrupts that wait and it listens on, a stop ends it quietly, and a cancellation from elsewhere goes on
    even when a wake comes in the same step. What the client sent meanwhile is read by the next wait."""
    import asyncio

    from elicitor.server.http._asgi import Listening

    async def respond(client: asyncio.Queue[str], log: list[str], made: list[Listening]) -> None:
        listening = Listening()
        made.append(listening)
        try:
            while True:
                listening.waiting = True
                try:
                    message = await client.get()  # a receive() that keeps what arrives for the next call
                except asyncio.CancelledError:
                    if listening.woken():
                        log.append("woken")
                        continue
                    raise
                finally:
                    listening.waiting = False
                if message == "http.disconnect":
                    log.append("gone")
                    return
        except asyncio.CancelledError:
            if not listening.settle():
                log.append("cancelled")
                raise
            log.append("stopped")

    async def started(client: asyncio.Queue[str], log: list[str]) -> tuple[asyncio.Task[None], Listening]:
        made: list[Listening] = []
        task = asyncio.get_running_loop().create_task(respond(client, log, made))
        await anyio.wait_all_tasks_blocked()
        return task, made[0]

    client: asyncio.Queue[str] = asyncio.Queue()
    log: list[str] = []
    task, listening = await started(client, log)
    listening.wake()
    listening.wake()  # two events in one step: one interruption
    await anyio.wait_all_tasks_blocked()
    client.put_nowait("http.disconnect")
    listening.wake()  # in the same step as the client's leaving: that is read next
    with anyio.fail_after(10):
        await task
    assert log == ["woken", "woken", "gone"] and task.cancelling() == 0

    log.clear()
    task, listening = await started(client, log)
    listening.wake()
    listening.cancel()  # a resume superseded the response
    with anyio.fail_after(10):
        await task
    assert log == ["stopped"] and not task.cancelled() and task.cancelling() == 0

    log.clear()
    task, listening = await started(client, log)
    listening.wake()
    task.cancel()  # the server shutting down, in the same step
    with anyio.fail_after(10), pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["cancelled"]


def test_request_headers_are_found_by_lowercase_name_whatever_case_the_server_gives() -> None:
    from elicitor.server.http._asgi import Headers

    lower = Headers({"headers": [(b"accept", b"a"), (b"mcp-session-id", b" s1 "), (b"accept", b"b")]})
    assert (lower.get("accept"), lower.get("mcp-session-id"), lower.get("origin")) == ("b", "s1", None)
    mixed = Headers({"headers": [(b"accept", b"a"), (b"Mcp-Session-Id", b"s2"), (b"ACCEPT", b"c")]})
    assert (mixed.get("accept"), mixed.get("mcp-session-id"), mixed.get("origin")) == ("c", "s2", None)


async def test_a_redirect_is_followed_within_the_servers_origin_only(anyio_backend: str) -> None:
    """A 307 from ``/mcp`` to ``/mcp/`` (the official SDK before 1.12) is followed, and every later request goes
    there at once; a 307 to another origin is not: the request, and the credentials it carries, stay home."""
    server = Server("moved")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    app = HttpApp(server, path="/mcp/")
    seen: list[tuple[str, str, str | None]] = []
    elsewhere = {"url": ""}

    async def moving(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            authorization = dict(scope["headers"]).get(b"authorization", b"").decode() or None
            seen.append((scope["method"], scope["path"], authorization))
            target = {"/mcp": b"/mcp/", "/away": elsewhere["url"].encode()}.get(scope["path"])
            if target is not None:
                await send({"type": "http.response.start", "status": 307, "headers": [(b"location", target)]})
                await send({"type": "http.response.body", "body": b""})
                return
        await app(scope, receive, send)

    async with serving(moving) as url, serving(moving) as other:
        elsewhere["url"] = other
        with anyio.fail_after(60):
            async with Client.http(url, headers={"authorization": "Bearer t"}) as client:
                assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"
        assert [path for _, path, _ in seen].count("/mcp") == 1  # once: the endpoint moved for good
        assert all(who == "Bearer t" for _, _, who in seen)
        seen.clear()
        with anyio.fail_after(60), pytest.raises(JSONRPCError, match="307"):
            async with Client.http(url.removesuffix("/mcp") + "/away", headers={"authorization": "Bearer t"}):
                pass
        assert {path for _, path, _ in seen} == {"/away"}  # nothing reached the other origin


asking = Server("http-asking", "1.0")
"""A call and a task that wait on the person."""


@asking.tool(name="greet")
async def greet_call(ctx: Context) -> str:
    outcome = await ctx.elicit("Your name?", NAME)
    return f"hello {outcome.data['name']}" if isinstance(outcome, Accepted) else outcome.action


@asking.tool(task="required")
async def greet_task(ctx: Context) -> str:
    outcome = await ctx.elicit("Your name?", NAME)
    return f"hello {outcome.data['name']}" if isinstance(outcome, Accepted) else outcome.action


def looped(error: BaseException) -> bool:
    """Whether ``error``'s chain of contexts comes back on itself."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None:
        if id(current) in seen:
            return True
        seen.add(id(current))
        current = current.__context__
    return False


@pytest.mark.parametrize("tool", ["greet", "greet_task"])
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_a_call_cancelled_by_its_caller_leaves_a_cancellation_anyio_can_follow(
    anyio_backend: str, tool: str, revision: str
) -> None:
    """The caller's task group cancels a task that is inside ``async with Client.http(...)``, its call waiting on
    the person. What leaves the client is the cancellation itself: not an error the client met while it closed (the
    best-effort ``tasks/cancel`` of a task the call follows met the connection closing with it), and not one whose
    chain of contexts loops: the client's exit stack pointed the cancellation's context at itself when two of its
    task groups re-raised it, and anyio's task group, which follows that chain, then spun for ever at full CPU."""
    outcomes: list[tuple[str, bool]] = []

    async def person(request: Any) -> dict[str, str]:
        asked.set()
        await anyio.sleep_forever()
        return {}

    async def caller(url: str) -> None:
        try:
            async with Client.http(url, elicitation=ScriptedHandler(otherwise=person), protocol=revision) as client:
                await client.call_tool(tool)
        except BaseException as exc:
            outcomes.append((type(exc).__name__, looped(exc)))
            exc.__context__ = None  # so that this test fails instead of hanging
            raise

    async with serving(asking.http_app()) as url:
        for _ in range(3):
            asked = anyio.Event()
            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(caller, url)
                    await asked.wait()
                    tg.cancel_scope.cancel()
    assert outcomes == [("CancelledError", False)] * 3
