"""What a pending HTTP elicitation holds in the server, by who asked for it: tracemalloc, not RSS.

    python bench/http_memory.py [--pending 1000] [--top 30]

Runs bench/servers/elicitor_server.py over Streamable HTTP (uvicorn) with tracemalloc on, holds ``--pending``
calls on one session each waiting on its elicitation (2025-11-25, as scenario (dh)), and prints the memory that
grew meanwhile, per waiting call, by allocation site: the innermost frame in elicitor's own code (it asked for
the memory, whichever library made it), else the library whose code did (uvicorn's connection and parser,
httptools, the event loop's transport). What is elicitor's is what elicitor can take back.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from holding import Holding
from run import http_server

from elicitor import Client


async def main(pending: int, top: int) -> None:
    os.environ["BENCH_TRACEMALLOC"] = "1"
    held = Holding(pending)
    async with (
        http_server("elicitor_server.py") as url,
        Client.http(url, elicitation=held.handler, protocol="2025-11-25") as client,
    ):
        await client.call_tool("ask", {"n": 10})
        await client.call_tool("allocations", {"mark": True})
        held.armed = True
        async with anyio.create_task_group() as tg:
            for _ in range(pending):
                tg.start_soon(client.call_tool, "ask", {"n": 1})
            await held.all_in.wait()
            await anyio.sleep(0.5)  # every response is open and waiting
            grown: dict[str, list[int]] = json.loads((await client.call_tool("allocations")).text)
            held.release.set()
    os.environ.pop("BENCH_TRACEMALLOC")
    ours = {site: v for site, v in grown.items() if site.startswith("elicitor/")}
    total = sum(v[0] for v in grown.values()) / pending / 1024
    mine = sum(v[0] for v in ours.values()) / pending / 1024
    print(
        f"{pending} calls waiting over HTTP: {total:.2f} KiB per call traced, "
        f"{mine:.2f} KiB of it asked for by elicitor"
    )
    print(f"\n{'KiB per call':>12} {'blocks':>7}  site")
    for site, (size, count) in sorted(grown.items(), key=lambda item: -item[1][0])[:top]:
        print(f"{size / pending / 1024:>12.2f} {count / pending:>7.1f}  {site}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    anyio.run(main, args.pending, args.top)
