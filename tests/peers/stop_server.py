"""A server for the stopping tests: a call that works a while, and one that waits on a person.

``python -m tests.peers.stop_server PORT GRACE`` serves it with ``Server.run("http", shutdown_grace=GRACE)`` and
prints ``run returned`` once ``run`` does; ``elicitor serve tests.peers.stop_server:server`` serves it too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import anyio

from elicitor import Accepted, Context, Server

server = Server("stopping", version="1.0.0")


@dataclass
class Name:
    name: str


@server.tool()
async def work(ctx: Context, seconds: float) -> str:
    """Says it started (a progress notice), works ``seconds``, then says it is done."""
    await ctx.report_progress(0, 1, "working")
    await anyio.sleep(seconds)
    return f"worked {seconds:g} s"


@server.tool()
async def ask(ctx: Context) -> str:
    """Waits on a person."""
    outcome = await ctx.elicit("Your name?", Name)
    return outcome.data.name if isinstance(outcome, Accepted) else "-"


if __name__ == "__main__":
    server.run("http", port=int(sys.argv[1]), shutdown_grace=int(sys.argv[2]))
    print("run returned", flush=True)
