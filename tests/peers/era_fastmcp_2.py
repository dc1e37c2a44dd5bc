"""A server built with FastMCP 2 (PyPI ``fastmcp``, 2.10.6 and 2.14.5): ``ctx.elicit`` with a dataclass, a bare
type and a list of choices.

Runs in ``.cache/peers/mcp-1.10.1`` (FastMCP 2.10.6) and ``.cache/peers/mcp-1.24.0`` (FastMCP 2.14.5).
``python era_fastmcp_2.py`` serves stdio, ``--port N`` Streamable HTTP at ``/mcp``, ``--sse-port N`` the HTTP+SSE
transport at ``/sse``.
"""

import sys
from dataclasses import dataclass

from fastmcp import Context, FastMCP

app = FastMCP("fastmcp-2-peer")


@dataclass
class Person:
    name: str
    age: int


@app.tool()
def echo(text: str) -> str:
    """A plain tool: says back what it was given."""
    return f"echo {text}"


@app.tool()
async def ask(ctx: Context) -> str:
    """A form from a dataclass."""
    result = await ctx.elicit("Who are you?", Person)
    if result.action == "accept":
        return f"accept {result.data.name} {result.data.age}"
    return result.action


@app.tool()
async def confirm_delete(ctx: Context) -> str:
    """A confirmation: a bare ``bool``."""
    result = await ctx.elicit("Delete the file?", bool)
    if result.action == "accept":
        return "deleted" if result.data else "kept"
    return result.action


@app.tool()
async def size(ctx: Context) -> str:
    """A single choice from a list of strings."""
    result = await ctx.elicit("Which size?", ["S", "M", "L"])
    return f"accept {result.data}" if result.action == "accept" else result.action


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--sse-port":
        app.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run("stdio")
