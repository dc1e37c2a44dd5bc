"""A server built with the official Python SDK 1.6.0 (PyPI ``mcp``), the last release that speaks 2024-11-05 only:
stdio and the HTTP+SSE transport, no Streamable HTTP, no elicitation (it did not exist yet).

Runs in ``.cache/peers/mcp-1.6.0`` (``scripts/peers.py``). ``python era_mcp_1_6.py`` serves stdio,
``--sse-port N`` the HTTP+SSE transport at ``/sse``.
"""

import sys

from mcp.server.fastmcp import Context, FastMCP

PORT = int(sys.argv[2]) if len(sys.argv) == 3 else 8000
app = FastMCP("mcp-1.6.0-peer", host="127.0.0.1", port=PORT)


@app.tool()
def echo(text: str) -> str:
    """A plain tool: says back what it was given."""
    return f"echo {text}"


@app.tool()
async def count(ctx: Context) -> str:
    """A plain tool that reports progress and logs on the way."""
    for step in (1, 2, 3):
        await ctx.report_progress(step, 3)
    await ctx.info("counted to three")
    return "counted to three"


if __name__ == "__main__":
    app.run("sse" if sys.argv[1:2] == ["--sse-port"] else "stdio")
