"""Testing your tools: a client connected to your server in the same process, one line in a test.

Example (pytest with the anyio plugin)::

    import pytest
    from elicitor import ScriptedHandler
    from elicitor.testing import connected

    from myapp import server

    @pytest.mark.anyio
    async def test_create_issue() -> None:
        handler = ScriptedHandler([{"title": "Crash on start", "labels": ["bug"]}, {"confirm": True}])
        async with connected(server, elicitation=handler) as client:
            result = await client.call_tool("create_issue", {"repo": "acme/app"})
        assert result.text == "created #1"
        assert handler.requests[0].message == "Describe the issue"

The client and the server talk through an in-memory transport (no subprocess, no port), with the whole protocol
in between, so the tool sees exactly what it would see over stdio or HTTP. ``protocol="2026-07-28"`` or
``"2025-11-25"`` pins a revision (test both: the same tool must serve both); ``Server(max_parked_runs=0)`` makes
every 2026-07-28 round replay the tool, as a retry landing on another replica does, to test ``ctx.once``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from .client import Client
from .server import Server
from .transports import memory_pair

__all__ = ["connected"]


@asynccontextmanager
async def connected(server: Server, *, principal: str | None = None, **client: Any) -> AsyncIterator[Client]:
    """A :class:`~elicitor.Client` connected to ``server`` in this process, for the duration of the block.

    Args:
        server: the server under test.
        principal: the user the connection is authenticated as (what an HTTP app's ``principal=`` would say),
            for tools and URL elicitations bound to users.
        client: arguments for :class:`~elicitor.Client`: ``elicitation=`` (a handler, e.g.
            :class:`~elicitor.ScriptedHandler`), ``protocol=``, ``sampling=``, ``roots=``...

    An exception leaving the block (from ``call_tool``, or an assertion) comes out as it is, so ``pytest.raises``
    around the block works as around the call.
    """
    server_end, client_end = memory_pair()
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(server_end, principal=principal))
        try:
            async with Client(client_end, **client) as connection:
                yield connection
        except Exception as exc:  # raised below, as it is: not wrapped in the task group's ExceptionGroup
            failure = exc
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
