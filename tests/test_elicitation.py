"""ctx.elicit end to end in one process, on every revision and both anyio backends."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.lowlevel
import pytest

from elicitor import (
    Accepted,
    Cancelled,
    Client,
    Context,
    Declined,
    ElicitationRequest,
    InvalidAnswer,
    JSONRPCError,
    ScriptedHandler,
    Server,
    TooManyRounds,
)
from elicitor.transports import memory_pair

from .conftest import REVISIONS, connected

pytestmark = pytest.mark.anyio


@dataclass
class Person:
    name: str
    age: int | None = None


server = Server("test-server", "2.0", title="Test Server")
side_effects: list[str] = []


@server.tool()
async def ask(ctx: Context, n: int) -> int:
    """Ask n times; count acceptances."""
    accepted = 0
    for _ in range(n):
        if isinstance(await ctx.elicit("Please provide your name and age", Person), Accepted):
            accepted += 1
    return accepted


@server.tool()
async def greet(ctx: Context) -> str:
    match await ctx.elicit("Who are you?", Person):
        case Accepted(data=person):
            return f"Hello {person.name} ({person.age})"
        case Declined():
            return "declined"
        case Cancelled():
            return "cancelled"
    raise AssertionError


@server.tool()
async def together(ctx: Context) -> str:
    """Two questions awaited concurrently in a task group."""
    answers: dict[str, Any] = {}

    async def first() -> None:
        answers["a"] = await ctx.elicit("first?", bool)

    async def second() -> None:
        await anyio.lowlevel.checkpoint()  # a branch that yields before asking is still in the same round
        answers["b"] = await ctx.elicit("second?", Literal["x", "y"])

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        tg.start_soon(second)
    return f"{answers['a']} {answers['b']}"


@server.tool()
async def gathered(ctx: Context) -> str:
    """Two questions awaited with asyncio.gather (asyncio only)."""
    a, b = await asyncio.gather(ctx.elicit("first?", bool), ctx.elicit("second?", Literal["x", "y"]))
    return f"{a} {b}"


@server.tool()
async def charge(ctx: Context) -> str:
    def make_charge() -> str:
        side_effects.append("charged")
        return f"r{len(side_effects)}"

    receipt = await ctx.once("charge", make_charge)
    if not await ctx.confirm("Ship it?"):
        return f"{receipt}: not shipped"
    return f"{receipt}: shipped"


@server.tool()
async def guarded(ctx: Context) -> str:
    return "deleted" if await ctx.confirm("Delete everything?") else "kept"


@server.tool()
async def strict(ctx: Context) -> str:
    try:
        outcome = await ctx.elicit("age?", {"type": "object", "properties": {"age": {"type": "integer"}}})
    except InvalidAnswer as exc:
        return f"invalid: {exc}"
    return outcome.action


def fresh_server_note() -> None:
    side_effects.clear()


async def test_accept_decline_cancel_on_every_revision(anyio_backend: str) -> None:
    for revision in REVISIONS:
        handler = ScriptedHandler([{"name": "Ada", "age": 36}, "decline", "cancel"])
        async with connected(server, elicitation=handler, protocol=revision) as client:
            assert client.protocol_version == revision
            assert (await client.call_tool("greet")).text == "Hello Ada (36)"
            assert (await client.call_tool("greet")).text == "declined"
            assert (await client.call_tool("greet")).text == "cancelled"
        request = handler.requests[0]
        assert request.message == "Who are you?"
        assert request.server is not None and request.server.title == "Test Server"
        assert [f.name for f in request.form.fields] == ["name", "age"]


async def test_many_sequential_elicitations(anyio_backend: str) -> None:
    for revision in REVISIONS:
        handler = ScriptedHandler(otherwise={"name": "x", "age": 1})
        async with connected(server, elicitation=handler, protocol=revision, max_rounds=30) as client:
            result = await client.call_tool("ask", {"n": 25})
            assert (result.text, result.is_error) == ("25", False)
            assert len(handler.requests) == 25


async def test_auto_detects_the_stateless_revision(anyio_backend: str) -> None:
    async with connected(server, elicitation=ScriptedHandler()) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_info is not None and client.server_info.name == "test-server"
        assert client.stateless
        with pytest.deprecated_call(match="Client.stateless"):
            assert client.modern  # the former name still answers, and says which to use


async def test_the_former_names_of_the_stateless_era_still_work_and_say_so(anyio_backend: str) -> None:
    from elicitor import UrlElicitationRequest
    from elicitor.protocol import RequestReceived

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    with pytest.deprecated_call(match="serve_stateless"):
        found = await server.connection().serve_modern(RequestReceived(1, "server/discover", {"_meta": meta}))
    assert found["supportedVersions"] == ["2026-07-28"]
    params = {"message": "Sign in", "url": "https://a.example/x", "elicitationId": "e1"}
    with pytest.deprecated_call(match="stateless="):
        url = UrlElicitationRequest.from_params(params, None, modern=True)
    assert not url.completion_notice and UrlElicitationRequest.from_params(params, None).completion_notice


@pytest.mark.parametrize("tool", ["together", "gathered"])
async def test_concurrent_asks_are_one_round_on_2026(anyio_backend: str, tool: str) -> None:
    if tool == "gathered" and anyio_backend != "asyncio":
        pytest.skip("asyncio.gather needs asyncio")
    server_end, client_end = memory_pair()
    rounds: list[dict[str, Any]] = []
    handler = ScriptedHandler([{"value": True}, {"value": "y"}])

    class Watched:  # what the server answers tools/call, read off the wire
        async def receive(self) -> Any:
            message = await client_end.receive()
            if isinstance(message, bytes):
                result = json.loads(message).get("result")
                if isinstance(result, dict) and ("content" in result or "inputRequests" in result):
                    rounds.append(result)
            return message

        async def send(self, message: bytes, related: Any = None, *, final: bool = False) -> None:
            await client_end.send(message, related, final=final)

        async def aclose(self) -> None:
            await client_end.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, server_end)
        async with Client(Watched(), elicitation=handler, protocol="2026-07-28") as client:
            result = await client.call_tool(tool)
        tg.cancel_scope.cancel()
    assert result.text == "Accepted(data=True, action='accept') Accepted(data='y', action='accept')"
    assert [r["resultType"] for r in rounds] == ["input_required", "complete"]
    assert len(rounds[0]["inputRequests"]) == 2


async def test_once_runs_a_side_effect_once_across_rounds(anyio_backend: str) -> None:
    for revision in REVISIONS:
        side_effects.clear()
        handler = ScriptedHandler([{"confirm": True}])
        async with connected(server, elicitation=handler, protocol=revision) as client:
            assert (await client.call_tool("charge")).text == "r1: shipped"
        assert side_effects == ["charged"]


async def test_confirm_is_fail_closed(anyio_backend: str) -> None:
    for revision in REVISIONS:
        answers: list[Any] = ["decline", "cancel", {"confirm": False}, {"confirm": True}]
        async with connected(server, elicitation=ScriptedHandler(answers), protocol=revision) as client:
            assert [(await client.call_tool("guarded")).text for _ in answers] == [
                "kept",
                "kept",
                "kept",
                "deleted",
            ]
        # A client that cannot elicit never confirms.
        async with connected(server, protocol=revision) as client:
            assert (await client.call_tool("guarded")).text == "kept"


async def test_client_without_elicitation(anyio_backend: str) -> None:
    for revision in ("2025-06-18", "2025-11-25"):
        async with connected(server, protocol=revision) as client:
            result = await client.call_tool("greet")
            assert result.is_error
            assert "did not declare the elicitation capability" in result.text
    async with connected(server, protocol="2026-07-28") as client:
        with pytest.raises(JSONRPCError) as info:
            await client.call_tool("greet")
        assert info.value.code == -32021
        assert info.value.data == {"requiredCapabilities": {"elicitation": {}}}


async def test_client_validates_before_sending_and_asks_again(anyio_backend: str) -> None:
    handler = ScriptedHandler([{"age": 3}, {"name": 7}, {"name": "Grace"}], retry_invalid=True)
    async with connected(server, elicitation=handler, protocol="2025-11-25") as client:
        assert (await client.call_tool("greet")).text == "Hello Grace (None)"
    first, second, third = handler.requests
    assert first.errors == ()
    assert [str(e) for e in second.errors] == ["name: is required"]
    assert second.previous == {"age": 3}
    assert [str(e) for e in third.errors] == ["name: expected text, got a number"]


async def test_invalid_content_from_a_non_validating_client_never_crashes_the_tool(
    anyio_backend: str,
) -> None:
    # A raw handler that skips client-side validation: simulate by answering through the wire directly.
    for revision in REVISIONS:
        handler = ScriptedHandler([{"age": "old"}] * 5, retry_invalid=True)
        async with connected(server, elicitation=handler, protocol=revision) as client:
            # The client refuses to send an invalid answer 5 times, then cancels.
            assert (await client.call_tool("strict")).text == "cancel"


async def test_unknown_tool_and_bad_arguments(anyio_backend: str) -> None:
    for revision in REVISIONS:
        async with connected(server, protocol=revision) as client:
            with pytest.raises(JSONRPCError) as info:
                await client.call_tool("nope")
            assert info.value.code == -32602
            result = await client.call_tool("ask", {"n": "three"})
            assert result.is_error
            assert "Expected `int`, got `str`" in result.text and "n" in result.text


async def test_tools_list_describes_inputs(anyio_backend: str) -> None:
    async with connected(server) as client:
        tools = {t.name: t for t in await client.list_tools()}
    assert tools["ask"].input_schema == {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    assert tools["ask"].description == "Ask n times; count acceptances."


async def test_cancelling_a_call_cancels_its_pending_elicitation(anyio_backend: str) -> None:
    asked = anyio.Event()
    released = anyio.Event()

    async def slow(request: ElicitationRequest) -> Any:
        asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            released.set()

    async with connected(server, elicitation=slow, protocol="2025-11-25") as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "greet")
            await asked.wait()
            tg.cancel_scope.cancel()
        # notifications/cancelled for tools/call reached the server; the server cancelled the tool, which
        # sent notifications/cancelled for its elicitation; the client cancelled the handler.
        with anyio.fail_after(5):
            await released.wait()


async def test_mrtr_round_cap(anyio_backend: str) -> None:
    handler = ScriptedHandler(otherwise={"name": "x"})
    async with connected(server, elicitation=handler, protocol="2026-07-28", max_rounds=3) as client:
        with pytest.raises(TooManyRounds):
            await client.call_tool("ask", {"n": 10})


@pytest.mark.timeout(600)  # see the hang guard below
async def test_ten_thousand_pending_elicitations(anyio_backend: str) -> None:
    """10,000 tool calls in one server process, each waiting on a person at once; then all answered."""
    count = 10_000
    arrived = 0
    everyone_waits = anyio.Event()
    release = anyio.Event()

    async def person(request: ElicitationRequest) -> Any:
        nonlocal arrived
        arrived += 1
        if arrived == count:
            everyone_waits.set()
        await release.wait()
        return Accepted({"name": "x"})

    server_end, client_end = memory_pair(buffer=count * 2)
    results: list[str] = []

    async def call(client: Client) -> None:
        results.append((await client.call_tool("ask", {"n": 1})).text)

    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, server_end)
        async with (
            Client(client_end, elicitation=person, protocol="2025-11-25") as client,
            anyio.create_task_group() as calls,
        ):
            for _ in range(count):
                calls.start_soon(call, client)
            with anyio.fail_after(400):  # a hang guard, not a timing: seconds on a quiet machine, minutes when loaded
                await everyone_waits.wait()
            assert client._session is not None
            assert client._session.connection.answering == count  # all pending at the client at once
            release.set()
        tg.cancel_scope.cancel()
    assert results == ["1"] * count
