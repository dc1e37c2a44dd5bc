"""The benchmark workload served by FastMCP (PyPI ``fastmcp``; ``make bench`` installs it), as its docs write it.

Handshake revisions only: FastMCP's ``ctx.elicit`` raises on a 2026-07-28 connection. FastMCP refuses an optional
field without a default (``int | None``), so ``age`` defaults to 0: the same fields, ``name`` required (only that
default differs on the wire).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from fastmcp import Context, FastMCP

mcp = FastMCP("bench-fastmcp")
MESSAGE = "Please provide your name and age"


@dataclass
class Person:
    name: str
    age: int = 0


@mcp.tool
async def ask(n: int, ctx: Context) -> int:
    accepted = 0
    for _ in range(n):
        result = await ctx.elicit(MESSAGE, response_type=Person)
        if result.action == "accept":
            accepted += 1
    return accepted


@mcp.tool
async def probe() -> str:
    """CPU seconds used so far and resident memory in KiB, for the harness."""
    with open("/proc/self/status") as status:
        rss = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
    return f"{time.process_time()} {rss}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        mcp.run("http", host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", show_banner=False)
    else:
        mcp.run(show_banner=False)
