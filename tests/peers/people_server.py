"""An elicitor server for the several-people tests: one tool that reports progress, logs and asks a question, each
naming the call's ``tag``, and answers with the tag and the name given; a memo per person (``memo://NAME``), and a
tool that says one changed (``notifications/resources/updated``) and one that says the tool list changed; a tool
that asks the client's roots and its model; and one that reports progress more than a stalled client can take.

``python -m tests.peers.people_server`` serves it on stdio; with ``http PORT``, over Streamable HTTP
at ``http://127.0.0.1:PORT/mcp``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import anyio

from elicitor import Accepted, Context, Server

server = Server("people", "1.0")


@dataclass
class Name:
    name: str


@server.tool()
async def greet(ctx: Context, tag: str) -> str:
    """Reports progress and logs naming the call, asks a name, reports again, and answers with both."""
    await ctx.report_progress(1, 3, f"{tag} started")
    await ctx.log("info", f"{tag} logged")
    outcome = await ctx.elicit(f"Name for {tag}?", Name)
    await ctx.report_progress(2, 3, f"{tag} answered")
    return f"{tag}:{outcome.data.name}" if isinstance(outcome, Accepted) else f"{tag}:{outcome.action}"


@server.resource("memo://ann")
def ann_memo() -> str:
    return "ann's memo"


@server.resource("memo://bob")
def bob_memo() -> str:
    return "bob's memo"


@server.tool()
async def touch(uri: str) -> str:
    """Says that the resource at ``uri`` changed."""
    server.notify_resource_updated(uri)
    return f"touched {uri}"


@server.tool()
async def retool() -> str:
    """Says that the tool list changed (it has not: the notice is what counts)."""
    server.notify_tools_changed()
    return "retooled"


@server.tool()
async def consult(ctx: Context, tag: str) -> str:
    """Asks the client's roots and its model (naming the call), and answers with both."""
    roots = [str(root.get("uri")) for root in await ctx.list_roots()]
    sampled = await ctx.sample(f"What does {tag} think?", max_tokens=10)
    content = sampled.get("content")
    said = content.get("text") if isinstance(content, dict) else None
    return f"{tag}: roots {' '.join(roots)}; model {said}"


@server.tool()
async def flood(ctx: Context, count: int, size: int, pause: float = 0.0, ledger: str = "") -> str:
    """Reports that it starts, waits ``pause`` seconds, then reports progress ``count`` times, each message ``size``
    characters long: more than a client that stopped reading can take. How many it sent so far is written to the
    file ``ledger`` (if given) after each one."""
    await ctx.report_progress(0, count, "starting")
    await anyio.sleep(pause)
    for done in range(count):
        await ctx.report_progress(done, count, "x" * size)
        if ledger:
            Path(ledger).write_text(str(done + 1))
    return f"flooded {count}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("http", port=int(sys.argv[2]))
    else:
        server.run("stdio")
