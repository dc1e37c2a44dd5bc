"""A small server for the ``elicitor connect`` tests: a yes/no question, a plain call with progress, a task with
progress steps, a tool whose description is a docstring of several paragraphs, and who is calling.

``python tests/peers/cli_server.py`` serves it on stdio.
"""

from __future__ import annotations

import anyio

from elicitor import Accepted, Context, Server

server = Server("cli-desk", version="1.0.0")


@server.tool()
async def ship(ctx: Context) -> str:
    """
    Ship the order.

    Asks first.	Then ships.
    """
    outcome = await ctx.elicit("Ship the order now?", bool)
    return "shipped" if isinstance(outcome, Accepted) and outcome.data else "kept"


@server.tool()
async def count(ctx: Context) -> str:
    """Count to three, saying so."""
    for step in (1, 2, 3):
        await ctx.report_progress(step, 3, f"counted {step}")
    return "counted to three"


@server.tool(task="optional")
async def pack(ctx: Context) -> str:
    """Pack three boxes, as a task."""
    for step in (1, 2, 3):
        await ctx.report_progress(step, 3, f"box {step} packed")
        await anyio.sleep(0.3)
    return "three boxes packed"


@server.tool()
async def whoami(ctx: Context) -> str:
    """Say who is calling (the token's subject on a protected server)."""
    return f"you are {ctx.principal}"


if __name__ == "__main__":
    server.run()
