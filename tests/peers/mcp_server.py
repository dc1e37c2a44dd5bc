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


EVERY_KIND = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "born": {"type": "string", "format": "date"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "height": {"type": "number", "minimum": 0.5},
        "subscribe": {"type": "boolean", "default": False},
        "size": {"type": "string", "enum": ["S", "M", "L"]},
        "tier": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
        "pet": {"type": "string", "enum": ["cat", "dog"], "enumNames": ["Cat", "Dog"]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1},
        "langs": {
            "type": "array",
            "items": {"anyOf": [{"const": "py", "title": "Python"}, {"const": "ts", "title": "TS"}]},
        },
    },
    "required": ["name", "email", "age"],
}


@app.tool()
async def every_kind(ctx: Context) -> str:
    """A form with a field of every kind the spec allows, sent as a raw schema (2025-06-18 and 2025-11-25)."""
    result = await ctx.session.elicit_form("Tell us everything", EVERY_KIND)
    return f"{result.action} {sorted((result.content or {}).items())}"


class Confirm(BaseModel):
    confirm: bool = Field(description="Really delete?")


@app.tool()
async def confirm_delete(ctx: Context) -> str:
    """A confirmation: one boolean."""
    result = await ctx.elicit("Delete the file?", Confirm)
    if isinstance(result, AcceptedElicitation):
        return "deleted" if result.data.confirm else "kept"
    return result.action


GATES: set[str] = set()


@app.tool()
async def url_gate(key: str) -> str:
    """-32042 on the first call for each ``key``, connected on the retry (one server, many clients)."""
    if key not in GATES:
        GATES.add(key)
        link = ElicitRequestURLParams(
            mode="url", message="Connect", url=f"https://auth.example.com/gate/{key}", elicitation_id=f"gate-{key}"
        )
        raise UrlElicitationRequiredError([link])
    return f"connected {key}"


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--sse-port":  # the HTTP+SSE transport of 2024-11-05
        app.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run("stdio")
