"""The server the fault suite (tests/test_faults.py) runs three times behind nginx: orders that ask twice, work a
while, then charge through ``ctx.once``, writing each charge to a ledger the test reads afterwards.

``python -m tests.peers.fault_server --ledger FILE [--work SECONDS] --port N``: every replica appends to the
ledger, one line when an order's answers are in (``work <order> <pid>``) and one per charge (``charge <order>
<pid>``); the work between the two lasts ``--work`` seconds (default 1). ``--lease`` sets the replica's lease in
Redis (default: the store's 5 s).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

import anyio

from elicitor import Accepted, Context, Server

server = Server("faults", version="1.0.0", task_poll_interval=0.1)
LEDGER = os.devnull
WORK = 1.0


@dataclass
class Item:
    item: str


@dataclass
class Quantity:
    count: int


def note(kind: str, order: str) -> None:
    with open(LEDGER, "a") as ledger:  # O_APPEND: each line lands whole, whichever replica writes it
        ledger.write(f"{kind} {order} {os.getpid()}\n")


async def take_order(ctx: Context, order: str) -> str:
    item = await ctx.elicit(f"{order}: which item?", Item)
    count = await ctx.elicit(f"{order}: how many?", Quantity)
    if not isinstance(item, Accepted) or not isinstance(count, Accepted):
        return f"{order}: nothing ordered"
    note("work", order)  # both answers are in: the test injects its fault once every order got here
    await anyio.sleep(WORK)  # the work between the answers and the charge: where the faults land

    def charge() -> str:
        note("charge", order)
        return f"{order} charged"

    receipt: str = await ctx.once("charge", charge)
    return f"{receipt}: {item.data.item} x{count.data.count}"


@server.tool()
async def order(ctx: Context, order: str) -> str:
    """An order as a call: two questions, work, one charge."""
    return await take_order(ctx, order)


@server.tool(task="required")
async def order_task(ctx: Context, order: str) -> str:
    """The same order as a task."""
    return await take_order(ctx, order)


@server.tool()
async def replica() -> str:
    """Which process serves this request (its pid)."""
    return str(os.getpid())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--work", type=float, default=1.0)
    parser.add_argument("--lease", type=float)
    options = parser.parse_args()
    global LEDGER, WORK
    LEDGER, WORK = options.ledger, options.work
    if options.lease is not None:  # the store run() would open from ELICITOR_REDIS_URL, with a shorter lease
        from elicitor.state import RedisStore

        server.share(RedisStore(os.environ["ELICITOR_REDIS_URL"], lease=options.lease))
    server.run("http", port=options.port, shutdown_grace=2)


if __name__ == "__main__":
    main()
