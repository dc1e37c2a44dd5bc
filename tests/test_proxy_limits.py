"""The proxy's time limit means time *without progress*: ``elicitation_timeout`` (ten minutes here) ends a call
held for a 2026-07-28 client only when nothing has shown it alive for that long.

Run on trio's mock clock, which jumps ahead whenever every task waits: the twelve minutes are virtual, so the test
takes well under a second and no assertion depends on how loaded the machine is.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import trio.testing

from elicitor import Client, Context, JSONRPCError, Server
from elicitor.proxy import Bridge
from elicitor.transports import memory_pair

from .test_proxy import in_memory

MINUTE = 60.0


@pytest.fixture
def anyio_backend() -> Any:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


async def test_progress_keeps_a_held_call_alive_and_silence_ends_it(anyio_backend: Any) -> None:
    server = Server("slow", "1")
    seen: dict[str, int] = {"silent cancelled": 0}

    @server.tool()
    async def twelve_minutes(ctx: Context) -> str:
        for minute in range(1, 13):
            await anyio.sleep(MINUTE)
            await ctx.report_progress(minute, 12)
        return "done after 12 minutes"

    @server.tool()
    async def silent(ctx: Context) -> str:
        try:
            await anyio.sleep(11 * MINUTE)
        except anyio.get_cancelled_exc_class():
            seen["silent cancelled"] += 1
            raise
        return "never"

    client_end, down_end = memory_pair()
    async with anyio.create_task_group() as tg:
        bridge = Bridge(in_memory(server, tg), upstream_protocol="2025-11-25", elicitation_timeout=10 * MINUTE)
        tg.start_soon(bridge.serve, down_end)
        # The client asks for no progress: the proxy watches the call's progress on its own.
        async with Client(client_end, protocol="2026-07-28", request_timeout=None) as client:
            started = anyio.current_time()
            assert (await client.call_tool("twelve_minutes")).text == "done after 12 minutes"
            assert anyio.current_time() - started >= 12 * MINUTE
            started = anyio.current_time()
            with pytest.raises(JSONRPCError) as caught:
                await client.call_tool("silent")
            assert "without progress" in caught.value.message
            assert 10 * MINUTE <= anyio.current_time() - started < 11 * MINUTE  # virtual time: exact, not load
            assert (await client.call_tool("twelve_minutes")).text == "done after 12 minutes"  # still serving
        tg.cancel_scope.cancel()
    assert seen["silent cancelled"] == 1  # cancelled upstream, not left running
