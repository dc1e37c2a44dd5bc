"""A stdio server keeping its tasks in Redis, for the outage tests: ``python -m tests.peers.outage_stdio URL PREFIX``.

Its store gives up on a command after a second (``timeout``), so a paused Redis is noticed quickly; ``STORE_HOLD``
comes from ``OUTAGE_STORE_HOLD`` when set, so a test can say how long its requests wait for the store.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from elicitor import Accepted, Context, Server
from elicitor.server import StateSealer, generate_key
from elicitor.state import RedisStore


@dataclass
class Picked:
    name: str


server = Server("outage-stdio", version="1.0.0", state=StateSealer([generate_key()]))


@server.tool(task="required")
async def chore(ctx: Context) -> str:
    """A task that waits on its person."""
    outcome = await ctx.elicit("Pick a name", Picked)
    return outcome.data.name if isinstance(outcome, Accepted) else "-"


if __name__ == "__main__":
    if os.environ.get("OUTAGE_STORE_HOLD"):
        from elicitor.server import _hold

        _hold.STORE_HOLD = float(os.environ["OUTAGE_STORE_HOLD"])
    server.share(RedisStore(sys.argv[1], prefix=sys.argv[2], lease=1.0, timeout=1.0))
    server.run("stdio")
