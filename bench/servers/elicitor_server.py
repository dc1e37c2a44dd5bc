"""The benchmark workload (performance.md) served by elicitor, with its idiomatic typed API."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from elicitor import Accepted, Context, Server


@dataclass
class Person:
    name: str
    age: int | None = None


server = Server(
    "bench-elicitor", "1.0", task_poll_interval=0.05,
    # bench/tasks.py measures both ways of waiting: runs kept in memory, and records alone (0).
    max_parked_tasks=int(os.environ.get("BENCH_MAX_PARKED_TASKS", "1024")),
)  # fmt: skip


@server.tool()
async def ask(ctx: Context, n: int) -> int:
    accepted = 0
    for _ in range(n):
        if isinstance(await ctx.elicit("Please provide your name and age", Person), Accepted):
            accepted += 1
    return accepted


@server.tool(task="required")
async def hold(ctx: Context) -> int:
    """A task that asks once and then ends (bench/tasks.py)."""
    return 1 if isinstance(await ctx.elicit("Please provide your name and age", Person), Accepted) else 0


@server.tool()
async def probe() -> str:
    """CPU seconds used so far and resident memory in KiB, for the harness."""
    with open("/proc/self/status") as status:
        rss = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
    return f"{time.process_time()} {rss}"


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        # ELICITOR_BENCH_STACK="loop,parser" pins uvicorn's stack (bench/stacks.py); default: the fastest installed
        loop, _, http = os.environ.get("ELICITOR_BENCH_STACK", "auto,auto").partition(",")
        server.run("http", port=int(sys.argv[2]), loop=loop, http=http)  # type: ignore[arg-type]
    else:
        server.run()
