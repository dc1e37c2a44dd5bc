"""Resources, prompts, completion, sampling, roots and change notifications, on every revision."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from elicitor import (
    Accepted,
    ClientCapabilityMissing,
    Context,
    ImageContent,
    JSONRPCError,
    ScriptedHandler,
    Server,
)
from elicitor.protocol import NotificationReceived, RequestReceived
from elicitor.session import open_session
from elicitor.transports import memory_pair

from .conftest import REVISIONS, connected

pytestmark = pytest.mark.anyio

server = Server("features", "1.0")
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.resource("memo://note", name="note", mime_type="text/plain")
async def note() -> str:
    """A note."""
    return "remember the milk"


@server.resource("memo://logo", name="logo", mime_type="image/png")
def logo() -> bytes:
    return b"\x89PNG"


@server.resource("memo://users/{user}/greeting", name="greeting", mime_type="text/plain")
async def greeting(ctx: Context, user: str) -> str:
    """A greeting that asks who is asking."""
    outcome = await ctx.elicit("Who are you?", NAME)
    return f"hello {user}, from {outcome.data['name'] if isinstance(outcome, Accepted) else 'nobody'}"


@server.prompt(arguments={"topic": "What to write about"})
async def haiku(topic: str, mood: str = "calm") -> list[Any]:
    """Write a haiku."""
    return [f"Write a {mood} haiku about {topic}.", ImageContent(data="AAAA", mime_type="image/png")]


@server.prompt()
async def interview(ctx: Context) -> str:
    outcome = await ctx.elicit("Your name?", NAME, key="who")
    return f"Interview {outcome.data['name']}" if isinstance(outcome, Accepted) else "No interview"


@server.completion
async def complete(ref: dict[str, Any], argument: dict[str, Any], context: dict[str, Any] | None) -> list[str]:
    return [t for t in ("tea", "tennis", "travel") if t.startswith(argument.get("value", ""))]


@server.tool()
async def ask_model(ctx: Context, question: str) -> str:
    sampled = await ctx.sample(question, max_tokens=50, system_prompt="Be brief")
    return f"model says {sampled['content']['text']}"


@server.tool()
async def where(ctx: Context) -> str:
    return ", ".join(root["uri"] for root in await ctx.list_roots())


async def sample(params: dict[str, Any]) -> dict[str, Any]:
    assert params["systemPrompt"] == "Be brief"
    assert params["maxTokens"] == 50
    text = params["messages"][0]["content"]["text"]
    return {
        "role": "assistant",
        "content": {"type": "text", "text": text.upper()},
        "model": "m",
        "stopReason": "endTurn",
    }


ROOTS = [{"uri": "file:///work", "name": "work"}]


@pytest.mark.parametrize("revision", REVISIONS)
async def test_resources_prompts_completion(anyio_backend: str, revision: str) -> None:
    handler = ScriptedHandler(otherwise={"name": "Ada"})
    async with connected(server, elicitation=handler, protocol=revision) as client:
        assert set(client.server_capabilities) >= {"resources", "prompts", "completions"}
        listed = {r["uri"]: r for r in await client.list_resources()}
        assert listed["memo://note"] == {
            "uri": "memo://note",
            "name": "note",
            "description": "A note.",
            "mimeType": "text/plain",
        }
        templates = await client.list_resource_templates()
        assert templates[0]["uriTemplate"] == "memo://users/{user}/greeting"
        assert (await client.read_resource("memo://note"))["contents"] == [
            {"uri": "memo://note", "text": "remember the milk", "mimeType": "text/plain"}
        ]
        assert (await client.read_resource("memo://logo"))["contents"][0]["blob"] == "iVBORw=="
        read = await client.read_resource("memo://users/bob/greeting")
        assert read["contents"][0]["text"] == "hello bob, from Ada"
        with pytest.raises(JSONRPCError) as info:
            await client.read_resource("memo://nothing")
        assert info.value.code == (-32602 if revision == "2026-07-28" else -32002)
        assert info.value.data == {"uri": "memo://nothing"}
        prompts = {p["name"]: p for p in await client.list_prompts()}
        assert prompts["haiku"]["arguments"] == [
            {"name": "topic", "required": True, "description": "What to write about"},
            {"name": "mood", "required": False},
        ]
        got = await client.get_prompt("haiku", {"topic": "rain"})
        assert got["messages"][0] == {
            "role": "user",
            "content": {"type": "text", "text": "Write a calm haiku about rain."},
        }
        assert got["messages"][1]["content"]["type"] == "image"
        assert (await client.get_prompt("interview"))["messages"][0]["content"]["text"] == "Interview Ada"
        for bad in ({}, {"topic": 3}, {"topic": "x", "extra": "y"}):
            with pytest.raises(JSONRPCError) as info:
                await client.get_prompt("haiku", bad)  # type: ignore[arg-type]
            assert info.value.code == -32602
        assert await client.complete({"type": "ref/prompt", "name": "haiku"}, "topic", "te") == ["tea", "tennis"]


@pytest.mark.parametrize("revision", REVISIONS)
async def test_sampling_and_roots(anyio_backend: str, revision: str) -> None:
    async with connected(server, protocol=revision, sampling=sample, roots=ROOTS) as client:
        assert (await client.call_tool("ask_model", {"question": "hi"})).text == "model says HI"
        assert (await client.call_tool("where")).text == "file:///work"
    async with connected(server, protocol=revision) as client:
        if revision == "2026-07-28":
            with pytest.raises(JSONRPCError) as info:
                await client.call_tool("ask_model", {"question": "hi"})
            assert (info.value.code, info.value.data) == (-32021, {"requiredCapabilities": {"sampling": {}}})
        else:
            result = await client.call_tool("where")
            assert result.is_error and "roots" in result.text


def test_capability_missing_names_the_capability() -> None:
    exc = ClientCapabilityMissing("no", {"roots": {}})
    assert exc.required == {"roots": {}}


async def test_list_changes_reach_handshake_sessions_and_listeners(anyio_backend: str) -> None:
    changes = Server("changing", "1")

    @changes.tool()
    async def noop() -> str:
        return "ok"

    notes: list[NotificationReceived] = []
    server_end, client_end = memory_pair()

    async def no_requests(request: RequestReceived) -> dict[str, Any]:
        return {}

    async def collect(note: NotificationReceived) -> None:
        notes.append(note)

    async with anyio.create_task_group() as tg:
        tg.start_soon(changes.serve, server_end)
        async with open_session(client_end, no_requests, collect) as session:
            await session.request(
                "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
            )
            await session.notify("notifications/initialized")
            meta = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            listen = {"_meta": meta, "notifications": {"toolsListChanged": True, "promptsListChanged": True}}
            async with anyio.create_task_group() as listening:

                async def subscribe() -> None:
                    await session.request("subscriptions/listen", listen)

                listening.start_soon(subscribe)
                with anyio.fail_after(5):
                    while not any(n.method == "notifications/subscriptions/acknowledged" for n in notes):
                        await anyio.sleep(0.01)
                changes.notify_tools_changed()
                changes.notify_resource_updated("memo://x")  # nobody subscribed: nobody hears it
                with anyio.fail_after(5):
                    while sum(n.method == "notifications/tools/list_changed" for n in notes) < 2:
                        await anyio.sleep(0.01)
                listening.cancel_scope.cancel()  # the client cancels its subscription
        tg.cancel_scope.cancel()
    acknowledged = next(n for n in notes if n.method == "notifications/subscriptions/acknowledged")
    # prompts are not offered by this server, so that part of the filter is not acknowledged
    assert acknowledged.params == {
        "_meta": {"io.modelcontextprotocol/subscriptionId": 2},
        "notifications": {"toolsListChanged": True},
    }
    tagged = [n for n in notes if n.method == "notifications/tools/list_changed" and n.params]
    assert tagged[0].params == {"_meta": {"io.modelcontextprotocol/subscriptionId": 2}}
    assert not any(n.method == "notifications/resources/updated" for n in notes)
