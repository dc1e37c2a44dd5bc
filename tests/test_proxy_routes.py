"""Which era a default proxy uses upstream, decided by what the *server* says; and one ``initialize`` per upstream
connection, whatever the client probes first.

* A server of the handshake era that answers a method it does not know with an empty result (the conformance
  harness's mock servers do) does not speak 2026-07-28 for that: only ``supportedVersions`` listing it says so.
* A client that probes with ``server/discover`` and then sends its own ``initialize`` gets an upstream connection
  of its own for it: the server never sees two ``initialize`` on one connection.
* A server that speaks both eras and declares the tasks extension gets a 2026-07-28 client's calls on 2026-07-28
  (a task for a client that declared the extension, -32021 for one that did not and calls a task-required tool);
  a handshake-era client in front of a 2026-07-28 server runs a tool that runs only as a task, the proxy following
  the task.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest

from elicitor import Client, Context, JSONRPCError, ScriptedHandler, Server
from elicitor.protocol import NotificationReceived, RequestReceived
from elicitor.proxy import Bridge, Connect
from elicitor.session import Session, open_session
from elicitor.transports import Transport, memory_pair
from elicitor.types import JSONObject

from .test_proxy import in_memory


class HandshakeOnly:
    """A handshake-era server as the conformance harness mocks one: ``initialize`` once per connection (a second
    is refused, -32600), one tool, and an empty result for any other method (``server/discover`` too)."""

    def __init__(self) -> None:
        self.initializes: list[int] = []
        """Per connection, how many ``initialize`` it received."""
        self.versions: list[str] = []

    def connect(self, tg: anyio.abc.TaskGroup) -> Connect:
        async def connect() -> Transport:
            up_end, server_end = memory_pair()
            tg.start_soon(self._serve, server_end)
            return up_end

        return connect

    async def _serve(self, transport: Transport) -> None:
        index = len(self.initializes)
        self.initializes.append(0)

        async def on_request(request: RequestReceived) -> JSONObject:
            params = request.params or {}
            if request.method == "initialize":
                self.initializes[index] += 1
                if self.initializes[index] > 1:
                    raise JSONRPCError(-32600, "Invalid request: already initialized")
                self.versions.append(str(params.get("protocolVersion")))
                version = params.get("protocolVersion")
                return {
                    "protocolVersion": version if version in ("2025-06-18", "2025-11-25") else "2025-11-25",
                    "serverInfo": {"name": "test-server", "version": "1.0.0"},
                    "capabilities": {"tools": {}},
                }
            if request.method == "tools/list":
                return {"tools": [{"name": "add", "inputSchema": {"type": "object"}}]}
            if request.method == "tools/call":
                return {"content": [{"type": "text", "text": "8"}]}
            return {}

        async def on_note(note: NotificationReceived) -> None:
            pass

        async with open_session(transport, on_request, on_note) as session:
            await session.wait_closed()


@asynccontextmanager
async def bridged(connect: Any) -> AsyncIterator[tuple[Transport, anyio.abc.TaskGroup]]:
    """A default Bridge to ``connect(tg)``; yields the client's end."""
    client_end, down_end = memory_pair()
    async with anyio.create_task_group() as tg:
        bridge = Bridge(connect(tg))
        tg.start_soon(bridge.serve, down_end)
        yield client_end, tg
        tg.cancel_scope.cancel()


class ModernOnly(HandshakeOnly):
    """A 2026-07-28 server that answers ``initialize`` too, leniently, with its own revision (as the conformance
    harness's SEP-2243 mock does): it speaks no handshake era, whatever it answers."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[object] = []
        """The protocol version each ``tools/call`` carried in its ``_meta`` (``None``: none, the handshake era)."""

    async def _serve(self, transport: Transport) -> None:
        async def on_request(request: RequestReceived) -> JSONObject:
            params = request.params or {}
            meta = params.get("_meta")
            version = meta.get("io.modelcontextprotocol/protocolVersion") if isinstance(meta, dict) else None
            if request.method == "initialize":
                self.versions.append(str(params.get("protocolVersion")))
                return {
                    "protocolVersion": "2026-07-28",
                    "serverInfo": {"name": "m", "version": "1"},
                    "capabilities": {},
                }
            if request.method == "server/discover":
                return {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete"}
            if request.method == "tools/call":
                self.calls.append(version)
                return {"content": [{"type": "text", "text": "8"}], "resultType": "complete"}
            return {"resultType": "complete"}

        async def on_note(note: NotificationReceived) -> None:
            pass

        async with open_session(transport, on_request, on_note) as session:
            await session.wait_closed()


async def test_a_server_answering_initialize_with_2026_07_28_gets_calls_on_2026_07_28(anyio_backend: str) -> None:
    """The proxy tries the handshake era first for a 2026-07-28 client's tool call; a server answering
    ``initialize`` with 2026-07-28 has none, so the call and every one after it go on 2026-07-28."""
    server = ModernOnly()
    async with bridged(server.connect) as (client_end, _):
        with anyio.fail_after(10):
            async with Client(client_end, protocol="2026-07-28") as client:
                assert (await client.call_tool("add", {"a": 5, "b": 3})).text == "8"
                assert (await client.call_tool("add", {"a": 5, "b": 3})).text == "8"
    assert server.calls == ["2026-07-28", "2026-07-28"]
    assert len(server.versions) == 1  # tried once


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25", "2025-06-18", "2026-07-28"])
async def test_a_server_answering_anything_with_nothing_is_not_taken_for_2026_07_28(
    anyio_backend: str, protocol: str
) -> None:
    """Our client, whatever it asks for, through a default proxy to a server whose empty answer to
    ``server/discover`` must not be read as 2026-07-28: the calls work, and no upstream connection saw a second
    ``initialize``."""
    server = HandshakeOnly()
    async with bridged(server.connect) as (client_end, _):
        with anyio.fail_after(10):
            async with Client(client_end, protocol=protocol) as client:
                assert [tool.name for tool in await client.list_tools()] == ["add"]
                assert (await client.call_tool("add", {"a": 5, "b": 3})).text == "8"
    assert server.initializes and all(count == 1 for count in server.initializes)
    if protocol in ("2025-11-25", "2025-06-18"):
        assert server.versions == [protocol]  # the client's own handshake, at the revision it asked for


async def test_an_initialize_after_a_probe_gets_its_own_upstream_connection(anyio_backend: str) -> None:
    """A client that probes with ``server/discover`` (answered by the proxy, from a handshake of its own) and then
    sends ``initialize`` anyway: its handshake goes upstream as it sent it, on a connection of its own, and a
    second ``initialize`` from the client is refused by the proxy without reaching the server."""
    server = HandshakeOnly()

    async def ignore_request(request: RequestReceived) -> JSONObject:
        raise JSONRPCError(-32601, "Method not found")

    async def ignore_note(note: NotificationReceived) -> None:
        pass

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "prober", "version": "1"},
    }
    initialize = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "prober", "version": "1"},
    }
    async with bridged(server.connect) as (client_end, _):
        with anyio.fail_after(10):
            async with open_session(client_end, ignore_request, ignore_note) as session:
                down: Session = session
                discovered = await down.request("server/discover", {"_meta": meta})
                assert discovered["supportedVersions"] == ["2026-07-28"]
                assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "test-server"
                result = await down.request("initialize", initialize)
                assert result["protocolVersion"] == "2025-06-18"
                await down.notify("notifications/initialized")
                assert (await down.request("tools/call", {"name": "add", "arguments": {}}))["content"][0]["text"] == "8"
                with pytest.raises(JSONRPCError) as caught:
                    await down.request("initialize", initialize)
                assert caught.value.code == -32600
    assert server.initializes == [1, 1]  # the proxy's own handshake, then the client's on a connection of its own
    assert server.versions == ["2025-11-25", "2025-06-18"]


def tasks_server() -> tuple[Server, dict[str, int]]:
    """Both eras, the tasks extension declared, a tool of each task support."""
    server = Server("tasks", "1.0")
    started = {"optional": 0, "required": 0, "never": 0}

    @server.tool(task="optional")
    async def may_be_a_task(ctx: Context) -> str:
        started["optional"] += 1
        await anyio.sleep(0.05)
        return "done"

    @server.tool(task="required")
    async def must_be_a_task() -> str:
        started["required"] += 1
        return "done as a task"

    @server.tool()
    async def ordinary(ctx: Context) -> str:
        started["never"] += 1
        return "yes" if await ctx.confirm("Sure?") else "no"

    return server, started


async def test_a_server_with_the_tasks_extension_is_called_on_2026_07_28(anyio_backend: str) -> None:
    """The server speaks both eras and declares the tasks extension: a 2026-07-28 client that declared the
    extension gets the server's own task (``resultType: task``, followed with ``tasks/get``); one that did not gets
    the server's -32021 for the task-required tool (not a 2025-11-25 task the proxy would make on the handshake
    era); an ordinary tool asks in the client's rounds, run once."""
    server, started = tasks_server()
    async with bridged(lambda tg: in_memory(server, tg)) as (client_end, _):
        handler = ScriptedHandler([{"confirm": True}])
        async with Client(client_end, elicitation=handler, protocol="2026-07-28") as client:
            with anyio.fail_after(20):
                created = await client.request("tools/call", {"name": "may_be_a_task", "arguments": {}})
                assert created["resultType"] == "task", created
                assert (await client.call_tool("must_be_a_task")).text == "done as a task"
                assert (await client.call_tool("ordinary")).text == "yes"
    assert started == {"optional": 1, "required": 1, "never": 1}

    server, started = tasks_server()
    async with (
        bridged(lambda tg: in_memory(server, tg)) as (client_end, _),
        Client(client_end, protocol="2026-07-28", tasks=False) as client,
    ):
        with anyio.fail_after(20):
            with pytest.raises(JSONRPCError) as caught:
                await client.call_tool("must_be_a_task")
            assert caught.value.code == -32021
            assert (await client.call_tool("may_be_a_task")).text == "done"  # no task: an ordinary call
    assert started == {"optional": 1, "required": 0, "never": 0}


async def test_a_handshake_era_client_runs_a_task_only_tool_of_a_2026_07_28_server(anyio_backend: str) -> None:
    """A 2025-11-25 client calls a tool a 2026-07-28 server runs only as a task (-32021 without the extension):
    the proxy calls again declaring the extension, keeps the task upstream and follows it; the task's question
    reaches the client mid-call, once, and the call ends with the task's result. The tool ran once. A call the
    client gives up on cancels its task upstream."""
    server = Server("tasks only", "1.0")
    runs: list[str] = []
    cancelled = anyio.Event()

    @server.tool(task="required")
    async def report(ctx: Context, topic: str) -> str:
        runs.append(topic)
        if topic == "forever":
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.set()
        return f"{topic}: " + ("go" if await ctx.confirm(f"Research {topic}?") else "stop")

    client_end, down_end = memory_pair()
    handler = ScriptedHandler([{"confirm": True}])
    async with anyio.create_task_group() as tg:
        tg.start_soon(Bridge(in_memory(server, tg), upstream_protocol="2026-07-28").serve, down_end)
        async with Client(client_end, elicitation=handler, protocol="2025-11-25", tasks=False) as client:
            with anyio.fail_after(20):
                assert (await client.call_tool("report", {"topic": "tea"})).text == "tea: go"
                with anyio.move_on_after(0.5):
                    await client.call_tool("report", {"topic": "forever"})
                await cancelled.wait()
        tg.cancel_scope.cancel()
    assert [r.message for r in handler.requests] == ["Research tea?"]
    assert runs == ["tea", "forever"]


async def test_a_task_param_of_a_2026_07_28_request_is_not_passed_to_the_handshake_era(anyio_backend: str) -> None:
    """``task`` is a 2025-11-25 field that 2026-07-28 does not have (a server there ignores it): a 2026-07-28
    client's call carrying one reaches a handshake-era server as a plain call, not as a 2025-11-25 task."""
    server, started = tasks_server()
    client_end, down_end = memory_pair()
    async with anyio.create_task_group() as tg:
        tg.start_soon(Bridge(in_memory(server, tg), upstream_protocol="2025-11-25").serve, down_end)
        async with Client(client_end, protocol="2026-07-28") as client:
            with anyio.fail_after(20):
                result = await client.request(
                    "tools/call", {"name": "may_be_a_task", "arguments": {}, "task": {"ttl": 60000}}
                )
        tg.cancel_scope.cancel()
    assert result["resultType"] == "complete" and "task" not in result, result
    assert result["content"][0]["text"] == "done"
    assert started["optional"] == 1


@pytest.mark.parametrize("through", ["direct", "proxy"])
async def test_a_revision_asked_for_by_name_is_never_replaced_in_silence(anyio_backend: str, through: str) -> None:
    """Our client pinned to 2026-07-28, before a handshake-era server that answers ``server/discover`` with an
    empty result: the connection fails saying the server does not speak it, rather than going on with 2025-11-25
    as ``protocol="auto"`` would; the server never sees ``initialize``."""
    from elicitor import Client, ElicitorError
    from elicitor.proxy import Bridge

    server = HandshakeOnly()
    async with anyio.create_task_group() as tg:
        if through == "direct":
            transport, server_end = memory_pair()
            tg.start_soon(server._serve, server_end)
        else:
            transport, down_end = memory_pair()
            tg.start_soon(Bridge(server.connect(tg), upstream_protocol="2026-07-28").serve, down_end)
        with anyio.fail_after(30), pytest.raises(ElicitorError, match="does not speak 2026-07-28"):
            async with Client(transport, protocol="2026-07-28"):
                pass
        tg.cancel_scope.cancel()
    assert sum(server.initializes) == 0


class OlderServer(HandshakeOnly):
    """A server that chooses ``chosen`` in ``initialize`` whatever it is offered, and pushes ``elicitation/create``
    in its tool call all the same (the revisions before 2025-06-18 have no elicitation); its tool says what came
    back: the answer, or the error."""

    def __init__(self, chosen: str) -> None:
        super().__init__()
        self.chosen = chosen

    async def _serve(self, transport: Transport) -> None:
        sessions: list[Session] = []

        async def on_request(request: RequestReceived) -> JSONObject:
            if request.method == "initialize":
                return {"protocolVersion": self.chosen, "serverInfo": {"name": "old", "version": "1"},
                        "capabilities": {"tools": {}}}  # fmt: skip
            if request.method == "server/discover":
                raise JSONRPCError(-32601, "Method not found")
            if request.method == "tools/call":
                form = {"type": "object", "properties": {"name": {"type": "string"}}}
                ask: JSONObject = {"message": "Name?", "requestedSchema": form}
                try:
                    answer = await sessions[0].request("elicitation/create", ask)
                except JSONRPCError as exc:
                    text = f"refused {exc.code}: {exc.message}"
                else:
                    text = f"answered {answer.get('action')}"
                return {"content": [{"type": "text", "text": text}]}
            return {}

        async def on_note(note: NotificationReceived) -> None:
            pass

        async with open_session(transport, on_request, on_note) as session:
            sessions.append(session)
            await session.wait_closed()


@pytest.mark.parametrize("client_era", ["2026-07-28", "2025-11-25"])
@pytest.mark.parametrize("chosen", ["2025-03-26", "2024-11-05"])
async def test_a_server_that_chose_a_revision_without_elicitation_cannot_elicit_through_the_proxy(
    anyio_backend: str, chosen: str, client_era: str
) -> None:
    """A server that chose 2025-03-26 or 2024-11-05 in ``initialize`` (revisions without elicitation) and asks
    anyway: the person is never asked, and the server gets the -32601 naming the revision it chose, as from
    elicitor's client directly; the call goes on. Through the proxy for a 2026-07-28 client, the handshake is the
    proxy's own, so the refusal is the proxy's."""
    server = OlderServer(chosen)
    asked: list[str] = []

    async def person(request: Any) -> Any:
        asked.append(request.message)
        return {"name": "Ada"}

    async with bridged(server.connect) as (client_end, _):
        with anyio.fail_after(10):
            async with Client(client_end, protocol=client_era, elicitation=ScriptedHandler(otherwise=person)) as c:
                text = (await c.call_tool("add", {})).text
    assert asked == []
    assert text.startswith("refused -32601") and chosen in text, text


async def test_a_server_that_chose_a_revision_nobody_speaks_is_refused_by_the_proxy(anyio_backend: str) -> None:
    """A server that answers the proxy's own ``initialize`` (for a 2026-07-28 client) with a revision the proxy
    does not speak: the client cannot connect, and is told which revision the server chose, as elicitor's client
    is told directly; nothing is forwarded on a revision nobody negotiated."""
    server = OlderServer("2099-01-01")
    async with bridged(server.connect) as (client_end, _):
        with anyio.fail_after(10), pytest.raises(JSONRPCError, match="chose protocol version '2099-01-01'"):
            async with Client(client_end, protocol="2026-07-28") as c:
                await c.call_tool("add", {})


@pytest.mark.parametrize("protocol", ["2025-11-25", "auto"])
async def test_a_server_that_chose_a_revision_nobody_speaks_is_refused_by_the_client(
    anyio_backend: str, protocol: str
) -> None:
    """Directly, elicitor's client refuses the same answer to its ``initialize``, naming the revision."""
    from elicitor import ElicitorError

    server = OlderServer("2099-01-01")
    async with anyio.create_task_group() as tg:
        client_end, server_end = memory_pair()
        tg.start_soon(server._serve, server_end)
        with anyio.fail_after(10), pytest.raises(ElicitorError, match="offered protocol version '2099-01-01'"):
            async with Client(client_end, protocol=protocol):
                pass
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("chosen", ["2025-03-26", "2024-11-05"])
async def test_a_session_on_an_older_revision_the_server_chose_goes_on_through_the_listening_proxy(
    anyio_backend: str, chosen: str
) -> None:
    """Through ``elicitor proxy --listen`` a handshake-era session is on the revision the server chose, 2024-11-05
    too, and elicitor's client then sends that ``MCP-Protocol-Version``: its requests after ``initialize`` are the
    session's (never taken for 2026-07-28 requests without their ``_meta``), and the question the server asks on a
    revision without elicitation is refused naming it."""
    if anyio_backend != "asyncio":
        pytest.skip("uvicorn runs on asyncio")
    from elicitor.proxy import ProxyServer

    from .conftest import serving

    server = OlderServer(chosen)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            async with (
                serving(ProxyServer(server.connect(tg)).http_app()) as url,
                Client.http(url, protocol="2025-11-25", elicitation=ScriptedHandler([])) as client,
            ):
                assert client.protocol_version == chosen
                text = (await client.call_tool("add", {})).text
            tg.cancel_scope.cancel()
    assert text.startswith("refused -32601") and chosen in text, text


async def test_a_handshake_era_client_hears_of_list_changes_of_a_2026_07_28_server(anyio_backend: str) -> None:
    """A 2026-07-28 server tells of list changes only on a ``subscriptions/listen`` stream; a handshake-era client
    expects ``notifications/tools/list_changed`` on its session once the server declares ``listChanged`` (which
    the proxy's ``initialize`` answer passes on). The proxy listens upstream for it and tells the client."""
    server = Server("changing", "1")

    @server.tool()
    async def grow() -> str:
        server.notify_tools_changed()
        return "grown"

    changed = anyio.Event()

    async def on_request(request: RequestReceived) -> JSONObject:
        return {}

    async def on_note(note: NotificationReceived) -> None:
        if note.method == "notifications/tools/list_changed":
            changed.set()

    with anyio.fail_after(20):
        client_end, down_end = memory_pair()
        async with anyio.create_task_group() as tg, open_session(client_end, on_request, on_note) as session:
            tg.start_soon(Bridge(in_memory(server, tg), upstream_protocol="2026-07-28").serve, down_end)
            hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            answer = await session.request("initialize", hello)
            assert answer["capabilities"]["tools"]["listChanged"] is True
            await session.notify("notifications/initialized")
            while not changed.is_set():  # a change before the proxy's listen is acknowledged upstream is not news
                await session.request("tools/call", {"name": "grow", "arguments": {}})
                with anyio.move_on_after(0.5):
                    await changed.wait()
            tg.cancel_scope.cancel()
