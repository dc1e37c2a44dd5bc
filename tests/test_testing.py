"""elicitor.testing and the answer shapes docs/testing.md promises, on both eras."""

from __future__ import annotations

import enum

import pytest

from elicitor import Accepted, Context, ScriptedHandler, Server
from elicitor.testing import connected

pytestmark = pytest.mark.anyio


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


server = Server("testing-recipe")
seen: dict[str, object] = {}


@server.tool()
async def every_shape(ctx: Context) -> str:
    seen["bool"] = await ctx.elicit("A yes or no?", bool)
    seen["enum"] = await ctx.elicit("A color?", Color)
    seen["list"] = await ctx.elicit("Some colors?", list[Color])
    seen["confirm"] = await ctx.confirm("Go ahead?")
    return "asked"


@server.tool()
async def whose(ctx: Context) -> str:
    link = await ctx.url_elicitation("Connect", "https://example.com/connect/{elicitation_id}")
    refused = not await server.complete_url_elicitation(link.id, principal="mallory")
    accepted = await server.complete_url_elicitation(link.id, principal=ctx.principal)
    return f"{ctx.principal} refused={refused} accepted={accepted}"


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_the_documented_answer_shapes(anyio_backend: str, protocol: str) -> None:
    handler = ScriptedHandler([{"value": True}, {"value": "red"}, {"value": ["red", "blue"]}, {"confirm": True}])
    async with connected(server, elicitation=handler, protocol=protocol) as client:
        assert (await client.call_tool("every_shape")).text == "asked"
    assert seen == {
        "bool": Accepted(True),
        "enum": Accepted(Color.RED),
        "list": Accepted([Color.RED, Color.BLUE]),
        "confirm": True,
    }
    assert all(not request.errors for request in handler.requests)


async def test_a_connection_runs_as_its_principal(anyio_backend: str) -> None:
    handler = ScriptedHandler(modes=frozenset({"form", "url"}))
    async with connected(server, principal="alice", elicitation=handler, protocol="2025-11-25") as client:
        assert (await client.call_tool("whose")).text == "alice refused=True accepted=True"
