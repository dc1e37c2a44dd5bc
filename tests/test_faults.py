"""Faults: what must never happen when replicas stall, die or restart, or Redis goes away.

The promise under test (docs/deploying.md, "What survives what"): a ``ctx.once`` step runs at most once per name
per call, whatever replicas stall, die or restart, as long as Redis keeps its data; an answered question is never
asked again; every call ends, with its result or a clean, specific error; through a fault that kills no replica,
the official SDK's client, which never sends a request again, gets every result, on both eras; and through Redis
away for a moment (paused, restarted with its data, cut off), every call gets its result, ours too.

This part runs two servers in this process on one real redis-server, each with its own replica id and lease, and
plays a replica's stall by taking its lease away (what a SIGSTOP longer than the lease does) while its run waits at
a gate the test holds: exactly the window in which a takeover and the stalled run could both act.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import secrets
import shutil
import signal
import socket
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2 as httpx
import mcp_types as types
import pytest
from mcp import Client as McpClient
from redis.asyncio import Redis

from elicitor import (
    Accepted,
    Client,
    Context,
    ElicitationRequest,
    ElicitorError,
    JSONRPCError,
    OutcomeUnknown,
    ScriptedHandler,
    Server,
    UrlElicitationRequest,
)
from elicitor.state._redis import RedisStore
from elicitor.testing import connected

from .conftest import request_body, serving
from .replicas import MISSING, Nginx, RedisServer, Replicas

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(bool(MISSING), reason=f"needs {' and '.join(MISSING)} (make test installs them)"),
]
STATELESS = "2026-07-28"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis.asyncio


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
            await stack.enter_async_context(connected(r.server, elicitation=handler, protocol=STATELESS))
            for r in replicas
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


async def test_a_stalled_owner_that_lost_its_task_never_charges_again(redis: RedisServer) -> None:
    """A runs the order, stalls past its lease after the question; B takes the task over and charges; A wakes and
    reaches ``ctx.once``: the epoch moved on, so A's run is cancelled there instead of charging a second time."""
    shop = Shop(redis)
    handler = ScriptedHandler([])
    async with shop.replica("a", stalls=True) as a, shop.replica("b") as b:
        a.server.tasks.runs.watch_every = 3600.0  # A does not look at its record while stalled: only fencing stops it
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
        a.server.tasks.runs.watch_every = 0.2
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


async def test_an_answer_the_owner_did_not_hear_is_no_reason_to_take_its_task(redis: RedisServer) -> None:
    """B gets the answer and tells A over the bus; nobody listens there (a lost message). A's lease is current, so
    B leaves the task to A, which reads the answer from the record itself."""
    shop = Shop(redis)
    async with shop.replica("a") as a, shop.replica("b") as b:
        a.server.tasks.runs.watch_every = 0.2
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
        a.server.tasks.runs.watch_every = 3600.0
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


def _order_for(name: str) -> Callable[[Context, str], Awaitable[str]]:
    async def order(ctx: Context, item: str) -> str:
        answer = await ctx.elicit(f"How many {item}?", Quantity)
        return f"{item} by {name}: {answer.data.count if isinstance(answer, Accepted) else '?'}"

    return order


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_a_resume_told_while_the_owner_is_cut_off_from_the_store_still_arrives(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """A runs the task and keeps its run waiting for the answer, which lands on B; B tells A while A's reading of
    its tasks queue is cut off (Redis: every connection of A killed, again and again; memory: A's reader stopped).
    A's run never re-reads its record here, so only the message can wake it: it waits in A's queue, A reads it
    when it is back, and the task completes on A (a pub/sub message would have been lost, the task stuck)."""
    from elicitor.state import MemoryStore

    from .test_replicas import kill_connections

    async with AsyncExitStack() as stack:
        if backend == "redis":
            redis_server: RedisServer = request.getfixturevalue("redis")
            prefix = f"faults-{secrets.token_hex(4)}:"
            stores: list[Any] = [RedisStore(redis_server.url, prefix=prefix, lease=1.0) for _ in "ab"]
            for store in stores:
                await stack.enter_async_context(store.running())
                stack.push_async_callback(store.aclose)
        else:
            stores = [MemoryStore(), MemoryStore()]  # one deployment's state, two replicas' ids
            stores[1].bus, stores[1].tasks = stores[0].bus, stores[0].tasks
        servers = [Server(f"shop-{name}", "1.0.0", store=store) for name, store in zip("ab", stores, strict=True)]
        for name, server in zip("ab", servers, strict=True):
            server.tool(task="required", name="order")(_order_for(name))
        a, b = servers
        a.tasks.runs.watch_every = 3600.0
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)
        listener = anyio.CancelScope()

        async def listen() -> None:
            with listener:
                await a.tasks.listen(a.http_app()._stateless, tg)

        tg.start_soon(listen)
        via_a, via_b = [
            await stack.enter_async_context(connected(server, elicitation=ScriptedHandler([]), protocol=STATELESS))
            for server in servers
        ]
        with anyio.fail_after(10):
            while not a.tasks.subscription.listening:
                await anyio.sleep(0.01)
        task_id = (await via_a.start_tool("order", {"item": "tea"})).id
        assert task_id is not None
        if backend == "redis":
            for _ in range(3):
                assert await kill_connections(redis_server.url, stores[0].replica) >= 1
                await anyio.sleep(0.05)
            await answer(via_b, task_id, 2)
            await kill_connections(redis_server.url, stores[0].replica)
        else:
            listener.cancel()
            await answer(via_b, task_id, 2)
            await anyio.sleep(0.3)
            record = await b.store.tasks.get(task_id)
            assert record is not None and record.status == "working"  # nobody took it: A's lease is current
            listener = anyio.CancelScope()
            tg.start_soon(listen)  # A reads its queue again, from where it stopped
        with anyio.fail_after(20):
            result = await (await via_a.task(task_id)).wait()
        assert result.text == "tea by a: 2"


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_a_write_tried_on_the_record_as_last_stored_is_fenced_all_the_same(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """A kept call writes an answer on the record as it last stored it, without reading it again. If a newer run
    claimed the record meanwhile, that swap is refused (the version moved) and the write is decided again on the
    stored record: fenced, it writes nothing and the run loses."""
    import dataclasses
    import time

    from elicitor.server._journal import Claim, act, change
    from elicitor.state import MemoryStore, TaskRecord

    async with AsyncExitStack() as stack:
        if backend == "redis":
            redis_server: RedisServer = request.getfixturevalue("redis")
            store: Any = RedisStore(redis_server.url, prefix=f"faults-{secrets.token_hex(4)}:")
            stack.push_async_callback(store.aclose)
        else:
            store = MemoryStore()
        registry = store.tasks
        now = time.time()
        record = TaskRecord(
            id="call-1", principal=None, connection=None, status="working", created=now, updated=now, ttl=60.0,
            poll_interval=1.0, call={"kind": "call", "name": "order"}, owner="a", epoch=0,
        )  # fmt: skip
        await registry.create(record)
        mine = await registry.get("call-1")
        assert mine is not None
        claim = Claim("call-1", mine.epoch)
        assert await change(registry, "call-1", lambda current: dataclasses.replace(current, epoch=current.epoch + 1))

        async def from_last(record_id: str, apply: Callable[[TaskRecord], TaskRecord | None]) -> TaskRecord | None:
            return await change(registry, record_id, apply, known=mine)

        late = await act(from_last, claim, lambda current: dataclasses.replace(current, message="late"))
        stored = await registry.get("call-1")
    assert late is None and claim.lost
    assert stored is not None and stored.message is None and stored.epoch == 1


# ---- three replicas behind nginx, a real redis-server, faults one at a time -----------------------------------------

FAULT_SERVER = [sys.executable, "-m", "tests.peers.fault_server"]
SOAK = os.environ.get("ELICITOR_FAULTS") == "soak"
"""``make soak`` runs every fault on every workload with more calls; ``make test`` a short selection."""
LEASE = 5.0 if SOAK else 2.5
"""The replicas' lease: the default in ``make soak``; shorter in ``make test``, so that the sessions of a replica
killed are declared gone (a lease and ``gone_after``, a lease and 2 s more, after it died) in 7 s instead of 12,
and the stalls, as long against it, take 5.5 s instead of 8."""
BOUND = 90.0
"""Seconds within which every call of a workload must end, whatever the fault (a person answers at once)."""
CLEAN_ERRORS: tuple[type[BaseException], ...] = (JSONRPCError, ElicitorError)
"""What a call may end with instead of its result: a specific error of ours, never a hang or a transport's."""


class Cluster:
    """Three replicas of tests/peers/fault_server.py behind nginx, one Redis (``appendonly`` as asked)."""

    def __init__(self, folder: Path, *, appendonly: bool) -> None:
        from elicitor.server import generate_key

        self.folder = folder
        self.ledger = folder / "ledger.txt"
        self.ledger.touch()
        self.redis = RedisServer(folder, appendonly=appendonly)
        command = [*FAULT_SERVER, "--ledger", str(self.ledger), "--work", "2.0", "--lease", str(LEASE)]
        self.replicas = Replicas(command, 3, folder, redis=self.redis.url, keys=generate_key())
        self.nginx = Nginx(self.replicas.ports, folder)
        self.paused: int | None = None

    def __enter__(self) -> Cluster:
        self.redis.start()
        self.replicas.start()
        self.nginx.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.nginx.stop()
        self.replicas.stop()
        self.redis.stop()

    def noted(self, kind: str) -> Counter[str]:
        """How many times each order was noted as ``kind`` (``work``: its answers were in; ``charge``)."""
        lines = (line.split() for line in self.ledger.read_text().splitlines())
        return Counter(fields[1] for fields in lines if len(fields) == 3 and fields[0] == kind)

    def charges(self) -> Counter[str]:
        return self.noted("charge")

    def statuses(self) -> list[int]:
        """The HTTP status of every request nginx logged so far, in order."""
        log = (self.nginx.folder / "logs" / "access.log").read_text()
        return [int(status) for status in re.findall(r'"\w+ \S+" (\d+) upstream=', log)]

    async def redis_command(self, *words: str) -> None:
        redis = Redis.from_url(self.redis.url)
        try:
            await redis.execute_command(*words)
        finally:
            await redis.aclose()

    async def all_serving(self) -> None:
        """Every replica ready (``/healthz`` 200) and answering a call through nginx: nothing to restart by hand."""
        async with httpx.AsyncClient(timeout=5) as http:
            for port in self.replicas.ports:
                with anyio.fail_after(60):
                    while True:
                        with contextlib.suppress(httpx.HTTPError):
                            if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                                break
                        await anyio.sleep(0.2)
        pids: set[str] = set()
        with anyio.fail_after(60):  # nginx skips a replica that failed for a few seconds (fail_timeout)
            async with Client.http(self.nginx.url, protocol=STATELESS) as client:
                while len(pids) < 3:
                    pids.add((await client.call_tool("replica")).text)


@dataclass
class Call:
    """One order of the workload and what became of it."""

    order: str
    era: str
    tool: str
    sdk: bool = False
    asked: list[str] = field(default_factory=list)
    result: str | None = None
    error: BaseException | None = None
    waiting: anyio.Event = field(default_factory=anyio.Event)
    """Set once a question of this call waits on its person."""
    connected: anyio.Event = field(default_factory=anyio.Event)
    """Set once its client connected (initialized, on the handshake era), before it calls."""
    go: anyio.Event | None = None
    """If given, what the connected client waits for before it calls."""

    async def ready(self) -> None:
        self.connected.set()
        if self.go is not None:
            await self.go.wait()

    def answer(self, message: str) -> dict[str, Any]:
        self.asked.append(message)
        return {"item": "tea"} if message.endswith("which item?") else {"count": 2}

    @property
    def expected(self) -> str:
        return f"{self.order} charged: tea x2"


async def run_call(url: str, call: Call, answered: Callable[[], None], person: anyio.Event | None = None) -> None:
    """One order from start to end through the balancer, each question answered (and counted) at once, or, with
    ``person``, once that is set (a person who takes their time; ``call.waiting`` is set meanwhile)."""

    async def handler(request: ElicitationRequest | UrlElicitationRequest) -> dict[str, Any]:
        if person is not None:
            call.waiting.set()
            await person.wait()
        try:
            return call.answer(request.message)
        finally:
            answered()

    try:
        with anyio.fail_after(BOUND):
            if call.sdk:

                async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
                    if person is not None:
                        call.waiting.set()
                        await person.wait()
                    try:
                        content: dict[str, str | int | float | bool | list[str] | None] = call.answer(params.message)
                    finally:
                        answered()
                    return types.ElicitResult(action="accept", content=content)

                mode = "2026-07-28" if call.era == STATELESS else "legacy"
                async with McpClient(url, elicitation_callback=callback, mode=mode) as sdk:
                    await call.ready()
                    result = await sdk.call_tool(call.tool, {"order": call.order})
                    block = result.content[0]
                    call.result = block.text if isinstance(block, types.TextContent) else repr(block)
            else:
                scripted = ScriptedHandler(otherwise=handler)
                async with Client.http(url, elicitation=scripted, protocol=call.era) as client:
                    await call.ready()
                    call.result = (await client.call_tool(call.tool, {"order": call.order})).text
    except Exception as exc:  # judged by the checker
        call.error = exc


@dataclass
class Fault:
    """One fault, injected once the workload is under way; ``heal`` puts the deployment back (by the test's hand
    only what an operator's supervisor would do: start a replica that died)."""

    name: str
    inject: Callable[[Cluster], Awaitable[None]]
    kills: bool = False
    """A replica dies: its sessions are gone (their 404s are the spec's way on), its calls may end in an error."""
    hits: bool = False
    """The fault cannot miss the workload: some order must have run again elsewhere or ended with an error."""
    loses_data: bool = False
    """Redis comes back empty: the promises that rest on its data (a step once, an answer kept) are not made."""

    async def heal(self, cluster: Cluster) -> None:
        pids = cluster.replicas.pids()
        for index, pid in enumerate(pids):
            if pid == -1:
                cluster.replicas.start(index)


async def sigkill(cluster: Cluster) -> None:
    cluster.replicas.kill(0)


async def sigterm(cluster: Cluster) -> None:
    await anyio.to_thread.run_sync(cluster.replicas.terminate, 0)


async def sigstop(cluster: Cluster) -> None:
    """A stall past the lease by 3 s (8 s with the 5 s lease): its sessions must live on."""
    pid = cluster.replicas.pids()[0]
    os.killpg(pid, signal.SIGSTOP)
    try:
        await anyio.sleep(LEASE + 3)
    finally:
        os.killpg(pid, signal.SIGCONT)


async def sigstop_long(cluster: Cluster) -> None:
    """Four leases (20 s), past the owner's lease and the look after it (12 s with the 5 s lease): others declare its
    sessions gone (what they relay from it ends with 404, so a call may be sent again elsewhere and its tasks taken
    over), while nginx holds what reached it until it wakes, an owner that must find itself fenced (hence
    ``kills``: 404s are right here; it may miss, as whatever went straight to it only waits)."""
    pid = cluster.replicas.pids()[0]
    os.killpg(pid, signal.SIGSTOP)
    try:
        await anyio.sleep(4 * LEASE)
    finally:
        os.killpg(pid, signal.SIGCONT)


async def client_pause(cluster: Cluster) -> None:
    await cluster.redis_command("CLIENT", "PAUSE", "6000", "ALL")
    await anyio.sleep(6)


async def debug_sleep(cluster: Cluster) -> None:
    await anyio.to_thread.run_sync(_debug_sleep, cluster.redis.port)


def _debug_sleep(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"DEBUG SLEEP 4\r\n")
        sock.recv(64)


async def redis_restart(cluster: Cluster) -> None:
    await anyio.to_thread.run_sync(cluster.redis.restart)


async def redis_restart_empty(cluster: Cluster) -> None:
    """A restart that loses everything (what a Redis without persistence does)."""

    def restart() -> None:
        cluster.redis.stop()
        for name in ("appendonlydir", "dump.rdb"):
            path = cluster.folder / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        cluster.redis.start()

    await anyio.to_thread.run_sync(restart)


async def cut_off(cluster: Cluster) -> None:
    """Every connection of replica 0 to Redis killed at once (found by their local ports), as a network cut does."""
    ports = _connections(cluster.replicas.pids()[0], cluster.redis.port)
    assert ports, "replica 0 holds no connection to Redis"
    redis = Redis.from_url(cluster.redis.url)
    try:
        for port in ports:
            with contextlib.suppress(Exception):  # gone already
                await redis.client_kill(f"127.0.0.1:{port}")
    finally:
        await redis.aclose()


def _connections(pid: int, remote: int) -> list[int]:
    """Local ports of the TCP connections process ``pid`` holds to 127.0.0.1:``remote`` (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = []
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, peer, inode = fields[1], fields[2], fields[9]
        if inode in inodes and int(peer.split(":")[1], 16) == remote:
            ports.append(int(local.split(":")[1], 16))
    return ports


FAULTS = {
    fault.name: fault
    for fault in (
        Fault("sigkill", sigkill, kills=True, hits=True),
        Fault("sigterm", sigterm, kills=True),
        Fault("sigstop", sigstop),
        Fault("sigstop-long", sigstop_long, kills=True),
        Fault("client-pause", client_pause),
        Fault("debug-sleep", debug_sleep),
        Fault("redis-restart", redis_restart),
        Fault("redis-restart-empty", redis_restart_empty, kills=True, loses_data=True),
        Fault("cut-off", cut_off),
    )
}


def workload(tag: str, era: str, count: int) -> list[Call]:
    """``count`` orders as calls of our client, as many as tasks, and half as many calls of the official SDK's
    client (on 2026-07-28 too, where it answers in rounds); ``tag`` keeps order names unique in the ledger."""
    calls = [Call(f"{tag}-{era[:4]}-{i}", era, "order") for i in range(count)]
    calls += [Call(f"{tag}-{era[:4]}-task-{i}", era, "order_task") for i in range(count)]
    calls += [Call(f"{tag}-{era[:4]}-sdk-{i}", era, "order", sdk=True) for i in range(max(1, count // 2))]
    return calls


async def run_workload(cluster: Cluster, calls: list[Call], fault: Fault, *, mid_question: bool = False) -> None:
    """Every call at once; the fault is injected once every order's answers have reached the server (each then
    works two seconds before its charge: the fault lands between the answers and the charge). ``mid_question``:
    once every call's first question waits on its person instead, who answers a second into the fault (while
    Redis is paused or the replica stopped; after an instant fault, as the replica restarts)."""
    orders = {call.order for call in calls}
    person = anyio.Event() if mid_question else None

    async with anyio.create_task_group() as tg:
        for call in calls:
            tg.start_soon(run_call, cluster.nginx.url, call, lambda: None, person)

        async def inject() -> None:
            with anyio.move_on_after(BOUND):
                if person is not None:
                    for call in calls:
                        await call.waiting.wait()
                    tg.start_soon(answer_soon, person)
                else:
                    while not orders <= set(cluster.noted("work")):
                        await anyio.sleep(0.05)
                await fault.inject(cluster)
                if person is not None and fault.kills:
                    await fault.heal(cluster)  # the supervisor restarts it, on the same port

        tg.start_soon(inject)
    await fault.heal(cluster)


async def run_workload_during(cluster: Cluster, calls: list[Call], fault: Fault) -> None:
    """Every client connects; then the fault, and every call is made a moment into it (its request and the
    person's answers land on whichever replica while Redis is away)."""
    go = anyio.Event()
    async with anyio.create_task_group() as tg:
        for call in calls:
            call.go = go
            tg.start_soon(run_call, cluster.nginx.url, call, lambda: None, None)
        with anyio.move_on_after(BOUND):
            for call in calls:
                await call.connected.wait()

        async def inject() -> None:
            await fault.inject(cluster)

        tg.start_soon(inject)
        await anyio.sleep(0.2)
        go.set()
    await fault.heal(cluster)


async def answer_soon(person: anyio.Event) -> None:
    await anyio.sleep(1.0)
    person.set()


def check(
    cluster: Cluster, calls: list[Call], fault: Fault, statuses_before: int, *, waiting: str | None = None
) -> None:
    """What must never happen, whatever the fault. ``waiting``: the question every call waited on when a replica
    died; its answer may have gone to the dead replica (the server never received it), so it may be asked once
    more."""
    charges = cluster.charges()
    problems: list[str] = []
    for call in calls:
        where = f"{call.order} ({call.era}, {call.tool}{', official SDK' if call.sdk else ''})"
        if charges[call.order] > 1 and not fault.loses_data:
            problems.append(f"{where}: charged {charges[call.order]} times")
        repeated = [
            question
            for question, n in Counter(call.asked).items()
            if n > 1 and not (fault.kills and waiting is not None and question.endswith(waiting) and n == 2)
        ]
        if repeated and not fault.loses_data:
            problems.append(f"{where}: asked again what was answered: {repeated}")
        if call.error is None:
            if call.result != call.expected:
                problems.append(f"{where}: wrong result {call.result!r}")
            elif charges[call.order] < 1:
                problems.append(f"{where}: succeeded but never charged")
        elif isinstance(call.error, TimeoutError):
            if not (call.sdk and fault.kills):  # the official client does not recover from a lost session
                problems.append(f"{where}: did not end within {BOUND} s")
        elif call.sdk and not fault.kills:  # it never sends a request again: a passing fault must not fail it
            problems.append(f"{where}: failed through a fault that killed nothing: {described(call.error)}")
        elif fault.name in STORE_FAULTS and not fault.kills:  # Redis away a moment: every request waits for it
            problems.append(f"{where}: failed while Redis was away for a moment: {described(call.error)}")
        elif not isinstance(call.error, CLEAN_ERRORS) and not call.sdk:  # the official client's errors are its own
            problems.append(f"{where}: ended with {described(call.error)}")
    if fault.hits:  # the fault must have hit: some order ran again elsewhere, or ended with an error
        worked = cluster.noted("work")
        if not any(call.error is not None or worked[call.order] > 1 for call in calls):
            problems.append("no call was affected by the fault: the workload did not exercise it")
    if not fault.kills:
        lost = [status for status in cluster.statuses()[statuses_before:] if status == 404]
        if lost:
            problems.append(f"{len(lost)} requests for live sessions answered 404")
    assert not problems, "\n".join(problems) + "\n" + cluster.replicas.logs()[-8000:]


def described(error: BaseException) -> str:
    """What ended a call, the errors inside a group named one by one (a group's own text says only how many)."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(described(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}"


QUICK = [("sigstop", STATELESS), ("sigkill", STATELESS), ("sigkill", "2025-11-25"), ("client-pause", STATELESS)]
"""What ``make test`` runs (a few minutes on 2 cores); ``make soak`` runs every fault on both eras."""


def scenarios() -> list[tuple[str, str]]:
    return [(fault, era) for fault in FAULTS for era in ERAS] if SOAK else QUICK


ERAS = ["2025-11-25", STATELESS]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(Path(tmp_path_factory.mktemp("faults")), appendonly=True) as running:
        yield running


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("fault", "era"), scenarios())
async def test_a_workload_through_one_fault(cluster: Cluster, fault: str, era: str) -> None:
    await cluster.all_serving()
    calls = workload(fault, era, 6 if SOAK else 3)
    before = len(cluster.statuses())
    await run_workload(cluster, calls, FAULTS[fault])
    check(cluster, calls, FAULTS[fault], before)
    await cluster.all_serving()


@pytest.mark.skipif(
    not SOAK,
    reason="make soak runs it; make test has the targeted tests (test_replicas.py: an answer during a pause, "
    "a stopped replica's session)",
)
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("fault", "era"), [(fault, era) for fault in FAULTS for era in ERAS])
async def test_a_workload_whose_people_answer_during_one_fault(cluster: Cluster, fault: str, era: str) -> None:
    """The same workload and checks, the fault landing while every call waits on its person, who answers during
    it: the answers must arrive (the official SDK's client never sends one again), nothing asked twice."""
    await cluster.all_serving()
    calls = workload(f"{fault}-mid", era, 6 if SOAK else 3)
    before = len(cluster.statuses())
    injected = dataclasses.replace(FAULTS[fault], hits=False)  # a fault may land where no call's question waits
    await run_workload(cluster, calls, injected, mid_question=True)
    check(cluster, calls, injected, before, waiting="which item?")
    await cluster.all_serving()


STORE_FAULTS = ["client-pause", "debug-sleep", "redis-restart", "redis-restart-empty", "cut-off"]
"""The faults of Redis alone (every replica keeps running)."""


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("fault", "era"),
    [(fault, era) for fault in STORE_FAULTS for era in ERAS] if SOAK else [("client-pause", "2025-11-25")],
)
async def test_a_workload_that_begins_during_one_fault(cluster: Cluster, fault: str, era: str) -> None:
    """The same workload and checks, every call made while Redis is away (its client connected just before): its
    request and its answers wait for Redis on whichever replica they land, so the official SDK's client, which never
    sends one again, still gets every answer; nothing runs twice, nothing is asked twice, nothing hangs.

    ``make test`` runs the pause on 2025-11-25, where a call's stream is relayed between replicas: a question its
    owner could not send the relaying replica while Redis was paused once left the official SDK's call waiting for
    ever (``test_replicas.py::test_a_question_asked_while_redis_is_paused_reaches_a_relayed_stream`` pins it)."""
    await cluster.all_serving()
    calls = workload(f"{fault}-during", era, 6 if SOAK else 3)
    before = len(cluster.statuses())
    injected = dataclasses.replace(FAULTS[fault], hits=False)
    await run_workload_during(cluster, calls, injected)
    check(cluster, calls, injected, before)
    await cluster.all_serving()


# ---- the client's side of a fault ----------------------------------------------------------------------------------


async def test_an_answer_refused_with_503_is_sent_again_after_retry_after() -> None:
    """The server refuses the person's answer with 503 and ``Retry-After`` (its shared state is away): the client
    sends the answer again once the server said, instead of dropping it and leaving the call waiting."""
    server = Server("refusing", "1.0.0")

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("How many?", Quantity)
        return f"{answer.data.count if isinstance(answer, Accepted) else '-'} wanted"

    inner = server.http_app()
    refused: list[bytes] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            body = await request_body(receive)
            if b'"result"' in body and not refused:  # the first answer to the server's question
                refused.append(body)
                headers = [(b"content-type", b"application/json"), (b"retry-after", b"1")]
                await send({"type": "http.response.start", "status": 503, "headers": headers})
                await send({"type": "http.response.body", "body": b'{"error": "shared state unavailable"}'})
                return None
            replayed = False

            async def receive_again() -> dict[str, Any]:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                message: dict[str, Any] = await receive()
                return message

            return await inner(scope, receive_again, send)
        return await inner(scope, receive, send)

    async with serving(app) as url:
        handler = ScriptedHandler([{"count": 4}])
        with anyio.fail_after(30):
            async with Client.http(url, elicitation=handler, protocol="2025-11-25") as client:
                assert (await client.call_tool("ask")).text == "4 wanted"
    assert len(refused) == 1 and len(handler.requests) == 1


async def test_a_call_whose_server_died_is_not_sent_again_to_a_server_that_cannot_continue_it(
    tmp_path: Path,
) -> None:
    """One server without a shared store dies mid-call and comes back on the same port: it cannot know what the
    call did, so the client does not send it again (the charge might happen twice). The call ends with
    OutcomeUnknown; the next call works on a new session."""
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    one = Replicas([*FAULT_SERVER, "--ledger", str(ledger), "--work", "2.0"], 1, tmp_path, redis=None, keys="")
    one.env.pop("ELICITOR_STATE_KEYS")
    one.start()
    try:
        url = f"http://127.0.0.1:{one.ports[0]}/mcp"
        call = Call("lone-1", "2025-11-25", "order")
        async with Client.http(
            url, elicitation=ScriptedHandler(otherwise=lambda r: call.answer(r.message)), protocol=call.era
        ) as client:
            async with anyio.create_task_group() as tg:

                async def order() -> None:
                    with pytest.raises(OutcomeUnknown) as unknown:
                        await client.call_tool("order", {"order": call.order})
                    assert unknown.value.method == "tools/call"

                tg.start_soon(order)
                with anyio.fail_after(30):
                    while "work lone-1" not in ledger.read_text():
                        await anyio.sleep(0.05)
                one.kill(0)
                one.start(0)
            call2 = Call("lone-2", "2025-11-25", "order")
            client_handler = ScriptedHandler(otherwise=lambda r: call2.answer(r.message))
            async with Client.http(url, elicitation=client_handler, protocol=call2.era) as again:
                assert (await again.call_tool("order", {"order": call2.order})).text == call2.expected
        assert call.asked == ["lone-1: which item?", "lone-1: how many?"]  # not asked again either
    finally:
        one.stop()


async def test_a_task_call_sent_again_finds_its_task_instead_of_starting_another(redis: RedisServer) -> None:
    """2025-11-25: a task-augmented tools/call sent again under its idempotency key (its session was lost) gets
    the task the first attempt created: one task, one charge, whatever the retry."""
    shop = Shop(redis)
    key = {"dev.elicitor/idempotencyKey": secrets.token_urlsafe(18)}
    params: dict[str, Any] = {"name": "order", "arguments": {"item": "oil"}, "task": {"ttl": 60_000}, "_meta": key}
    async with (
        shop.replica("a") as a,
        connected(a.server, elicitation=ScriptedHandler([]), protocol="2025-11-25") as client,
    ):
        first = await client.request("tools/call", params)
        again = await client.request("tools/call", params)
        other = await client.request("tools/call", {**params, "_meta": {}})  # another call: another key
    assert first["task"]["taskId"] == again["task"]["taskId"] != other["task"]["taskId"]


async def test_a_kept_call_whose_record_redis_lost_says_so_instead_of_pointing_to_another_attempt(
    redis: RedisServer,
) -> None:
    """2025-11-25, a call kept under its idempotency key; Redis loses its data (a restart without persistence)
    while the person answers. At ``ctx.once`` the call finds its record gone: it stops before the charge, and its
    error says the record is gone, not that the call "goes on in the new attempt" (there is none)."""
    prefix = f"faults-{secrets.token_hex(4)}:"
    store = RedisStore(redis.url, prefix=prefix, lease=1.0)
    server = Server("shop", "1.0.0", store=store)
    charged: list[str] = []
    admin = Redis.from_url(redis.url)

    @server.tool()
    async def order(ctx: Context, item: str) -> str:
        await ctx.elicit(f"How many {item}?", Quantity)

        async def charge() -> str:
            charged.append(item)
            return "charged"

        receipt: str = await ctx.once("charge", charge)
        return receipt

    async def forget_everything(request: ElicitationRequest | UrlElicitationRequest) -> dict[str, Any]:
        keys = [key async for key in admin.scan_iter(match=f"{prefix}*")]
        assert keys, "nothing of this call in Redis"
        await admin.delete(*keys)  # what a restart without persistence leaves: nothing
        return {"count": 1}

    try:
        async with store.running():
            handler = ScriptedHandler(otherwise=forget_everything)
            async with connected(server, elicitation=handler, protocol="2025-11-25") as client:
                with anyio.fail_after(30), pytest.raises(JSONRPCError) as failed:
                    await client.call_tool("order", {"item": "tea"})
    finally:
        await admin.aclose()
        await store.aclose()
    assert "record in the shared state is gone" in failed.value.message
    assert "new attempt" not in failed.value.message and charged == []


async def test_tasks_result_for_a_task_whose_record_redis_lost_answers_that_it_expired(redis: RedisServer) -> None:
    """2025-11-25: ``tasks/result`` is following a task when Redis loses its data. The answer is the task's own
    error, "has expired" (-32602), as for any task that is gone: not an internal error, and nothing for the
    server to log as a failure of its own."""
    prefix = f"faults-{secrets.token_hex(4)}:"
    store = RedisStore(redis.url, prefix=prefix, lease=1.0)
    server = Server("shop", "1.0.0", store=store, task_poll_interval=0.05)
    admin = Redis.from_url(redis.url)

    @server.tool(task="required")
    async def order(ctx: Context, item: str) -> str:
        await ctx.elicit(f"How many {item}?", Quantity)
        return "ordered"

    async def forget_everything(request: ElicitationRequest | UrlElicitationRequest) -> dict[str, Any]:
        keys = [key async for key in admin.scan_iter(match=f"{prefix}*")]
        assert keys, "nothing of this task in Redis"
        await admin.delete(*keys)  # what a restart without persistence leaves: nothing
        await anyio.sleep(30)  # the person is still reading when the task goes
        return {"count": 1}

    params: dict[str, Any] = {"name": "order", "arguments": {"item": "tea"}, "task": {"ttl": 60_000}}
    try:
        async with store.running():
            handler = ScriptedHandler(otherwise=forget_everything)
            async with connected(server, elicitation=handler, protocol="2025-11-25") as client:
                task_id = (await client.request("tools/call", params))["task"]["taskId"]
                with anyio.fail_after(30), pytest.raises(JSONRPCError) as failed:
                    await client.request("tasks/result", {"taskId": task_id})
    finally:
        await admin.aclose()
        await store.aclose()
    assert failed.value.code == -32602 and "has expired" in failed.value.message
