"""A server built with the official Python SDK 1.10.1 (PyPI ``mcp``), its first release with elicitation
(2025-06-18): ``ctx.elicit`` with a pydantic model.

Runs in ``.cache/peers/mcp-1.10.1`` (``scripts/peers.py``). ``python era_mcp_1_10.py`` serves stdio, ``--port N``
Streamable HTTP at ``/mcp``, ``--sse-port N`` the HTTP+SSE transport at ``/sse``.
"""

import sys

from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel, Field

PORT = int(sys.argv[2]) if len(sys.argv) == 3 else 8000
app = FastMCP("mcp-1.10.1-peer", host="127.0.0.1", port=PORT)


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


if __name__ == "__main__":
    transports = {"--port": "streamable-http", "--sse-port": "sse"}
    app.run(transports.get(sys.argv[1], "stdio") if len(sys.argv) == 3 else "stdio")
