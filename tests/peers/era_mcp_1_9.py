"""A server built with the official Python SDK 1.9.4 (PyPI ``mcp``): 2025-03-26, Streamable HTTP, no elicitation
yet (it came with 2025-06-18).

Runs in ``.cache/peers/mcp-1.9.4`` (``scripts/peers.py``). ``python era_mcp_1_9.py`` serves stdio, ``--port N``
Streamable HTTP at ``/mcp``, ``--sse-port N`` the HTTP+SSE transport at ``/sse``.
"""

import sys

from mcp.server.fastmcp import Context, FastMCP

PORT = int(sys.argv[2]) if len(sys.argv) == 3 else 8000
app = FastMCP("mcp-1.9.4-peer", host="127.0.0.1", port=PORT)


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
    transports = {"--port": "streamable-http", "--sse-port": "sse"}
    app.run(transports.get(sys.argv[1], "stdio") if len(sys.argv) == 3 else "stdio")
