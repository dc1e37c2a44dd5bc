"""The state ports: one contract, asserted on every store — memory, and Redis against a real redis-server.

Each contract test gets two replicas of one deployment, ``a`` and ``b``: two :class:`RedisStore` instances on
the same Redis and prefix, or the one :class:`MemoryStore` twice (one process is one replica). Writing on ``a``
and reading on ``b`` is then what a round-robin load balancer does to a conversation. The Redis-only tests below
the contract cover what only several processes have: races between replicas, leases, TTLs, and Redis going away
and coming back.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from elicitor.state import (
    Backoff,
    MemoryStore,
    SessionRecord,
    Store,
    StoreUnavailable,
    Subscription,
    TaskRecord,
    UrlRecord,
    open_store,
    replica_channel,
    supervised,
)
from elicitor.state._lane import lane_for
from elicitor.state._redis import RedisStore

from .conftest import free_port

pytestmark = pytest.mark.anyio
_T = TypeVar("_T")

REDIS_SERVER = shutil.which("redis-server")
PER_STREAM = 256
"""The default bound of both event stores."""


class RedisServer:
    """A throwaway redis-server on a loopback port: no persistence, stoppable, restartable on the same port."""

    def __init__(self, executable: str, port: int, directory: Path) -> None:
        self.executable = executable
        self.port = port
        self.directory = directory
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [self.executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
        command += ["no", "--dir", str(self.directory)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not self._answers_ping():
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer PING within 10 s")
            time.sleep(0.02)

    def _answers_ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def signal(self, number: int) -> None:
        assert self.process is not None
        os.kill(self.process.pid, number)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    server = RedisServer(REDIS_SERVER, free_port(), tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


FLAVOURS = [
    pytest.param(("memory", "asyncio"), id="memory-asyncio"),
    pytest.param(("memory", "trio"), id="memory-trio"),
    pytest.param(("redis", "asyncio"), id="redis"),  # redis.asyncio runs on asyncio only
]
redis_only = pytest.mark.parametrize("flavour", [("redis", "asyncio")], ids=["redis"])


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> tuple[str, str]:
    chosen: tuple[str, str] = request.param
    return chosen


@pytest.fixture
def anyio_backend(flavour: tuple[str, str]) -> str:
    return flavour[1]


@pytest.fixture
def kind(flavour: tuple[str, str]) -> str:
    return flavour[0]


_prefixes = iter(range(1_000_000))


def fresh_prefix() -> str:
    """A key prefix of its own per test: tests share the server, never each other's keys."""
    return f"test{next(_prefixes)}-{os.getpid()}:"


@asynccontextmanager
async def replica(server: RedisServer, prefix: str, **options: Any) -> AsyncIterator[RedisStore]:
    """A running RedisStore: one replica of the deployment named by ``prefix``."""
    store = RedisStore(server.url, prefix=prefix, **options)
    async with store.running():
        yield store


@pytest.fixture
async def replicas(kind: str, request: pytest.FixtureRequest) -> AsyncIterator[tuple[Store, Store]]:
    """Two replicas of one deployment (for memory, the one process twice)."""
    if kind == "memory":
        store = MemoryStore()
        async with store.running():
            yield store, store
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = fresh_prefix()
    async with replica(server, prefix) as a, replica(server, prefix) as b:
        yield a, b


async def next_message(messages: AsyncIterator[_T]) -> _T:
    with anyio.fail_after(5):
        return await messages.__anext__()


# ---------------------------------------------------------------------------------------------------------------
# The contract: every store


async def test_directory_claim_lookup_release(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    assert await b.sessions.lookup("nobody") is None
    await a.sessions.claim("s1", "alice")
    record = await b.sessions.lookup("s1")
    assert record is not None
    assert (record.owner, record.principal, record.alive) == (a.replica, "alice", True)

    await a.sessions.claim("s1", None)  # a claim replaces the former record, principal included
    record = await b.sessions.lookup("s1")
    assert record is not None and record.principal is None
    await a.sessions.claim("s2", "")
    record = await b.sessions.lookup("s2")
    assert record is not None and record.principal == ""  # not None: the empty principal stays distinct

    await b.sessions.release("s1")
    assert await a.sessions.lookup("s1") is None
    assert await a.sessions.lookup("s2") is not None
    await b.sessions.release("s1")  # releasing twice is harmless


async def test_directory_dead_owner(kind: str, request: pytest.FixtureRequest) -> None:
    if kind == "memory":
        pytest.skip("one process is one replica: its sessions are alive as long as the process that looks them up")
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = fresh_prefix()
    async with replica(server, prefix) as b:
        async with replica(server, prefix, lease=0.3) as a:
            await a.sessions.claim("s", "alice")
            await anyio.sleep(1.0)  # several leases: renewal keeps it
            record = await b.sessions.lookup("s")
            assert record is not None and record.alive and record.owner == a.replica
        record = await b.sessions.lookup("s")  # a stopped: its lease is gone at once
        assert record is not None and (record.owner, record.principal, record.alive) == (a.replica, "alice", False)

        quiet = RedisStore(server.url, prefix=prefix)  # a replica that never ran: no lease at all
        try:
            await quiet.sessions.claim("t", None)
            record = await b.sessions.lookup("t")
            assert record is not None and not record.alive
        finally:
            await quiet.aclose()

        crashed = RedisStore(server.url, prefix=prefix, lease=0.3)  # renewed once, then never again (it died)
        try:
            await crashed._renew_lease()
            await crashed.sessions.claim("u", None)
            record = await b.sessions.lookup("u")
            assert record is not None and record.alive
            await anyio.sleep(0.6)
            record = await b.sessions.lookup("u")
            assert record is not None and not record.alive
        finally:
            await crashed.aclose()


async def test_forward_appends_only_while_the_session_is_as_expected(replicas: tuple[Store, Store]) -> None:
    """``forward`` puts a message in the owner's queue only while the directory says the session is that owner's,
    for that principal (``""`` is not None): anything else sends nothing and says so."""
    a, b = replicas
    await a.sessions.claim("s", "alice")
    await a.sessions.claim("anonymous", None)
    owner = SessionRecord(a.replica, "alice", alive=True)
    assert await b.forward("s", owner, b"one")
    assert not await b.forward("s", replace(owner, principal="mallory"), b"not the user's")
    assert not await b.forward("s", replace(owner, principal=None), b"not anonymous")
    assert not await b.forward("s", replace(owner, owner="someone-else"), b"not that replica's")
    assert not await b.forward("nobody", owner, b"no such session")
    assert not await b.forward("anonymous", replace(owner, principal=""), b"the empty principal is not None")
    assert await b.forward("anonymous", replace(owner, principal=None), b"two")
    await a.sessions.release("s")
    assert not await b.forward("s", owner, b"ended")
    async with a.bus.read(replica_channel(a.replica), "0") as messages:
        assert [(await next_message(messages))[1] for _ in range(2)] == [b"one", b"two"]
        with anyio.move_on_after(0.3) as waited:
            await messages.__anext__()
        assert waited.cancelled_caught  # nothing else was sent


@redis_only
async def test_writes_of_one_turn_go_to_redis_together_each_with_its_own_outcome(redis_server: RedisServer) -> None:
    """History writes and queue appends issued together (an owner keeping an event and relaying it; many sessions
    at once) reach Redis in one transaction, one round trip; a write Redis refuses fails its caller alone."""
    prefix = fresh_prefix()
    async with replica(redis_server, prefix) as a, replica(redis_server, prefix) as b:
        client = a._shared.client

        async def transactions() -> int:
            stats = await client.info("commandstats")
            return int(stats.get("cmdstat_exec", {}).get("calls", 0))

        before = await transactions()
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.events.store, "k", 1, b"kept")
            tg.start_soon(a.bus.append, "replica:r", b"relayed")
            tg.start_soon(b.events.store, "k2", 1, b"another replica's")
        assert await transactions() == before + 2  # a's two writes in one, b's on its own
        assert await b.events.replay("k", 0) == [(1, b"kept")]
        assert await a.events.replay("k2", 0) == [(1, b"another replica's")]
        assert await client.xlen(a._shared.key("queue", "replica:r")) == 1

        await client.set(a._shared.key("queue", "replica:broken"), "not a stream")
        outcomes: dict[str, BaseException | None] = {}

        async def attempt(name: str, write: Callable[[], Awaitable[None]]) -> None:
            try:
                await write()
                outcomes[name] = None
            except StoreUnavailable as exc:
                outcomes[name] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt, "refused", functools.partial(a.bus.append, "replica:broken", b"x"))
            tg.start_soon(attempt, "fine", functools.partial(a.events.store, "k", 2, b"kept too"))
        assert isinstance(outcomes["refused"], StoreUnavailable) and "WRONGTYPE" in str(outcomes["refused"])
        assert outcomes["fine"] is None
        assert await b.events.replay("k", 1) == [(2, b"kept too")]


@redis_only
async def test_forward_refuses_an_owner_whose_lease_lapsed(redis_server: RedisServer) -> None:
    """An owner that stopped (its lease dropped) or died (its lease expired) gets nothing forwarded: the sender
    looks the session up again and applies the liveness rule instead of writing to a queue nobody reads."""
    prefix = fresh_prefix()
    async with replica(redis_server, prefix) as b:
        async with replica(redis_server, prefix) as a:
            await a.sessions.claim("s", None)
            expected = SessionRecord(a.replica, None, alive=True)
            assert await b.forward("s", expected, b"while it runs")
        assert not await b.forward("s", expected, b"after it stopped")
        crashed = RedisStore(redis_server.url, prefix=prefix, lease=0.3)
        try:
            await crashed._renew_lease()
            await crashed.sessions.claim("t", None)
            expected = SessionRecord(crashed.replica, None, alive=True)
            assert await b.forward("t", expected, b"while its lease holds")
            await anyio.sleep(0.6)
            assert not await b.forward("t", expected, b"after it expired")
        finally:
            await crashed.aclose()
        queue = b._shared.key("queue", replica_channel(crashed.replica))
        assert await b._shared.client.xlen(queue) == 1
        assert await b._shared.client.pttl(queue) > 0  # the queue expires like any other


async def test_events_order_after_and_bound(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    assert await b.events.replay("k1", after=0) == []
    for sequence in range(1, 6):
        await a.events.store("k1", sequence, f"m{sequence}".encode())
    await a.events.store("k2", 1, b"\x00other\xff")
    assert await b.events.replay("k1", after=0) == [(n, f"m{n}".encode()) for n in range(1, 6)]
    assert await b.events.replay("k1", after=3) == [(4, b"m4"), (5, b"m5")]
    assert await b.events.replay("k1", after=5) == []
    assert await b.events.replay("k1", after=99) == []
    assert await b.events.replay("k1", after=10**30) == []  # Last-Event-ID comes from the client: any number
    assert await b.events.replay("k1", after=-1) == await b.events.replay("k1", after=0)
    assert await b.events.replay("k2", after=0) == [(1, b"\x00other\xff")]

    await a.events.store("k1", 5, b"m5")  # a retried store: kept once
    assert await b.events.replay("k1", after=4) == [(5, b"m5")]
    await a.events.store("k3", 2, b"second")  # concurrent messages whose writes finish out of order
    await a.events.store("k3", 1, b"first")
    assert await b.events.replay("k3", after=0) == [(1, b"first"), (2, b"second")]

    for sequence in range(6, PER_STREAM + 45):
        await a.events.store("k1", sequence, b"x")
    kept = await b.events.replay("k1", after=0)
    assert len(kept) == PER_STREAM
    assert [n for n, _ in kept] == list(range(45, PER_STREAM + 45))  # the newest, oldest first


async def test_events_discard(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    await a.events.store("k1", 1, b"one")
    await a.events.store("k2", 1, b"two")
    await b.events.discard("k1")
    assert await a.events.replay("k1", after=0) == []
    assert await a.events.replay("k2", after=0) == [(1, b"two")]
    await b.events.discard("k1")  # twice is harmless
    await a.events.store("k1", 1, b"anew")  # a discarded stream starts over
    assert await b.events.replay("k1", after=0) == [(1, b"anew")]


def url_record(elicitation_id: str, **fields: Any) -> UrlRecord:
    defaults: dict[str, Any] = {
        "message": f"sign in ({elicitation_id})",
        "url": f"https://example.com/{elicitation_id}",
    }
    return UrlRecord(id=elicitation_id, principal=fields.pop("principal", None), **(defaults | fields))


async def test_urls_add_get_find(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    assert await b.urls.get("unknown") is None
    assert await b.urls.find("c1", "q1") is None

    first = url_record("e1", principal="alice", replica=a.replica, connection="c1")
    assert await a.urls.add(first, "q1") == first
    assert await b.urls.get("e1") == first
    assert await b.urls.find("c1", "q1") == first
    assert await b.urls.find("c1", "q2") is None
    assert await b.urls.find("c2", "q1") is None

    # the same question on the same connection: the first record, not a second one
    assert await b.urls.add(url_record("e2", principal="alice", replica=b.replica, connection="c1"), "q1") == first
    assert await a.urls.get("e2") is None
    # another connection, or another question: a record of its own
    other = url_record("e3", replica=b.replica, connection="c2")
    assert await b.urls.add(other, "q1") == other
    assert await a.urls.find("c2", "q1") == other
    # a taken id: the record that has it
    assert await b.urls.add(url_record("e1", message="impostor"), None) == first

    # no connection (2026-07-28): nothing to deduplicate by, every None survives the trip
    bare = url_record("e4")
    assert await a.urls.add(bare, "q1") == bare
    assert await b.urls.get("e4") == bare
    assert (bare.principal, bare.replica, bare.connection, bare.completed) == (None, None, None, False)
    empty = url_record("e5", principal="", message="", connection="")
    assert await a.urls.add(empty) == empty
    assert await b.urls.get("e5") == empty  # "" stays "", not None


async def test_urls_complete_once(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    record = url_record("e1", principal="alice", replica=a.replica, connection="c1")
    await a.urls.add(record, "q1")
    assert await b.urls.complete("unknown", "alice") is None
    done = await b.urls.complete("e1", "alice")
    assert done is not None and done == replace(record, completed=True)
    assert await a.urls.complete("e1", "alice") is None  # once only
    got = await a.urls.get("e1")
    assert got is not None and got.completed
    found = await a.urls.find("c1", "q1")
    assert found is not None and found.completed


async def test_a_url_completion_tried_again_under_its_attempt_finds_its_own(replicas: tuple[Store, Store]) -> None:
    """A try whose answer was lost: the next try under the same attempt gets the record it completed; another
    completion (another attempt, or none) is refused as ever."""
    a, b = replicas
    await a.urls.add(url_record("e9", principal="alice", replica=a.replica, connection="c9"))
    first = await b.urls.complete("e9", "alice", "try-1")
    assert first is not None and first.completed
    again = await a.urls.complete("e9", "alice", "try-1")
    assert again == first
    assert await a.urls.complete("e9", "alice", "try-2") is None
    assert await b.urls.complete("e9", "alice") is None


async def test_urls_complete_principals(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    await a.urls.add(url_record("alice's", principal="alice"))
    assert await b.urls.complete("alice's", "mallory") is None
    assert await b.urls.complete("alice's", None) is None
    assert await b.urls.complete("alice's", "") is None
    got = await a.urls.get("alice's")
    assert got is not None and not got.completed  # refused completions changed nothing
    assert await b.urls.complete("alice's", "alice") is not None

    await a.urls.add(url_record("anyone's", principal=None))
    assert await b.urls.complete("anyone's", "mallory") is not None  # bound to nobody: anyone completes it
    await a.urls.add(url_record("no-one's", principal=None))
    assert await b.urls.complete("no-one's", None) is not None

    await a.urls.add(url_record("empty's", principal=""))  # "" is a principal, not "anyone"
    assert await b.urls.complete("empty's", None) is None
    assert await b.urls.complete("empty's", "") is not None


async def test_urls_forget_connection(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    await a.urls.add(url_record("e1", replica=a.replica, connection="c1"), "q1")
    await a.urls.add(url_record("e2", replica=a.replica, connection="c1"), "q2")
    await a.urls.add(url_record("e3", replica=a.replica, connection="c1"))  # no question: still c1's
    await a.urls.add(url_record("e4", replica=a.replica, connection="c2"), "q1")
    await a.urls.add(url_record("e5"), "q1")
    await a.urls.complete("e2", None)  # completed ones go too

    assert await b.urls.forget_connection("c1") == 3
    for gone in ("e1", "e2", "e3"):
        assert await a.urls.get(gone) is None
    assert await a.urls.find("c1", "q1") is None
    assert await a.urls.get("e4") is not None and await a.urls.find("c2", "q1") is not None
    assert await a.urls.get("e5") is not None
    assert await b.urls.forget_connection("c1") == 0
    assert await b.urls.forget_connection("never") == 0

    fresh = url_record("e6", replica=a.replica, connection="c1")
    assert await a.urls.add(fresh, "q1") == fresh  # the index went with them: the question is new again


async def test_urls_move(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    await a.urls.add(url_record("e1", principal="alice", replica=a.replica, connection="c1"), "q1")
    assert await b.urls.move("unknown", "c1", b.replica, "c2", "q1") is None
    moved = await b.urls.move("e1", "c1", b.replica, "c2", "q1")
    assert moved is not None and (moved.replica, moved.connection) == (b.replica, "c2")
    assert await a.urls.get("e1") == moved
    assert await a.urls.find("c2", "q1") == moved
    assert await a.urls.find("c1", "q1") is None
    assert await a.urls.forget_connection("c1") == 0  # the old connection closing late leaves it be
    assert await a.urls.get("e1") == moved
    assert await a.urls.move("e1", "c1", a.replica, "c3") == moved  # no longer c1's: unchanged
    done = await a.urls.complete("e1", "alice")
    assert done is not None and done.connection == "c2"  # the notice goes where it was moved
    completed = await b.urls.get("e1")
    assert await b.urls.move("e1", "c2", a.replica, "c3") == completed  # completed: unchanged
    assert await b.urls.forget_connection("c2") == 1


def task(task_id: str = "t1", **changes: Any) -> TaskRecord:
    now = time.time()
    fields: dict[str, Any] = {"id": task_id, "principal": "alice", "connection": None, "status": "working"}
    fields.update(created=now, updated=now, ttl=60.0, poll_interval=1.0)
    fields.update({"call": {"name": "deploy", "arguments": {"env": "prod"}}, **changes})
    return TaskRecord(**fields)


async def test_tasks_create_get_swap(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    assert await b.tasks.get("t1") is None
    await a.tasks.create(task(owner=a.replica))
    seen = await b.tasks.get("t1")
    assert seen is not None
    assert (seen.status, seen.principal, seen.version, seen.owner, seen.owner_alive) == (
        "working", "alice", 0, a.replica, True
    )  # fmt: skip
    assert seen.call == {"name": "deploy", "arguments": {"env": "prod"}}
    with pytest.raises(ValueError, match="exists"):
        await b.tasks.create(task())

    asks = {"pick": {"method": "elicitation/create", "params": {"message": "Which?"}}}
    waiting = await b.tasks.swap(replace(seen, status="input_required", asks=asks, owner=None))
    assert waiting is not None and waiting.version == 1
    assert await a.tasks.swap(replace(seen, status="cancelled")) is None  # version 0 is gone: nothing changes
    now = await a.tasks.get("t1")
    assert now is not None
    assert (now.status, now.asks, now.owner, now.owner_alive, now.version) == ("input_required", asks, None, False, 1)

    inbox = {"pick": {"action": "accept", "content": {"v": "b"}}}
    answered = await a.tasks.swap(replace(now, inbox=inbox))
    assert answered is not None
    done = await b.tasks.swap(replace(answered, status="completed", result={"content": []}, inbox={}, asks={}))
    assert done is not None and done.terminal
    final = await a.tasks.get("t1")
    assert final is not None and final.result == {"content": []} and final.status == "completed"


async def test_tasks_swap_raced_one_wins(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    await a.tasks.create(task("race"))
    seen = await a.tasks.get("race")
    assert seen is not None
    outcomes: list[TaskRecord | None] = []

    async def change(store: Store, status: str) -> None:
        outcomes.append(await store.tasks.swap(replace(seen, status=status)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(change, a, "cancelled")
        tg.start_soon(change, b, "completed")
    winners = [o for o in outcomes if o is not None]
    assert len(winners) == 1
    final = await b.tasks.get("race")
    assert final is not None and final.status == winners[0].status and final.version == 1


async def test_tasks_expire_with_their_ttl(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    await a.tasks.create(task("brief", ttl=0.3))
    await a.tasks.create(task("forever", ttl=None))
    assert await b.tasks.get("brief") is not None
    await anyio.sleep(0.5)
    assert await b.tasks.get("brief") is None
    seen = await b.tasks.get("forever")
    assert seen is not None and seen.ttl is None
    assert await a.tasks.swap(replace(seen, status="cancelled")) is not None


async def test_bus_publish_subscribe(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    assert await a.bus.publish("changes", b"nobody listens") == 0
    async with b.bus.subscribe("changes") as messages:
        assert await a.bus.publish("changes", b"one") == 1
        assert await a.bus.publish("elsewhere", b"lost") == 0
        assert await a.bus.publish("changes", b"\x00two\xff") == 1
        assert await next_message(messages) == b"one"
        assert await next_message(messages) == b"\x00two\xff"
    assert await a.bus.publish("changes", b"after") == 0  # unsubscribed on exit

    async with b.bus.subscribe(f"replica:{b.replica}") as mine:  # a replica's own channel
        assert await a.bus.publish(f"replica:{b.replica}", b"for b") == 1
        assert await next_message(mine) == b"for b"


async def test_queue_keeps_what_nobody_reads_yet_and_resumes_from_an_offset(replicas: tuple[Store, Store]) -> None:
    """Unlike a channel, a queue loses nothing to a reader that is away: appended before anyone reads, read in
    order with offsets; a reader that stops and reads again from its last offset gets exactly what came after."""
    a, b = replicas
    await a.bus.append("replica:r1", b"one")  # nobody reads yet
    await a.bus.append("replica:r1", b"two")
    read: list[tuple[str, bytes]] = []
    async with b.bus.read("replica:r1", "0") as messages:
        read.append(await next_message(messages))
        read.append(await next_message(messages))
    assert [payload for _, payload in read] == [b"one", b"two"]
    await a.bus.append("replica:r1", b"three")  # while nobody reads
    async with b.bus.read("replica:r1", read[-1][0]) as messages:
        got = []
        async with anyio.create_task_group() as tg:

            async def more() -> None:
                await anyio.sleep(0.1)
                await a.bus.append("replica:r1", b"four")  # while the reader waits

            tg.start_soon(more)
            got.append(await next_message(messages))
            got.append(await next_message(messages))
    assert [payload for _, payload in got] == [b"three", b"four"]
    offsets = [offset for offset, _ in read + got]
    assert len(set(offsets)) == 4
    async with b.bus.read("replica:r2", "0") as messages:  # queues are apart
        with anyio.move_on_after(0.3) as waited:
            await messages.__anext__()
        assert waited.cancelled_caught


# ---------------------------------------------------------------------------------------------------------------
# Redis only: several processes, races, TTLs, outages


@redis_only
async def test_redis_replicas_see_each_other(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    assert a.replica != b.replica and a.shared and b.shared
    await a.sessions.claim("from-a", "alice")
    await b.sessions.claim("from-b", "bob")
    seen_by_a, seen_by_b = await a.sessions.lookup("from-b"), await b.sessions.lookup("from-a")
    assert seen_by_a is not None and (seen_by_a.owner, seen_by_a.alive) == (b.replica, True)
    assert seen_by_b is not None and (seen_by_b.owner, seen_by_b.alive) == (a.replica, True)

    async with a.bus.subscribe("changes") as on_a, b.bus.subscribe("changes") as on_b:
        assert await a.bus.publish("changes", b"to all") == 2  # one subscription per replica
        assert await next_message(on_a) == b"to all"
        assert await next_message(on_b) == b"to all"


@redis_only
async def test_redis_prefixes_separate_deployments(redis_server: RedisServer) -> None:
    async with replica(redis_server, fresh_prefix()) as a, replica(redis_server, fresh_prefix()) as b:
        await a.sessions.claim("s", None)
        await a.urls.add(url_record("e1"))
        await a.events.store("k", 1, b"m")
        assert await b.sessions.lookup("s") is None
        assert await b.urls.get("e1") is None
        assert await b.events.replay("k", after=0) == []
        async with b.bus.subscribe("changes"):
            assert await a.bus.publish("changes", b"x") == 0


@redis_only
async def test_redis_complete_raced_counts_once(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    ids = [f"e{n}" for n in range(100)]
    for elicitation_id in ids:
        await a.urls.add(url_record(elicitation_id, principal="alice"))
    wins: dict[str, int] = dict.fromkeys(ids, 0)

    async def complete(store: Store, elicitation_id: str) -> None:
        if await store.urls.complete(elicitation_id, "alice") is not None:
            wins[elicitation_id] += 1

    async with anyio.create_task_group() as tg:
        for elicitation_id in ids:
            tg.start_soon(complete, a, elicitation_id)
            tg.start_soon(complete, b, elicitation_id)
    assert set(wins.values()) == {1}


@redis_only
async def test_redis_same_question_raced_gets_one_record(replicas: tuple[Store, Store]) -> None:
    a, b = replicas
    results: list[UrlRecord] = []

    async def add(store: Store, elicitation_id: str) -> None:
        results.append(await store.urls.add(url_record(elicitation_id, connection="c1"), "q"))

    async with anyio.create_task_group() as tg:
        for n in range(20):
            tg.start_soon(add, a if n % 2 else b, f"e{n}")
    assert len({record.id for record in results}) == 1
    assert await a.urls.forget_connection("c1") == 1


@redis_only
async def test_redis_keys_expire(redis_server: RedisServer) -> None:
    ttl = {"session_ttl": 0.2, "event_ttl": 0.2, "url_ttl": 0.2}
    prefix = fresh_prefix()
    gone = RedisStore(redis_server.url, prefix=prefix, session_ttl=0.2)  # claims, then dies: nobody renews
    try:
        await gone.sessions.claim("s", None)
    finally:
        await gone.aclose()
    async with replica(redis_server, prefix, **ttl) as a:
        await a.events.store("k", 1, b"m")
        await a.urls.add(url_record("e1", connection="c1"), "q")
        await anyio.sleep(0.5)
        assert await a.sessions.lookup("s") is None
        assert await a.events.replay("k", after=0) == []
        assert await a.urls.get("e1") is None
        assert await a.urls.find("c1", "q") is None
        assert await a.urls.forget_connection("c1") == 0


@redis_only
async def test_redis_burst_beyond_the_connection_limit_waits_for_a_connection(redis_server: RedisServer) -> None:
    """Hundreds of pending elicitations issue hundreds of short commands at once: beyond ``max_connections`` they
    queue for a connection instead of failing with "Too many connections"."""
    async with replica(redis_server, fresh_prefix(), max_connections=4) as a:
        async with anyio.create_task_group() as tg:
            for n in range(200):
                tg.start_soon(a.events.store, f"k{n % 7}", n + 1, b"m")
        assert sum([len(await a.events.replay(f"k{k}", after=0)) for k in range(7)]) == 200


@redis_only
async def test_redis_outage_and_recovery(redis_server: RedisServer) -> None:
    prefix = fresh_prefix()
    options = {"lease": 0.6, "timeout": 1.0, "heartbeat": 1.0}
    async with replica(redis_server, prefix, **options) as a, replica(redis_server, prefix, **options) as b:
        await a.sessions.claim("before", None)
        ended = anyio.Event()
        received: list[bytes] = []

        async def listen() -> None:
            async with b.bus.subscribe("changes") as messages:
                subscribed.set()
                received.extend([message async for message in messages])  # ends with the connection
            ended.set()

        subscribed = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(listen)
            await subscribed.wait()
            redis_server.stop()
            try:
                with anyio.fail_after(10):
                    await ended.wait()
                assert received == []
                for call in port_calls(a):
                    where = r"Redis at redis://127\.0\.0\.1:\d+/0"
                    with anyio.fail_after(10), pytest.raises(StoreUnavailable, match=where):
                        await call()
            finally:
                redis_server.start()

        # back, without recreating anything: the next calls work. Redis lost its data (nothing was persisted), but
        # the live session comes back with its owner's next heartbeat, which a lookup meanwhile waits for: it never
        # says "gone" of a session that lives (a 404 would end it)
        await a.check()
        record = await b.sessions.lookup("before")
        assert record is not None, "a live session read as gone after Redis lost its data"
        assert record.owner == a.replica
        assert await b.sessions.lookup("never") is None
        await a.sessions.claim("after", "alice")
        with anyio.fail_after(5):  # the lease comes back at the next renewal
            while not ((record := await b.sessions.lookup("after")) and record.alive):
                await anyio.sleep(0.05)
        await a.events.store("k", 1, b"m")
        assert await b.events.replay("k", after=0) == [(1, b"m")]
        await a.urls.add(url_record("e1", connection="c1"), "q")  # the scripts are loaded again
        assert await b.urls.complete("e1", None) is not None
        assert await b.urls.find("c1", "q") is not None
        async with b.bus.subscribe("changes") as messages:
            assert await a.bus.publish("changes", b"again") == 1
            assert await next_message(messages) == b"again"


def port_calls(store: Store) -> list[Callable[[], Awaitable[object]]]:
    """One call of every port method (and ``check``), for the outage tests."""

    async def subscribe() -> None:
        async with store.bus.subscribe("changes"):
            pass

    return [
        store.check,
        lambda: store.sessions.claim("s", None),
        lambda: store.sessions.lookup("s"),
        lambda: store.sessions.release("s"),
        lambda: store.events.store("k", 1, b"m"),
        lambda: store.events.replay("k", 0),
        lambda: store.events.discard("k"),
        lambda: store.urls.add(url_record("e", connection="c"), "q"),
        lambda: store.urls.get("e"),
        lambda: store.urls.find("c", "q"),
        lambda: store.urls.complete("e", None),
        lambda: store.urls.forget_connection("c"),
        lambda: store.bus.publish("changes", b"x"),
        lambda: store.bus.append("replica:r", b"x"),
        lambda: store.forward("s", SessionRecord(store.replica, None, alive=True), b"x"),
        lambda: store.tasks.swap(task("t")),
        subscribe,
    ]


@redis_only
async def test_redis_unresponsive_never_hangs(redis_server: RedisServer) -> None:
    """A Redis that holds its sockets open but answers nothing (paused): calls fail after ``timeout``, and a
    subscription ends after two silent heartbeats."""
    options = {"lease": 0.6, "timeout": 0.25, "heartbeat": 0.2}
    async with replica(redis_server, fresh_prefix(), **options) as a:
        async with a.bus.subscribe("changes") as messages:
            redis_server.signal(signal.SIGSTOP)
            try:
                with anyio.fail_after(5):
                    assert [message async for message in messages] == []
                for call in port_calls(a):
                    with anyio.fail_after(5), pytest.raises(StoreUnavailable):
                        await call()
            finally:
                redis_server.signal(signal.SIGCONT)
        await a.check()


@redis_only
async def test_redis_running_exits_while_redis_is_down(redis_server: RedisServer) -> None:
    try:
        with anyio.fail_after(5):
            async with replica(redis_server, fresh_prefix(), timeout=0.5) as a:
                await a.sessions.claim("s", None)
                redis_server.stop()  # on exit the lease cannot be dropped: it will expire by itself
    finally:
        redis_server.start()


@redis_only
async def test_redis_running_passes_exceptions_through(redis_server: RedisServer) -> None:
    with pytest.raises(LookupError, match="unchanged"):  # not wrapped in an exception group
        async with replica(redis_server, fresh_prefix()):
            raise LookupError("unchanged")


@redis_only
async def test_open_store_names_redis(redis_server: RedisServer) -> None:
    store = open_store(redis_server.url)
    assert isinstance(store, RedisStore) and store.shared
    async with store.running():
        await store.check()


@pytest.mark.parametrize("flavour", [("redis", "trio")], ids=["redis-on-trio"])
async def test_redis_refuses_trio(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url)
    with pytest.raises(RuntimeError, match="asyncio"):
        async with store.running():
            pass


def test_redis_refuses_nonsense_settings() -> None:
    with pytest.raises(ValueError, match="lease"):
        RedisStore("redis://127.0.0.1:1/0", lease=0)


@redis_only
async def test_redis_restart_between_calls(redis_server: RedisServer) -> None:
    """Connections idle in the pool across a restart are replaced on the next call, which succeeds at once."""
    async with replica(redis_server, fresh_prefix()) as a:
        await a.check()
        await a.sessions.claim("s", None)
        await a.urls.add(url_record("e1"))
        redis_server.stop()
        redis_server.start()
        await a.check()
        await a.sessions.claim("s", None)  # a MULTI/EXEC pipeline
        assert await a.urls.add(url_record("e1")) == url_record("e1")  # a script Redis no longer knows
        assert await a.sessions.lookup("s") is not None
        await a.tasks.create(task("t"))
        await a.events.store("k", 1, b"m")  # the commands of the hot path (one connection of their own)
        await a._renew_lease()  # Redis lost it with the restart
        assert await a.forward("s", SessionRecord(a.replica, None, alive=True), b"x")
        redis_server.stop()
        redis_server.start()
        await a.events.store("k", 1, b"m")
        await a.sessions.claim("s", None)
        await a._renew_lease()
        assert await a.forward("s", SessionRecord(a.replica, None, alive=True), b"x")  # a script Redis forgot
        await a.tasks.create(task("t"))
        assert await a.tasks.swap(task("t")) is not None


_WITHOUT_HIREDIS = """
import sys
sys.modules["hiredis"] = None  # redis installed without hiredis: importing it fails
import anyio
from elicitor.state import SessionRecord, replica_channel
from elicitor.state._lane import lane_for
from elicitor.state._redis import RedisStore

async def main(url: str) -> None:
    assert lane_for(url, 1.0, "test") is None
    a, b = RedisStore(url, prefix="nohiredis:"), RedisStore(url, prefix="nohiredis:")
    async with a.running(), b.running():
        await a.sessions.claim("s", None)
        assert await b.sessions.lookup("s") is not None
        assert await b.forward("s", SessionRecord(a.replica, None, alive=True), b"forwarded")
        async with a.bus.read(replica_channel(a.replica), "0") as messages:
            assert (await messages.__anext__())[1] == b"forwarded"
        await a.events.store("k", 1, b"m")
        assert await b.events.replay("k", after=0) == [(1, b"m")]
    print("served without hiredis")

anyio.run(main, sys.argv[1])
"""


def test_redis_store_works_without_hiredis(redis_server: RedisServer) -> None:
    """``redis`` installed on its own (without ``hiredis``): the store imports, and every command, the answer's path
    included, goes through redis-py instead of a lane."""
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_HIREDIS, redis_server.url], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "served without hiredis"


@redis_only
async def test_redis_lane_gives_each_command_its_own_reply_through_cancellations(redis_server: RedisServer) -> None:
    """Commands pipelined on one connection get their replies in order; a caller cancelled while its command is
    out leaves its reply to be dropped, not taken by the next caller."""
    lane = lane_for(redis_server.url, 3.0, "test")
    assert lane is not None
    seen: list[int] = []

    async def echo(n: int) -> None:
        assert await lane.execute([("ECHO", str(n)), ("ECHO", f"{n}+")]) == [str(n).encode(), f"{n}+".encode()]
        seen.append(n)

    try:
        await lane.execute([("PING",)])
        async with anyio.create_task_group() as tg:
            for n in range(100):
                tg.start_soon(echo, n)
                if n % 7 == 0:
                    with anyio.move_on_after(0):
                        await lane.execute([("ECHO", "never read")])
        assert sorted(seen) == list(range(100))
        assert await lane.execute([("ECHO", "last")]) == [b"last"]
    finally:
        lane.close()


@redis_only
async def test_redis_subscription_ends_across_a_restart(redis_server: RedisServer) -> None:
    """Even when Redis is back at once, a subscription that lost its connection ends rather than resuming silently:
    its listener must learn that messages may have been missed."""
    async with replica(redis_server, fresh_prefix(), heartbeat=0.5) as a, a.bus.subscribe("changes") as messages:
        redis_server.stop()
        redis_server.start()
        with anyio.fail_after(5):
            assert [message async for message in messages] == []


@redis_only
async def test_redis_completion_sent_twice_counts_once(replicas: tuple[Store, Store]) -> None:
    """The complete script run twice by one call (its reply lost, the command sent again on a new connection)
    returns the record both times; any other call gets nothing."""
    a, b = replicas
    assert isinstance(a, RedisStore)
    await a.urls.add(url_record("e1", principal="alice"))
    script, key = a.urls._complete, a._shared.key("url", "e1")
    first = await script(keys=[key], args=["1", "alice", "token-1"])
    again = await script(keys=[key], args=["1", "alice", "token-1"])
    assert first is not None and again is not None
    assert await script(keys=[key], args=["1", "alice", "token-2"]) is None
    assert await b.urls.complete("e1", "alice") is None


@redis_only
async def test_redis_lease_dropped_even_when_cancelled(redis_server: RedisServer) -> None:
    prefix = fresh_prefix()
    async with replica(redis_server, prefix) as b:
        with anyio.CancelScope() as scope:
            async with replica(redis_server, prefix) as a:
                await a.sessions.claim("s", None)
                scope.cancel()
                await anyio.sleep(10)
        record = await b.sessions.lookup("s")
        assert record is not None and not record.alive


@redis_only
async def test_redis_quiet_subscription_stays(redis_server: RedisServer) -> None:
    """Silence is not a lost connection: heartbeats pass, the subscription stays and still receives."""
    async with replica(redis_server, fresh_prefix(), heartbeat=0.05) as a, a.bus.subscribe("changes") as messages:
        received: list[bytes] = []

        async def listen() -> None:
            async for message in messages:
                received.append(message)

        async with anyio.create_task_group() as tg:
            tg.start_soon(listen)
            await anyio.sleep(0.5)  # ten heartbeats
            assert await a.bus.publish("changes", b"still here") == 1
            with anyio.fail_after(5):
                while not received:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        assert received == [b"still here"]


@redis_only
async def test_redis_errors_never_show_the_password() -> None:
    store = RedisStore(f"redis://user:hunter2@127.0.0.1:{free_port()}/0", timeout=1)  # nobody listens there
    try:
        with anyio.fail_after(5), pytest.raises(StoreUnavailable) as raised:
            await store.check()
        assert "redis://127.0.0.1:" in str(raised.value) and "hunter2" not in str(raised.value)
    finally:
        await store.aclose()


@redis_only
async def test_redis_task_owner_dead(redis_server: RedisServer) -> None:
    prefix = fresh_prefix()
    async with replica(redis_server, prefix) as b:
        async with replica(redis_server, prefix) as a:
            await a.tasks.create(task("job", owner=a.replica))
            seen = await b.tasks.get("job")
            assert seen is not None and seen.owner == a.replica and seen.owner_alive
        seen = await b.tasks.get("job")  # a stopped: whoever polls next knows to go on with the task
        assert seen is not None and seen.owner == a.replica and not seen.owner_alive


@redis_only
async def test_redis_a_task_record_written_before_owner_was_named_so_still_reads(redis_server: RedisServer) -> None:
    """A record stored by an older replica names its owner ``runner`` (in the hash and in the record's data): read
    as the owner, its lease checked, and the next swap stores it under ``owner``."""
    from redis.asyncio import Redis

    prefix = fresh_prefix()
    assert TaskRecord.from_dict({**task().to_dict(), "runner": "old"}).owner is None  # "owner" present: it wins
    old = {key: value for key, value in task().to_dict().items() if key != "owner"}
    assert TaskRecord.from_dict({**old, "runner": "old"}).owner == "old"
    admin = Redis.from_url(redis_server.url)
    try:
        async with replica(redis_server, prefix) as a:
            await a.tasks.create(task("job", owner=a.replica))
            key = f"{prefix}task:job"
            await admin.hdel(key, "owner")
            await admin.hset(key, "runner", a.replica)
            seen = await a.tasks.get("job")
            assert seen is not None and seen.owner == a.replica and seen.owner_alive
            assert await a.tasks.swap(replace(seen, status="input_required")) is not None
            assert await admin.hget(key, "owner") == a.replica.encode() and not await admin.hexists(key, "runner")
    finally:
        await admin.aclose()


async def test_memory_tasks_bounded_without_dropping_work() -> None:
    from elicitor.state import MemoryTaskRegistry

    tasks = MemoryTaskRegistry("r", limit=2)
    await tasks.create(task("one"))
    await tasks.create(task("two", status="completed"))
    await tasks.create(task("three"))  # the finished one makes room
    assert await tasks.get("two") is None and await tasks.get("one") is not None
    with pytest.raises(OverflowError, match="2 tasks are running"):
        await tasks.create(task("four"))


# ---------------------------------------------------------------------------------------------------------------
# Background work: one reconnect rule for every subscription, loops that never end the task group


async def test_a_subscription_listens_again_after_every_failure(anyio_backend: str) -> None:
    """Refused twice, then live, then lost, then live again: every message reaches the handler in order, a
    handler that raises costs only its message, and the state ``/healthz`` reports follows."""
    subscription = Subscription("test")
    attempts: list[str] = []
    handled: list[int] = []
    losses = 0
    batches = [[1, 2], [3, 4]]
    done = anyio.Event()

    @asynccontextmanager
    async def subscribe() -> AsyncIterator[AsyncIterator[int]]:
        attempts.append("try")
        if len(attempts) <= 2:
            raise StoreUnavailable("shared state unavailable: Redis at redis://nowhere")

        async def messages() -> AsyncIterator[int]:
            for message in batches.pop(0):
                yield message

        assert subscription.report()["listening"] is False
        yield messages()

    async def handle(message: int) -> None:
        assert subscription.listening
        if message == 2:
            raise RuntimeError("a bad message")
        handled.append(message)
        if message == 4:
            done.set()

    def lost() -> None:
        nonlocal losses
        losses += 1

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(subscription.run, subscribe, handle, lost=lost, backoff=Backoff(0.01, 0.02))
            )
            await done.wait()
            tg.cancel_scope.cancel()
    assert handled == [1, 3, 4]
    assert len(attempts) == 4 and losses == 2
    assert not subscription.listening and subscription.report()["listening"] is False


async def test_supervised_loops_start_again_and_never_raise(anyio_backend: str) -> None:
    runs = 0
    again = anyio.Event()

    async def loop() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise StoreUnavailable("gone")
        if runs == 2:
            return
        again.set()
        await anyio.sleep_forever()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(supervised, "test loop", loop, backoff=Backoff(0.01, 0.02)))
            await again.wait()
            tg.cancel_scope.cancel()
    assert runs == 3


@redis_only
async def test_redis_seals_records_at_rest_and_messages_between_replicas(redis_server: RedisServer) -> None:
    """With the server's key ring, a task's arguments and answers are not in Redis in clear, and a message from
    anyone without the keys (another deployment, or a forger who can write to Redis) is dropped, not served."""
    from elicitor.server import StateSealer, generate_key

    keys = StateSealer([generate_key()])
    prefix = fresh_prefix()
    async with replica(redis_server, prefix) as a, replica(redis_server, prefix) as b:
        a.seal_with(keys)
        b.seal_with(keys)
        await a.tasks.create(task("sealed", call={"name": "pay", "arguments": {"card": "4111 1111 1111 1111"}}))
        found = await b.tasks.get("sealed")
        assert found is not None and found.call["arguments"] == {"card": "4111 1111 1111 1111"}
        raw = await a._shared.client.hget(a._shared.key("task", "sealed"), "d")
        assert isinstance(raw, bytes) and b"4111" not in raw and b"pay" not in raw

        async with b.bus.read("replica:b", "0") as messages:
            stranger = RedisStore(redis_server.url, prefix=prefix)
            stranger.seal_with(StateSealer([generate_key()]))
            try:
                await stranger.bus.append("replica:b", b"forged")
            finally:
                await stranger.aclose()
            await a.bus.append("replica:b", b"genuine")
            assert (await next_message(messages))[1] == b"genuine"
        await b.sessions.claim("s", None)
        async with b.bus.read(replica_channel(b.replica), "0") as messages:  # forwarded: sealed for that queue
            assert await a.forward("s", SessionRecord(b.replica, None, alive=True), b"forwarded")
            assert (await next_message(messages))[1] == b"forwarded"
        entries = await a._shared.client.xrange(a._shared.key("queue", replica_channel(b.replica)))
        assert entries and all(fields and b"forwarded" not in fields[b"m"] for _, fields in entries)
        async with b.bus.subscribe("changes") as channel:
            await a.bus.publish("changes", b"changed")
            assert await next_message(channel) == b"changed"


@redis_only
async def test_redis_lane_opens_afresh_after_an_opening_nobody_waited_for_failed() -> None:
    """A connection whose opening outlived the call that started it (cancelled) and then failed is not held
    against the next call: that one opens a new connection (here the server answers from its second one on)."""
    import asyncio

    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        if len(writers) == 1:  # says nothing: the opening times out
            await reader.read()
        else:
            while data := await reader.read(65536):
                writer.write(b"+OK\r\n" * data.count(b"*"))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    lane = lane_for(f"redis://127.0.0.1:{port}", 0.3, "test")
    assert lane is not None
    try:
        with anyio.move_on_after(0.05):
            await lane.execute([("PING",)])  # cancelled while its connection opens
        await anyio.sleep(0.6)  # that opening failed meanwhile
        with anyio.fail_after(5):
            assert await lane.execute([("PING",)]) == [b"OK"]
    finally:
        lane.close()
        server.close()
        for writer in writers:
            writer.close()
            await writer.wait_closed()
        await server.wait_closed()


@redis_only
async def test_redis_lane_failing_commands_leave_no_unseen_errors(caplog: pytest.LogCaptureFixture) -> None:
    """When one command times out and its connection is closed, the commands pipelined behind it fail with it,
    each caller told once, and asyncio has no error left over to log as never retrieved."""
    import asyncio
    import gc

    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        while data := await reader.read(65536):  # answers the connection's opening, then nothing
            if b"SETNAME" in data:
                writer.write(b"+OK\r\n")

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    lane = lane_for(f"redis://127.0.0.1:{server.sockets[0].getsockname()[1]}", 0.3, "test")
    assert lane is not None
    failures: list[str] = []

    async def call(delay: float) -> None:
        await anyio.sleep(delay)
        try:
            await lane.execute([("PING",), ("PING",), ("PING",)])
        except Exception as exc:
            failures.append(type(exc).__name__)  # not the exception: its frames would keep the futures alive

    try:
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, 0.0)
                tg.start_soon(call, 0.1)  # behind the first: fails when the first times out
            gc.collect()
            await anyio.sleep(0.05)
        assert failures == ["TimeoutError", "TimeoutError"]
        assert not [record for record in caplog.records if "never retrieved" in record.getMessage()]
    finally:
        lane.close()
        server.close()
        for writer in writers:
            writer.close()
            await writer.wait_closed()
        await server.wait_closed()


@redis_only
async def test_redis_store_authenticates_selects_and_reaches_a_unix_socket() -> None:
    """The store's own connections (the answer's path) log in, select the URL's database and reach a unix socket,
    as redis-py's do: a password-protected Redis, database 2 over TCP with a user name, database 3 over a socket."""
    assert REDIS_SERVER is not None
    import tempfile

    import redis

    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        port, sock = free_port(), f"{folder}/redis.sock"
        command = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        command += ["--dir", folder, "--requirepass", "s3cret", "--unixsocket", sock]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            check = redis.Redis(port=port, password="s3cret")
            with anyio.fail_after(10):
                while True:
                    try:
                        check.ping()
                        break
                    except redis.ConnectionError:
                        await anyio.sleep(0.05)
            for url, db in (
                (f"redis://default:s3cret@127.0.0.1:{port}/2", 2),
                (f"unix://{sock}?db=3&password=s3cret", 3),
            ):
                store = RedisStore(url, prefix="p:")
                async with store.running():
                    await store.sessions.claim("s", None)
                    await store.events.store("k", 1, b"kept")
                    assert await store.forward("s", SessionRecord(store.replica, None, alive=True), b"x")
                    assert await store.sessions.lookup("s") is not None
                assert redis.Redis(port=port, password="s3cret", db=db).exists("p:events:k", "p:session:s") == 2
            refused = RedisStore(f"redis://:wrong@127.0.0.1:{port}/0")
            try:
                with pytest.raises(StoreUnavailable):
                    await refused.events.store("k", 1, b"m")
            finally:
                await refused.aclose()
        finally:
            process.kill()
            process.wait()
