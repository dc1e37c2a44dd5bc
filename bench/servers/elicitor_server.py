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
    # bench/run.py's (f) holds 100,000 calls at once on one connection, over the default 65,536.
    max_in_flight=int(os.environ.get("BENCH_MAX_IN_FLIGHT", "65536")),
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


if os.environ.get("BENCH_TRACEMALLOC"):  # bench/http_memory.py: who holds what while calls wait
    import tracemalloc

    tracemalloc.start(40)
    _baseline: list[tracemalloc.Snapshot] = []

    @server.tool()
    async def allocations(mark: bool = False) -> str:
        """``mark``: take the baseline; else the growth since it, attributed (bench/http_memory.py)."""
        snapshot = tracemalloc.take_snapshot()
        if mark or not _baseline:
            _baseline[:] = [snapshot]
            return "{}"
        import json

        grown: dict[str, list[int]] = {}
        for diff in snapshot.compare_to(_baseline[0], "traceback"):
            if diff.size_diff <= 0:
                continue
            site = _site(diff.traceback)
            entry = grown.setdefault(site, [0, 0])
            entry[0] += diff.size_diff
            entry[1] += diff.count_diff
        return json.dumps(grown)

    _SERVERS = ("/uvicorn/", "/httptools/", "/h11/", "/uvloop/", "/starlette/")

    def _site(traceback: tracemalloc.Traceback) -> str:
        """Who an allocation belongs to: the innermost frame in elicitor's code or in the ASGI server's (event
        loop and anyio frames belong to whoever called them); elicitor's with the line that asked for it."""
        for frame in reversed(traceback):
            _, found, rest = frame.filename.partition("/src/elicitor/")
            if found:
                return f"elicitor/{rest}:{frame.lineno}"
            server_frame = next((name.strip("/") for name in _SERVERS if name in frame.filename), None)
            if server_frame:
                return server_frame
        return "other: " + (traceback[-1].filename.rsplit("/", 1)[-1] if len(traceback) else "?")


@server.tool()
async def probe() -> str:
    """CPU seconds used so far and resident memory in KiB, for the harness."""
    with open("/proc/self/status") as status:
        rss = next(line.split()[1] for line in status if line.startswith("VmRSS:"))
    return f"{time.process_time()} {rss}"


if __name__ == "__main__":
    import sys

    # ELICITOR_BENCH_STACK="loop,parser" pins the stack (bench/stacks.py, bench/run.py --loop); default: the fastest
    # installed. stdio takes the event loop from it.
    loop, _, http = os.environ.get("ELICITOR_BENCH_STACK", "auto,auto").partition(",")
    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        server.run("http", port=int(sys.argv[2]), loop=loop, http=http)  # type: ignore[arg-type]
    else:
        server.run(loop=loop)  # type: ignore[arg-type]
