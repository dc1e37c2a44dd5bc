"""Every wait on the peer ends: a peer that never sends what is waited for meets a documented bound.

Each test puts a small bound in place of the default and a peer that stays silent where it should speak, then
asserts what the waiting side ends with (an outcome, an error) and, where the spec asks for it, that the silent
side was told (``notifications/cancelled``; on 2026-07-28 HTTP, a closed stream). Nothing here measures time: a
test only waits for the end, under a generous ``fail_after`` that turns a hang into a failure.

The raw peers speak JSON-RPC through :func:`elicitor.transports.memory_pair` (or real HTTP), so the side under
test is the real thing and the other side does exactly, and only, what the test says.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest

from elicitor import (
    Accepted,
    Cancelled,
    Client,
    Context,
    ElicitationRequest,
    ScriptedHandler,
    Server,
    TooManyRounds,
    UrlElicitationRequest,
)
from elicitor.transports import memory_pair
from elicitor.transports._memory import MemoryTransport

from .conftest import connected, serving

pytestmark = pytest.mark.anyio

STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


class RawPeer:
    """One end of a memory connection driven by hand: JSON objects in and out, nothing automatic."""

    def __init__(self, transport: MemoryTransport) -> None:
        self.transport = transport
        self.seen: list[dict[str, Any]] = []
        self._unclaimed: list[dict[str, Any]] = []
        self.replies: dict[object, dict[str, Any]] = {}
        self._arrived = anyio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        await self.transport.send(json.dumps(message).encode())

    async def receive(self) -> dict[str, Any]:
        raw = await self.transport.receive()
        assert isinstance(raw, bytes)
        message: dict[str, Any] = json.loads(raw)
        self.seen.append(message)
        return message

    async def until(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first message ``wanted`` accepts that no earlier ``until`` took (messages may come in any order)."""
        for message in self._unclaimed:
            if wanted(message):
                self._unclaimed.remove(message)
                return message
        while True:
            message = await self.receive()
            if wanted(message):
                return message
            self._unclaimed.append(message)

    async def answer_of(self, request_id: int) -> dict[str, Any]:
        return await self.until(lambda m: m.get("id") == request_id and "method" not in m)

    def route(self, reply: dict[str, Any]) -> None:
        """Keep a reply for :meth:`reply` (when another task reads the connection)."""
        self.replies[reply.get("id")] = reply
        self._arrived.set()
        self._arrived = anyio.Event()

    async def reply(self, request_id: object) -> dict[str, Any]:
        """The reply to ``request_id``, read by the task that calls :meth:`route`."""
        while request_id not in self.replies:
            await self._arrived.wait()
        return self.replies.pop(request_id)

    def cancelled(self) -> list[object]:
        """The request ids the other side cancelled so far."""
        return [m["params"]["requestId"] for m in self.seen if m.get("method") == "notifications/cancelled"]


@asynccontextmanager
async def raw_client(server: Server, revision: str | None, **capabilities: Any) -> AsyncIterator[RawPeer]:
    """``server`` serving a connection whose client is a :class:`RawPeer`, initialized on ``revision`` (a
    handshake revision), or not at all (``None``: 2026-07-28 requests carry their ``_meta``)."""
    server_end, client_end = memory_pair()
    peer = RawPeer(client_end)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, server_end)
        if revision is not None:
            await peer.send(
                {
                    "jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {
                        "protocolVersion": revision, "capabilities": capabilities,
                        "clientInfo": {"name": "raw", "version": "0"},
                    },
                }
            )  # fmt: skip
            await peer.answer_of(0)
            await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        try:
            yield peer
        finally:
            await client_end.aclose()
            tg.cancel_scope.cancel()


def call(request_id: int, name: str, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": {}, **params},
    }


def text_of(reply: dict[str, Any]) -> str:
    return str(reply["result"]["content"][0]["text"])


# ---- the server waits for the client ---------------------------------------------------------------------------


def asking_server(**options: Any) -> Server:
    server = Server("asks", "1", **options)

    @server.tool()
    async def ask(ctx: Context) -> str:
        outcome = await ctx.elicit("Proceed?", bool)
        return type(outcome).__name__

    @server.tool()
    async def sample(ctx: Context) -> str:
        try:
            await ctx.sample("Say hi", max_tokens=5)
        except TimeoutError:
            return "sampling timed out"
        return "sampled"

    @server.tool()
    async def roots(ctx: Context) -> str:
        try:
            await ctx.list_roots()
        except TimeoutError:
            return "roots timed out"
        return "listed"

    return server


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25"])
async def test_an_unanswered_elicitation_ends_as_cancelled_and_the_client_is_told(
    anyio_backend: str, revision: str
) -> None:
    server = asking_server(elicitation_timeout=0.2)
    async with raw_client(server, revision, elicitation={}) as peer:
        with anyio.fail_after(10):
            await peer.send(call(1, "ask"))
            question = await peer.until(lambda m: m.get("method") == "elicitation/create")
            reply = await peer.answer_of(1)  # the client never answers the question
        assert text_of(reply) == "Cancelled"
        assert question["id"] in peer.cancelled()
        # A late answer is ignored: the next thing the server says is the answer to the next request.
        with anyio.fail_after(10):
            await peer.send({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {}}})
            await peer.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert await peer.receive() == {"jsonrpc": "2.0", "id": 2, "result": {}}


@pytest.mark.parametrize(("tool", "method", "expected"), [
    ("sample", "sampling/createMessage", "sampling timed out"),
    ("roots", "roots/list", "roots timed out"),
])  # fmt: skip
async def test_unanswered_sampling_and_roots_raise_timeout_in_the_tool(
    anyio_backend: str, tool: str, method: str, expected: str
) -> None:
    server = asking_server(elicitation_timeout=0.2)
    async with raw_client(server, "2025-11-25", sampling={}, roots={}) as peer:
        with anyio.fail_after(10):
            await peer.send(call(1, tool))
            question = await peer.until(lambda m: m.get("method") == method)
            reply = await peer.answer_of(1)
    assert text_of(reply) == expected
    assert question["id"] in peer.cancelled()


async def test_a_client_sampling_handler_that_never_returns_is_cancelled_by_the_servers_timeout(
    anyio_backend: str,
) -> None:
    """Both sides real: the server gives up on ``sampling/createMessage``, tells the client, and the client
    cancels its handler (nothing of the abandoned request lives on)."""
    released = anyio.Event()

    async def never(params: Any) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            released.set()

    server = asking_server(elicitation_timeout=0.2)
    async with connected(server, protocol="2025-11-25", sampling=never) as client:
        with anyio.fail_after(10):
            assert (await client.call_tool("sample")).text == "sampling timed out"
            await released.wait()


async def test_an_unanswered_question_of_a_2025_11_25_task_is_cancelled(anyio_backend: str) -> None:
    """A task's question goes to the client on its ``tasks/result`` stream; unanswered, it ends after
    ``elicitation_timeout`` as a cancel like any other, and the task finishes."""
    server = Server("tasks", "1", elicitation_timeout=0.2, task_poll_interval=0.05)

    @server.tool(task="optional")
    async def ask(ctx: Context) -> str:
        outcome = await ctx.elicit("Proceed?", bool)
        return type(outcome).__name__

    async with raw_client(server, "2025-11-25", elicitation={}) as peer:
        with anyio.fail_after(10):
            await peer.send(call(1, "ask", task={}))
            task_id = (await peer.answer_of(1))["result"]["task"]["taskId"]
            await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task_id}})
            question = await peer.until(lambda m: m.get("method") == "elicitation/create")
            reply = await peer.answer_of(2)  # the question is never answered
    assert text_of(reply) == "Cancelled"
    assert question["id"] in peer.cancelled()


async def test_max_in_flight_refuses_the_request_beyond_it(anyio_backend: str) -> None:
    release = anyio.Event()
    server = Server("busy", "1", max_in_flight=2)

    @server.tool()
    async def hold() -> str:
        await release.wait()
        return "held"

    async with raw_client(server, "2025-11-25") as peer:
        with anyio.fail_after(10):
            for request_id in (1, 2, 3):
                await peer.send(call(request_id, "hold"))
            refused = await peer.answer_of(3)
            assert refused["error"]["code"] == -32603
            assert "Too many requests in flight" in refused["error"]["message"]
            release.set()
            assert text_of(await peer.answer_of(1)) == "held"
            assert text_of(await peer.answer_of(2)) == "held"


async def test_a_parked_run_the_client_never_comes_back_for_expires_and_a_late_retry_replays(
    anyio_backend: str,
) -> None:
    """2026-07-28: the call returns ``input_required`` and its run parks; no retry comes, so after
    ``parked_run_ttl`` the run's task is cancelled. A retry after that replays the tool from its sealed state."""
    starts: list[str] = []
    expired = anyio.Event()
    server = Server("parks", "1", parked_run_ttl=0.2)

    @server.tool()
    async def ask(ctx: Context) -> str:
        starts.append("start")
        try:
            outcome = await ctx.elicit("Proceed?", bool)
        except anyio.get_cancelled_exc_class():
            expired.set()
            raise
        return type(outcome).__name__

    async with raw_client(server, None) as peer:
        with anyio.fail_after(10):
            await peer.send(call(1, "ask", _meta=STATELESS_META))
            first = (await peer.answer_of(1))["result"]
            assert first["resultType"] == "input_required"
            await expired.wait()  # nobody retried: the parked run was let go
            (key,) = first["inputRequests"]
            retry = call(
                2, "ask", _meta=STATELESS_META, requestState=first["requestState"],
                inputResponses={key: {"action": "accept", "content": {"value": True}}},
            )  # fmt: skip
            await peer.send(retry)
            second = (await peer.answer_of(2))["result"]
    assert text_of({"result": second}) == "Accepted"
    assert starts == ["start", "start"]  # replayed from the top, the answer taken from the retry


# ---- the client waits for the server -----------------------------------------------------------------------------


@asynccontextmanager
async def raw_server(
    on_call: Callable[[RawPeer, dict[str, Any]], Any],
    *,
    stateless: bool = False,
    discover_delay: float = 0.0,
    version: str = "2025-11-25",
    every_method: bool = False,
) -> AsyncIterator[tuple[MemoryTransport, RawPeer]]:
    """A :class:`RawPeer` playing the server: it completes the handshake (``initialize`` on ``version``, or
    ``server/discover``, answered after ``discover_delay`` seconds), answers ``ping``, and hands each
    ``tools/call`` (with ``every_method``, every other request too: ``tasks/get``...) to ``on_call`` in a task of
    its own, which reads the client's replies with ``peer.reply(id)``."""
    server_end, client_end = memory_pair()
    peer = RawPeer(server_end)

    async def serve() -> None:
        async with anyio.create_task_group() as calls:
            while True:
                try:
                    message = await peer.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return
                method, request_id = message.get("method"), message.get("id")
                if method is None:
                    peer.route(message)
                elif method == "initialize":
                    result: dict[str, Any] = {
                        "protocolVersion": version, "capabilities": {"tools": {}},
                        "serverInfo": {"name": "raw", "version": "0"},
                    }  # fmt: skip
                    await peer.send({"jsonrpc": "2.0", "id": request_id, "result": result})
                elif method == "server/discover":
                    await anyio.sleep(discover_delay)
                    if not stateless:
                        error = {"code": -32601, "message": "Method not found"}
                        await peer.send({"jsonrpc": "2.0", "id": request_id, "error": error})
                        continue
                    result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
                    await peer.send({"jsonrpc": "2.0", "id": request_id, "result": result})
                elif method == "ping":
                    await peer.send({"jsonrpc": "2.0", "id": request_id, "result": {}})
                elif method == "tools/call" or every_method:
                    calls.start_soon(on_call, peer, message)

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        try:
            yield client_end, peer
        finally:
            await server_end.aclose()
            tg.cancel_scope.cancel()


async def test_a_server_that_never_answers_a_call_is_a_timeout_and_is_told(anyio_backend: str) -> None:
    async def silent(peer: RawPeer, message: dict[str, Any]) -> None:
        return  # never answers

    async with (
        raw_server(silent) as (transport, peer),
        Client(transport, protocol="2025-11-25", request_timeout=0.2) as client,
    ):
        with anyio.fail_after(10), pytest.raises(TimeoutError, match="sent nothing"):
            await client.call_tool("anything")
        with anyio.fail_after(10):
            await client.ping()  # the notice went before this request: it is in `seen` now
        calls = [m["id"] for m in peer.seen if m.get("method") == "tools/call"]
        assert peer.cancelled() == calls


async def test_a_revision_asked_for_by_name_waits_past_the_probe_limit(anyio_backend: str) -> None:
    """The probe's limit tells a handshake-era server from a slow one only when the client may fall back: with
    ``protocol="2026-07-28"`` a server slow to answer (a stdio server still starting on a loaded machine) is
    waited for within ``handshake_timeout``; with ``"auto"`` the same server is taken for a handshake-era one."""

    async def unused(peer: RawPeer, message: dict[str, Any]) -> None:
        raise AssertionError("no call is made")

    async with (
        raw_server(unused, stateless=True, discover_delay=0.3) as (transport, _),
        Client(transport, protocol="2026-07-28", probe_timeout=0.05, handshake_timeout=30) as client,
    ):
        assert client.protocol_version == "2026-07-28"
    async with (
        raw_server(unused, stateless=True, discover_delay=0.3) as (transport, _),
        Client(transport, protocol="auto", probe_timeout=0.05, handshake_timeout=30) as client,
    ):
        assert client.protocol_version == "2025-11-25"


async def test_the_clock_stops_while_a_handler_answers_the_server(anyio_backend: str) -> None:
    """A person filling a form takes longer than ``request_timeout``: the call still ends with its result."""

    async def asks(peer: RawPeer, message: dict[str, Any]) -> None:
        form = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        await peer.send(
            {
                "jsonrpc": "2.0", "id": "q", "method": "elicitation/create",
                "params": {"mode": "form", "message": "ok?", "requestedSchema": form},
            }
        )  # fmt: skip
        answer = await peer.reply("q")
        content = {"type": "text", "text": json.dumps(answer["result"])}
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [content]}})

    async def slow_person(request: ElicitationRequest) -> Any:
        await anyio.sleep(1.0)  # five times the request_timeout below
        return Accepted({"ok": True})

    async with (
        raw_server(asks) as (transport, peer),
        Client(transport, protocol="2025-11-25", elicitation=slow_person, request_timeout=0.2) as client,
    ):
        with anyio.fail_after(10):
            result = await client.call_tool("confirm")
    assert json.loads(result.text) == {"action": "accept", "content": {"ok": True}}
    assert peer.cancelled() == []


async def test_anything_heard_from_the_server_starts_the_clock_again(anyio_backend: str) -> None:
    """Progress every 0.1 s for longer than ``request_timeout`` in all: the call is alive, not silent."""

    async def busy(peer: RawPeer, message: dict[str, Any]) -> None:
        token = message["params"]["_meta"]["progressToken"]
        for step in range(25):
            await anyio.sleep(0.1)
            progress = {"progressToken": token, "progress": step}
            await peer.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
        content = {"type": "text", "text": "done"}
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [content]}})

    steps: list[float] = []

    async def on_progress(progress: float, total: float | None, text: str | None) -> None:
        steps.append(progress)

    async with (
        raw_server(busy) as (transport, peer),
        Client(transport, protocol="2025-11-25", request_timeout=2.0) as client,
    ):
        with anyio.fail_after(20):
            assert (await client.call_tool("busy", progress=on_progress)).text == "done"
    assert len(steps) == 25
    assert peer.cancelled() == []


class UrlPerson:
    """Takes URL-mode requests and accepts them, with no ``wait_done``: nobody to say "I'm done"."""

    modes = frozenset({"form", "url"})

    def __init__(self) -> None:
        self.urls: list[str] = []

    async def __call__(self, request: ElicitationRequest) -> Any:
        return Cancelled()

    async def url(self, request: UrlElicitationRequest) -> Any:
        self.urls.append(request.url)
        return Accepted(None)


def url_required(message: dict[str, Any], elicitation_id: str) -> dict[str, Any]:
    elicitation = {
        "mode": "url", "message": "Connect your account", "elicitationId": elicitation_id,
        "url": f"https://auth.example.com/connect?e={elicitation_id}",
    }  # fmt: skip
    error = {"code": -32042, "message": "URL elicitation required", "data": {"elicitations": [elicitation]}}
    return {"jsonrpc": "2.0", "id": message["id"], "error": error}


async def test_minus_32042_with_a_new_id_every_time_ends_after_max_rounds(anyio_backend: str) -> None:
    """A server that answers every retry with -32042 for a new interaction (never completed: each wait ends with
    ``url_timeout``): the client retries at most ``max_rounds`` times, then raises."""
    count = 0

    async def always_more(peer: RawPeer, message: dict[str, Any]) -> None:
        nonlocal count
        count += 1
        await peer.send(url_required(message, f"e{count}"))

    person = UrlPerson()
    async with (
        raw_server(always_more) as (transport, _),
        Client(transport, protocol="2025-11-25", elicitation=person, max_rounds=3, url_timeout=0.05) as client,
    ):
        with anyio.fail_after(10), pytest.raises(TooManyRounds):
            await client.call_tool("connect")
    assert count == 4  # the first attempt and three retries
    assert len(person.urls) == 4


@pytest.mark.parametrize("handler", ["scripted", "function"])
async def test_a_handler_without_wait_done_stops_waiting_for_completion_after_url_timeout(
    anyio_backend: str, handler: str
) -> None:
    """No completion notice ever comes and nobody can say "I'm done": after ``url_timeout`` the call is retried,
    and this server then answers it (spec 2025-11-25 client/elicitation, "URL mode": no indefinite wait)."""
    attempts = 0

    async def once_then_done(peer: RawPeer, message: dict[str, Any]) -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await peer.send(url_required(message, "e1"))  # and never notifications/elicitation/complete
            return
        content = {"type": "text", "text": "connected"}
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [content]}})

    person: Any = (
        ScriptedHandler(otherwise="accept", modes=frozenset({"form", "url"})) if handler == "scripted" else UrlPerson()
    )
    async with (
        raw_server(once_then_done) as (transport, _),
        Client(transport, protocol="2025-11-25", elicitation=person, url_timeout=0.2) as client,
    ):
        with anyio.fail_after(10):
            assert (await client.call_tool("connect")).text == "connected"
    assert attempts == 2


async def test_input_required_forever_ends_after_max_rounds(anyio_backend: str) -> None:
    """2026-07-28: a server that asks a new question every round is stopped by ``max_rounds``."""
    count = 0

    async def insatiable(peer: RawPeer, message: dict[str, Any]) -> None:
        nonlocal count
        count += 1
        question = {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": f"Question {count}?",
                "requestedSchema": {"type": "object", "properties": {}},
            },
        }
        result = {"resultType": "input_required", "inputRequests": {f"q{count}": question}, "requestState": f"s{count}"}
        await peer.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    handler = ScriptedHandler(otherwise={})
    async with (
        raw_server(insatiable, stateless=True) as (transport, _),
        Client(transport, protocol="2026-07-28", elicitation=handler, max_rounds=3) as client,
    ):
        with anyio.fail_after(10), pytest.raises(TooManyRounds, match="after 3 rounds"):
            await client.call_tool("ask")
    assert count == 4
    assert len(handler.requests) == 4


# ---- over real HTTP -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio
@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_a_silent_sse_stream_ends_the_call_and_the_server_stops_the_tool(
    anyio_backend: str, revision: str
) -> None:
    """The server's tool neither answers nor sends anything: the client's ``request_timeout`` ends the call, and
    the server learns it (2025-11-25: ``notifications/cancelled``; 2026-07-28: the closed response stream) and
    cancels the tool."""
    stopped = anyio.Event()
    server = Server("stalls", "1")

    @server.tool()
    async def stall() -> str:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    async with (
        serving(server.http_app()) as url,
        Client.http(url, protocol=revision, request_timeout=0.3) as client,
    ):
        with anyio.fail_after(10), pytest.raises(TimeoutError):
            await client.call_tool("stall")
        with anyio.fail_after(10):
            await stopped.wait()


# ---- the application's callbacks ------------------------------------------------------------------------------


chatty = Server("chatty")


@chatty.tool()
async def report(ctx: Context, steps: int) -> str:
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1}")
    return "reported"


@chatty.tool()
async def question(ctx: Context) -> str:
    return (await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})).action


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_a_slow_progress_callback_holds_up_only_its_own_call(anyio_backend: str, protocol: str) -> None:
    """Progress callbacks run off the read loop: while one waits, the server's question for another call is read
    and answered (inline, the callback would block it: a deadlock here, a timed-out elicitation in real life), and
    a call still returns after every progress notification that came before its result."""
    started, release = anyio.Event(), anyio.Event()
    seen: list[str | None] = []

    async def slow(done: float, total: float | None, message: str | None) -> None:
        started.set()
        await release.wait()  # until the other call has been answered
        seen.append(message)

    handler = ScriptedHandler([{"name": "Ann"}])
    with anyio.fail_after(10):
        async with connected(chatty, elicitation=handler, protocol=protocol) as client:
            results: list[str] = []

            async def reporting() -> None:
                results.append((await client.call_tool("report", {"steps": 5}, progress=slow)).text)
                assert seen == [f"step {i}" for i in range(1, 6)]  # all of them, in order, before the return

            async with anyio.create_task_group() as tg:
                tg.start_soon(reporting)
                await started.wait()  # a progress callback is under way, holding up its call
                results.append((await client.call_tool("question")).text)
                release.set()
    assert results == ["accept", "reported"]
