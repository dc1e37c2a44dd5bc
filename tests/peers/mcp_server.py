"""A server written with the official MCP Python SDK (PyPI ``mcp``), used as a peer we did not write."""

from __future__ import annotations

from typing import Annotated

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp_types import ElicitRequestURLParams
from pydantic import BaseModel, Field

app = MCPServer("official-peer")


class Person(BaseModel):
    name: str = Field(description="Your name")
    age: int = Field(default=30, ge=0, le=150)


@app.tool()
async def push_ask(ctx: Context) -> str:
    """Handshake-era elicitation: ctx.elicit sends elicitation/create mid-call."""
    result = await ctx.elicit("Who are you?", Person)
    if isinstance(result, AcceptedElicitation):
        return f"hello {result.data.name}, {result.data.age}"
    return result.action


async def ask_person(ctx: Context) -> Elicit[Person]:
    return Elicit("Who are you (resolver)?", Person)


@app.tool()
async def resolved_ask(person: Annotated[ElicitationResult[Person], Resolve(ask_person)]) -> str:
    """Elicitation through the SDK's resolver: pushed on handshake revisions, input_required on 2026-07-28."""
    if isinstance(person, AcceptedElicitation):
        return f"resolved {person.data.name}, {person.data.age}"
    return person.action


@app.tool()
async def push_url(ctx: Context) -> str:
    """URL mode (2025-11-25): ask the person to open a page, then say the interaction is complete."""
    result = await ctx.elicit_url("Sign in to the example service", "https://auth.example.com/e/peer-1", "peer-1")
    if result.action == "accept":
        await ctx.session.send_elicit_complete("peer-1")
    return result.action


CALLS = {"url_required": 0}


@app.tool()
async def url_required(ctx: Context) -> str:
    """Raises -32042 on its first call; connected on the next."""
    CALLS["url_required"] += 1
    if CALLS["url_required"] == 1:
        link = ElicitRequestURLParams(
            mode="url", message="Connect", url="https://auth.example.com/e/peer-2", elicitation_id="peer-2"
        )
        raise UrlElicitationRequiredError([link])
    return "connected"


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run("stdio")
