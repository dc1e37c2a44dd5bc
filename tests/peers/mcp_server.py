"""A server written with the official MCP Python SDK (PyPI ``mcp``), used as a peer we did not write."""

from __future__ import annotations

import os
from typing import Annotated

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)
from pydantic import BaseModel, Field

app = MCPServer("official-peer")


def record(event: str) -> None:
    """A side effect the tests can count across processes: a line in ``ELICITOR_PEER_LEDGER``, if set."""
    ledger = os.environ.get("ELICITOR_PEER_LEDGER")
    if ledger:
        with open(ledger, "a") as out:
            out.write(event + "\n")


class Person(BaseModel):
    name: str = Field(description="Your name")
    age: int = Field(default=30, ge=0, le=150)


@app.tool()
async def push_ask(ctx: Context) -> str:
    """Handshake-era elicitation: ctx.elicit sends elicitation/create mid-call."""
    record("push_ask started")  # before it asks: run twice, it would show twice
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


@app.tool()
async def rounds_ask(ctx: Context) -> str | InputRequiredResult:
    """Asks in rounds (2026-07-28 only): returns InputRequiredResult itself; its handshake-era connection calls
    that an invalid result (-32603)."""
    answer = (ctx.input_responses or {}).get("who")
    if isinstance(answer, ElicitResult) and answer.action == "accept" and answer.content:
        record("rounds_ask done")  # its work, done once it has its answer
        return f"rounds {answer.content.get('name')}"
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    question = ElicitRequest(params=ElicitRequestFormParams(message="Who are you (rounds)?", requested_schema=schema))
    return InputRequiredResult(input_requests={"who": question})


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
