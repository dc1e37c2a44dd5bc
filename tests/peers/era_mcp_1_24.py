"""A server built with the official Python SDK 1.24.0 (PyPI ``mcp``): 2025-11-25, form and URL-mode elicitation.

Runs in ``.cache/peers/mcp-1.24.0`` (``scripts/peers.py``). ``python era_mcp_1_24.py`` serves stdio, ``--port N``
Streamable HTTP at ``/mcp``, ``--sse-port N`` the HTTP+SSE transport at ``/sse``.
"""

import sys

from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel, Field

PORT = int(sys.argv[2]) if len(sys.argv) == 3 else 8000
app = FastMCP("mcp-1.24.0-peer", host="127.0.0.1", port=PORT)


class Person(BaseModel):
    name: str = Field(description="Your name")
    age: int = Field(default=30, ge=0, le=150)
    subscribe: bool = False


@app.tool()
def echo(text: str) -> str:
    """A plain tool: says back what it was given."""
    return f"echo {text}"


@app.tool()
async def ask(ctx: Context) -> str:
    """Asks a form mid-call (elicitation/create) and says what came back."""
    result = await ctx.elicit("Who are you?", Person)
    if result.action == "accept" and result.data is not None:
        return f"accept {result.data.name} {result.data.age} {result.data.subscribe}"
    return result.action


@app.tool()
async def sign_in(ctx: Context) -> str:
    """URL mode mid-call: asks the person to open a page, then says the interaction is complete."""
    result = await ctx.elicit_url("Sign in to the example service", "https://auth.example.com/e/old-1", "old-1")
    if result.action == "accept":
        await ctx.session.send_elicit_complete("old-1")
    return result.action


if __name__ == "__main__":
    transports = {"--port": "streamable-http", "--sse-port": "sse"}
    app.run(transports.get(sys.argv[1], "stdio") if len(sys.argv) == 3 else "stdio")
