"""The client's connection pools (client/_pool.py): many waiting streams at once, against a real uvicorn server."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2 as httpx
import pytest

from elicitor import Accepted, Client, Context, Outcome, Server
from elicitor.client._pool import ShardedTransport

from .conftest import serving

ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio


class Held:
    """An ASGI app whose every response streams until ``release`` is set; it counts the connections it saw."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.waiting = 0
        self.peers: set[Any] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        self.peers.add(tuple(scope["client"]))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"start ", "more_body": True})
        self.waiting += 1
        await self.release.wait()
        await send({"type": "http.response.body", "body": b"done"})


async def hold(http: httpx.AsyncClient, url: str, bodies: list[bytes]) -> None:
    async with http.stream("GET", url) as response:
        bodies.append(b"".join([chunk async for chunk in response.aiter_bytes()]))


@ASYNCIO
@pytest.mark.parametrize(("max_connections", "shards"), [(None, 3), (40, 2)])
async def test_streams_spread_over_small_pools_within_the_limit(
    anyio_backend: str, max_connections: int | None, shards: int
) -> None:
    app = Held()
    transport = ShardedTransport(httpx.Limits(max_connections=max_connections))
    bodies: list[bytes] = []
    async with serving(app) as url, httpx.AsyncClient(transport=transport, timeout=30) as http:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(70):
                    tg.start_soon(hold, http, url, bodies)
                expected = 70 if max_connections is None else max_connections
                while app.waiting < expected:
                    await anyio.sleep(0.01)
                await anyio.sleep(0.1)  # any request beyond the limit would have reached the app by now
                assert app.waiting == expected  # the rest wait for a connection
                app.release.set()
    assert bodies == [b"start done"] * 70
    assert transport.shards == shards and len(app.peers) <= (max_connections or 70)
    assert transport._busy == [0] * shards  # every slot given back when its response closed


@ASYNCIO
async def test_a_thousand_waiting_calls_are_answered(anyio_backend: str) -> None:
    """1,000 calls wait on a person at once over one session (each holds its response stream), then all are
    answered: the default limits leave room for them, and the pools keep each answer cheap."""
    server = Server("many")
    pending = 0
    full, release = anyio.Event(), anyio.Event()

    @server.tool()
    async def ask(ctx: Context) -> str:
        return (await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})).action

    async def answer(request: Any) -> Outcome[Any]:
        nonlocal pending
        pending += 1
        if pending == 1000:
            full.set()
        await release.wait()
        return Accepted({"name": "x"})

    results: list[str] = []
    async with serving(server.http_app()) as url:
        client = Client.http(url, elicitation=answer, protocol="2025-11-25")
        async with client:

            async def call() -> None:
                results.append((await client.call_tool("ask")).text)

            with anyio.fail_after(100):
                async with anyio.create_task_group() as tg:
                    for _ in range(1000):
                        tg.start_soon(call)
                    await full.wait()
                    release.set()
    assert results == ["accept"] * 1000


@ASYNCIO
async def test_a_client_of_your_own_carries_everything_with_your_headers(anyio_backend: str) -> None:
    server = Server("own")

    @server.tool()
    async def ask(ctx: Context) -> str:
        return (await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})).action

    async def answer(request: Any) -> Outcome[Any]:
        return Accepted({"name": "x"})

    seen: list[tuple[str, str | None]] = []

    async def record(request: httpx.Request) -> None:
        seen.append((request.method, request.headers.get("x-team")))

    async with serving(server.http_app()) as url, httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        client = Client.http(url, http=http, headers={"X-Team": "blue"}, elicitation=answer, protocol="2025-11-25")
        async with client:
            assert (await client.call_tool("ask")).text == "accept"
        assert not http.is_closed  # the caller's client stays theirs
    assert {method for method, _ in seen} >= {"POST", "DELETE"}
    assert all(team == "blue" for _, team in seen)


def test_limits_belong_on_a_client_of_your_own() -> None:
    with pytest.raises(ValueError, match="set limits on the http= client"):
        Client.http("http://127.0.0.1:1/mcp", http=httpx.AsyncClient(), limits=httpx.Limits(max_connections=5))


def test_every_pool_shares_one_tls_context() -> None:
    """Making a verifying TLS context costs ~20 ms of CPU (the CA bundle): one per process, not one per client."""
    from elicitor.client._pool import ShardedTransport, default_tls

    first, second = ShardedTransport(), ShardedTransport()
    assert first._options["verify"] is second._options["verify"] is default_tls()
    assert ShardedTransport(verify=False)._options["verify"] is False  # a caller's choice still wins
