"""A server written with FastMCP (PyPI ``fastmcp``), used as a peer we did not write.

Usage: ``python fastmcp_server.py`` (stdio), ``python fastmcp_server.py --port N`` (Streamable HTTP at /mcp) or
``--sse-port N`` (the HTTP+SSE transport of 2024-11-05 at /sse).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

from fastmcp import Context, FastMCP
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp_types import ElicitRequestURLParams

app = FastMCP("fastmcp-peer")


@dataclass
class Profile:
    name: str
    age: int
    height: float
    subscribe: bool
    size: Literal["S", "M", "L"]
    tags: list[Literal["a", "b", "c"]]


@app.tool()
async def profile(ctx: Context) -> str:
    """A form of strings, numbers, a boolean, a single- and a multi-select, from a dataclass."""
    result = await ctx.elicit("Your profile?", Profile)
    if result.action == "accept":
        data = result.data
        return f"accept {data.name} {data.age} {data.height} {data.subscribe} {data.size} {sorted(data.tags)}"
    return result.action


@app.tool()
async def tier(ctx: Context) -> str:
    """A titled single-select (FastMCP's dict shorthand: ``oneOf`` with titles)."""
    result = await ctx.elicit("Which tier?", {"free": {"title": "Free"}, "pro": {"title": "Pro"}})
    return f"accept {result.data}" if result.action == "accept" else result.action


@app.tool()
async def confirm_delete(ctx: Context) -> str:
    """A confirmation: ``bool``, as FastMCP recommends."""
    result = await ctx.elicit("Delete the file?", bool)
    if result.action == "accept":
        return "deleted" if result.data else "kept"
    return result.action


@app.tool()
async def sign_in(ctx: Context) -> str:
    """URL mode mid-call (2025-11-25), through the SDK session FastMCP runs on."""
    result = await ctx.session.elicit_url("Sign in to the example service", "https://auth.example.com/fm", "fm-1")
    return result.action


GATES: set[str] = set()


@app.tool()
async def url_gate(key: str) -> str:
    """-32042 on the first call for each ``key``; connected on the retry."""
    if key not in GATES:
        GATES.add(key)
        link = ElicitRequestURLParams(
            mode="url", message="Connect", url=f"https://auth.example.com/fm/{key}", elicitation_id=f"fm-{key}"
        )
        raise UrlElicitationRequiredError([link])
    return f"connected {key}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        app.run("http", host="127.0.0.1", port=int(sys.argv[2]), path="/mcp", show_banner=False)
    elif len(sys.argv) == 3 and sys.argv[1] == "--sse-port":  # the HTTP+SSE transport of 2024-11-05, at /sse
        app.run("sse", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
    else:
        app.run("stdio", show_banner=False)
