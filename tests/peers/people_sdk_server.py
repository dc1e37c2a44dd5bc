"""A server written with the official MCP Python SDK for the several-people tests: one tool that reports progress,
logs and asks a question, each naming the call's ``tag``, and answers with the tag and the name given; and a memory
of what its connection told it (``remember``, ``recall``), as a server keeps what a session told it.

``python -m tests.peers.people_sdk_server`` serves it on stdio; with ``http PORT``, over Streamable HTTP
at ``http://127.0.0.1:PORT/mcp``.
"""

from __future__ import annotations

import sys

from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

app = MCPServer("people-sdk")


class Name(BaseModel):
    name: str


@app.tool()
async def greet(ctx: Context, tag: str) -> str:
    """Reports progress and logs naming the call, asks a name, reports again, and answers with both."""
    await ctx.report_progress(1, 3, f"{tag} started")
    await ctx.info(f"{tag} logged")
    outcome = await ctx.elicit(f"Name for {tag}?", Name)
    await ctx.report_progress(2, 3, f"{tag} answered")
    return f"{tag}:{outcome.data.name}" if isinstance(outcome, AcceptedElicitation) else f"{tag}:{outcome.action}"


notes: list[str] = []
"""What this connection was told: on stdio a connection is a process of its own."""


@app.tool()
async def remember(note: str) -> str:
    """Keeps ``note`` for this connection."""
    notes.append(note)
    return "kept"


@app.tool()
async def recall() -> str:
    """What this connection was told, or ``nothing``."""
    return "; ".join(notes) or "nothing"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        app.run("streamable-http", port=int(sys.argv[2]))
    else:
        app.run("stdio")
