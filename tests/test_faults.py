"""Faults: what must never happen when replicas stall, die or restart, or Redis goes away.

The promise under test (docs/deploying.md, "What survives what"): a ``ctx.once`` step runs at most once per name
per call, whatever replicas stall, die or restart, as long as Redis keeps its data; an answered question is never
asked again; every call ends, with its result or a clean, specific error.

This part runs two servers in this process on one real redis-server, each with its own replica id and lease, and
plays a replica's stall by taking its lease away (what a SIGSTOP longer than the lease does) while its run waits at
a gate the test holds: exactly the window in which a takeover and the stalled run could both act.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from elicitor import Accepted, Client, Context, JSONRPCError, ScriptedHandler, Server
from elicitor.state._redis import RedisStore
from elicitor.testing import connected

from .replicas import MISSING, RedisServer

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif("redis-server" in MISSING, reason="needs redis-server (make test installs it)"),
]
MODERN = "2026-07-28"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis.asyncio


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(Path(tmp_path_factory.mktemp("redis")))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Quantity:
    count: int


@dataclass
class Replica:
    """One server of the deployment, its lease held by ``lease`` until :meth:`stall`."""

    name: str
    server: Server
    store: RedisStore
    lease: AsyncExitStack
    gate: anyio.Event = field(default_factory=anyio.Event)
    """Runs on this replica wait here after the question, before the charge (``None`` stalls nowhere)."""
    reached: anyio.Event = field(default_factory=anyio.Event)
    cancelled: anyio.Event = field(default_factory=anyio.Event)

    async def stall(self) -> None:
        """Its lease lapses, as when the process is stopped longer than the lease: others may take its tasks."""

        async def stopped() -> None:
            pass

        self.store._renew_lease = stopped  # type: ignore[method-assign]
        await self.store._drop_lease()


class Shop:
    """The workload: an order asks how many, works, then charges the card in ``ctx.once``; the ledger says who
    charged what."""

    def __init__(self, redis: RedisServer) -> None:
        self.redis = redis
        self.prefix = f"faults-{secrets.token_hex(4)}:"
        self.ledger: list[tuple[str, str]] = []
        self.replicas: dict[str, Replica] = {}
        self.stall_in_step: Replica | None = None

    @asynccontextmanager
    async def replica(self, name: str, *, stalls: bool = False) -> AsyncIterator[Replica]:
        store = RedisStore(self.redis.url, prefix=self.prefix, lease=1.0)
        server = Server(f"shop-{name}", "1.0.0", store=store, task_poll_interval=0.05)
        lease = AsyncExitStack()
        await lease.enter_async_context(store.running())
        replica = Replica(name, server, store, lease)
        if not stalls:
            replica.gate.set()
        shop = self

        @server.tool(task="required")
        async def order(ctx: Context, item: str) -> str:
            answer = await ctx.elicit(f"How many {item}?", Quantity)
            try:
                replica.reached.set()
                await replica.gate.wait()  # the work between the question and the charge, where a stall hits

                async def charge() -> str:
                    if shop.stall_in_step is replica:
                        replica.reached.set()
                        await replica.gate.wait()
                    shop.ledger.append((item, name))
                    return f"{item} charged by {name}"

                receipt: str = await ctx.once("charge", charge)
            except anyio.get_cancelled_exc_class():
                replica.cancelled.set()
                raise
            return f"{receipt}; {answer.data.count if isinstance(answer, Accepted) else '?'} ordered"

        self.replicas[name] = replica
        try:
            yield replica
        finally:
            await lease.aclose()
            await store.aclose()


@asynccontextmanager
async def clients(*replicas: Replica, handler: ScriptedHandler) -> AsyncIterator[list[Client]]:
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(connected(r.server, elicitation=handler, protocol=MODERN)) for r in replicas
        ]


async def answer(client: Client, task_id: str, count: int) -> None:
    """Answer the task's question through ``client`` as a person would (``tasks/update``), without following the
    task further (a :class:`TaskHandle` whose wait stops cancels its task)."""
    with anyio.fail_after(20):
        while True:
            task = await client.request("tasks/get", {"taskId": task_id})
            asks = task.get("inputRequests")
            if task.get("status") == "input_required" and isinstance(asks, dict):
                break
            await anyio.sleep(0.02)
    responses = {key: {"action": "accept", "content": {"count": count}} for key in asks}
    await client.request("tasks/update", {"taskId": task_id, "inputResponses": responses})


async def test_a_stalled_runner_that_lost_its_task_never_charges_again(redis: RedisServer) -> None:
    """A runs the order, stalls past its lease after the question; B takes the task over and charges; A wakes and
    reaches ``ctx.once``: the epoch moved on, so A's run is cancelled there instead of charging a second time."""
    shop = Shop(redis)
    handler = ScriptedHandler([])
    async with shop.replica("a", stalls=True) as a, shop.replica("b") as b:
        a.server.tasks._watch_every = 3600.0  # A does not look at its record while stalled: only fencing stops it
        async with clients(a, b, handler=handler) as (via_a, via_b):
            task_id = (await via_a.start_tool("order", {"item": "tea"})).id
            assert task_id is not None
            await answer(via_a, task_id, 2)
            with anyio.fail_after(20):
                await a.reached.wait()
            await a.stall()
            with anyio.fail_after(20):
                result = await (await via_b.task(task_id)).wait()
            assert result.text == "tea charged by b; 2 ordered"
            a.gate.set()  # A wakes up
            with anyio.fail_after(20):
                await a.cancelled.wait()
    assert shop.ledger == [("tea", "b")]
    assert handler.requests == []  # the question was not asked again on B


async def test_a_run_that_lost_its_lease_cancels_itself(redis: RedisServer) -> None:
    """Without a write to be refused, a run still notices on its own (it reads its record now and then) that the
    task moved to another replica, and stops."""
    shop = Shop(redis)
    async with shop.replica("a", stalls=True) as a, shop.replica("b") as b:
        a.server.tasks._watch_every = 0.2
        async with clients(a, b, handler=ScriptedHandler([])) as (via_a, via_b):
            task_id = (await via_a.start_tool("order", {"item": "jam"})).id
            assert task_id is not None
            await answer(via_a, task_id, 1)
            with anyio.fail_after(20):
                await a.reached.wait()
            await a.stall()
            with anyio.fail_after(20):
                result = await (await via_b.task(task_id)).wait()
                await a.cancelled.wait()  # while still at the gate: nobody released it
    assert result.text == "jam charged by b; 1 ordered"
    assert shop.ledger == [("jam", "b")]


async def test_an_answer_the_runner_did_not_hear_is_no_reason_to_take_its_task(redis: RedisServer) -> None:
    """B gets the answer and tells A over the bus; nobody listens there (a lost message). A's lease is current, so
    B leaves the task to A, which reads the answer from the record itself."""
    shop = Shop(redis)
    async with shop.replica("a") as a, shop.replica("b") as b:
        a.server.tasks._watch_every = 0.2
        async with clients(a, b, handler=ScriptedHandler([{"count": 3}])) as (via_a, via_b):
            task_id = (await via_a.start_tool("order", {"item": "rice"})).id
            assert task_id is not None
            with anyio.fail_after(20):
                result = await (await via_b.task(task_id)).wait()
    assert result.text == "rice charged by a; 3 ordered"
    assert shop.ledger == [("rice", "a")]


async def test_a_step_whose_run_stopped_midway_is_never_run_again(redis: RedisServer) -> None:
    """A stalls inside the charge itself. Whether it charged is unknown to B, so B does not charge: the task fails
    with an error that says so; A, woken, finishes its charge and records it. One charge, and a clear outcome."""
    shop = Shop(redis)
    async with shop.replica("a", stalls=True) as a, shop.replica("b") as b:
        shop.stall_in_step = a
        a.server.tasks._watch_every = 3600.0
        async with clients(a, b, handler=ScriptedHandler([])) as (via_a, via_b):
            task_id = (await via_a.start_tool("order", {"item": "salt"})).id
            assert task_id is not None
            await answer(via_a, task_id, 1)
            with anyio.fail_after(20):
                await a.reached.wait()
            a.reached = anyio.Event()
            a.gate.set()  # through the work, into the charge (which waits on the gate again)
            a.gate = anyio.Event()
            with anyio.fail_after(20):
                await a.reached.wait()
            await a.stall()
            with anyio.fail_after(20), pytest.raises(JSONRPCError) as failed:
                await (await via_b.task(task_id)).wait()
            assert "outcome of step 'charge' is unknown" in failed.value.message
            a.gate.set()
            with anyio.fail_after(20):
                while not shop.ledger:
                    await anyio.sleep(0.05)
            record = await b.store.tasks.get(task_id)
    assert shop.ledger == [("salt", "a")]
    assert record is not None and record.answers["m"] == {"charge": "salt charged by a"}
