"""The shared state of a single process: the default, with nothing to install and nothing shared.

Every port of :mod:`elicitor.state` in dictionaries, bounded in size and age so that a long-running server's memory
stays flat. One process is one replica, so the directory's owner is always this process and is always alive.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import replace

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from ._ports import (
    Bus,
    EventStore,
    Sealer,
    SessionDirectory,
    SessionRecord,
    TaskRecord,
    TaskRegistry,
    UrlRecord,
    UrlRegistry,
    replica_channel,
)


class MemorySessionDirectory(SessionDirectory):
    """Sessions of this process, by id."""

    def __init__(self, replica: str) -> None:
        self._replica = replica
        self._principals: dict[str, str | None] = {}

    async def claim(self, session_id: str, principal: str | None) -> None:
        self._principals[session_id] = principal

    async def lookup(self, session_id: str) -> SessionRecord | None:
        if session_id not in self._principals:
            return None
        return SessionRecord(self._replica, self._principals[session_id], alive=True)

    async def release(self, session_id: str) -> None:
        self._principals.pop(session_id, None)

    def on_gone(self, ended: Callable[[list[str]], None]) -> None:
        pass  # one process: nobody else declares its sessions gone


class MemoryEventStore(EventStore):
    """The last ``per_stream`` events of at most ``streams`` streams, in memory (the oldest stream goes first)."""

    def __init__(self, *, per_stream: int = 256, streams: int = 4096) -> None:
        self._per_stream = per_stream
        self._limit = streams
        self._events: dict[str, list[tuple[int, bytes]]] = {}
        """A list per stream, not a deque: most streams hold one or two events, and a deque's first block alone is
        about 0.6 KiB (a thousand calls waiting on a person hold a thousand streams)."""

    async def store(self, stream: str, sequence: int, message: bytes) -> None:
        events = self._events.get(stream)
        if events is None:
            if len(self._events) >= self._limit:
                del self._events[next(iter(self._events))]
            events = self._events[stream] = []
        events.append((sequence, message))
        if len(events) > self._per_stream:
            del events[0]

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]]:
        kept = {seq: message for seq, message in self._events.get(stream, ()) if seq > after}
        return sorted(kept.items())

    async def discard(self, stream: str) -> None:
        self._events.pop(stream, None)


class MemoryUrlRegistry(UrlRegistry):
    """URL elicitations by id, at most ``limit`` of them, each kept ``ttl`` seconds (completed ones too)."""

    def __init__(self, *, limit: int = 10_000, ttl: float = 3600.0, clock: Callable[[], float] = time.monotonic):
        self._known: OrderedDict[str, tuple[float, UrlRecord, str | None]] = OrderedDict()
        self._asked: dict[tuple[str, str], str] = {}
        self._started: dict[str, set[str]] = {}
        self._completions: dict[str, str] = {}
        """The attempt that completed each completed record (see ``UrlRegistry.complete``)."""
        self._limit = limit
        self._ttl = ttl
        self._clock = clock

    async def add(self, record: UrlRecord, question: str | None = None) -> UrlRecord:
        self._expire()
        if question is not None and record.connection is not None:
            known = self._asked.get((record.connection, question))
            if known is not None and known in self._known:
                return self._known[known][1]
        if record.id in self._known:
            return self._known[record.id][1]
        while len(self._known) >= self._limit:
            self._forget_oldest()
        self._known[record.id] = (self._clock(), record, question)
        if record.connection is not None:
            self._started.setdefault(record.connection, set()).add(record.id)
            if question is not None:
                self._asked[record.connection, question] = record.id
        return record

    async def get(self, elicitation_id: str) -> UrlRecord | None:
        self._expire()
        entry = self._known.get(elicitation_id)
        return entry[1] if entry is not None else None

    async def find(self, connection: str, question: str) -> UrlRecord | None:
        known = self._asked.get((connection, question))
        return await self.get(known) if known is not None else None

    async def complete(
        self, elicitation_id: str, principal: str | None, attempt: str | None = None
    ) -> UrlRecord | None:
        self._expire()
        entry = self._known.get(elicitation_id)
        if entry is None:
            return None
        created, record, question = entry
        if record.completed:
            made = attempt is not None and self._completions.get(elicitation_id) == attempt
            return record if made else None
        if record.principal is not None and record.principal != principal:
            return None
        record = replace(record, completed=True)
        self._known[elicitation_id] = (created, record, question)
        if attempt is not None:
            self._completions[elicitation_id] = attempt
        return record

    async def move(
        self, elicitation_id: str, was: str, replica: str, connection: str, question: str | None = None
    ) -> UrlRecord | None:
        self._expire()
        entry = self._known.get(elicitation_id)
        if entry is None:
            return None
        created, record, asked = entry
        if record.completed or record.connection != was:
            return record
        started = self._started.get(was)
        if started is not None:
            started.discard(elicitation_id)
            if not started:
                del self._started[was]
        if asked is not None and self._asked.get((was, asked)) == elicitation_id:
            del self._asked[was, asked]
        record = replace(record, replica=replica, connection=connection)
        self._known[elicitation_id] = (created, record, question)
        self._started.setdefault(connection, set()).add(elicitation_id)
        if question is not None:
            self._asked[connection, question] = elicitation_id
        return record

    async def forget_connection(self, connection: str) -> int:
        for key in [key for key in self._asked if key[0] == connection]:
            del self._asked[key]
        started = self._started.pop(connection, set())
        for elicitation_id in started:
            self._completions.pop(elicitation_id, None)
        return sum(self._known.pop(elicitation_id, None) is not None for elicitation_id in started)

    def _expire(self) -> None:
        now = self._clock()
        while self._known and now - next(iter(self._known.values()))[0] >= self._ttl:
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        _, (_, record, question) = self._known.popitem(last=False)
        self._completions.pop(record.id, None)
        if record.connection is not None:
            started = self._started.get(record.connection)
            if started is not None:
                started.discard(record.id)
                if not started:
                    del self._started[record.connection]
            if question is not None:
                self._asked.pop((record.connection, question), None)


class MemoryTaskRegistry(TaskRegistry):
    """Tasks of this process, by id: expired ones are dropped, and at most ``limit`` are kept.

    At the limit, the oldest finished task makes room; when every task is still running, creating one more raises
    :class:`OverflowError` rather than dropping somebody's work.
    """

    def __init__(self, replica: str, *, limit: int = 10_000, clock: Callable[[], float] = time.time) -> None:
        self._replica = replica
        self._limit = limit
        self._clock = clock
        self._records: dict[str, TaskRecord] = {}

    async def create(self, record: TaskRecord) -> None:
        self._expire()
        if record.id in self._records:
            raise ValueError(f"task {record.id!r} exists")
        if len(self._records) >= self._limit:
            finished = next((key for key, known in self._records.items() if known.terminal), None)
            if finished is None:
                raise OverflowError(f"{self._limit} tasks are running: finish or cancel some first")
            del self._records[finished]
        self._records[record.id] = replace(record, version=0, owner_alive=False)

    async def get(self, task_id: str) -> TaskRecord | None:
        record = self._records.get(task_id)
        if record is None:
            return None
        if record.expired(self._clock()):
            del self._records[task_id]
            return None
        return replace(record, owner_alive=record.owner == self._replica)

    async def swap(self, record: TaskRecord) -> TaskRecord | None:
        known = await self.get(record.id)
        if known is None or known.version != record.version:
            return None
        stored = replace(record, version=record.version + 1, owner_alive=False)
        self._records[record.id] = stored
        return replace(stored, owner_alive=stored.owner == self._replica)

    def _expire(self) -> None:
        now = self._clock()
        for key in [key for key, record in self._records.items() if record.expired(now)]:
            del self._records[key]


class MemoryBus(Bus):
    """Queues and channels within this process. A channel's listener gets a bounded queue and loses messages it does
    not read; a queue keeps at most ``queue_limit`` unread messages (beyond, the oldest go)."""

    def __init__(self, depth: int = 256, queue_limit: int = 100_000) -> None:
        self._depth = depth
        self._listeners: dict[str, set[MemoryObjectSendStream[bytes]]] = {}
        self._queue_limit = queue_limit
        self._queues: dict[str, deque[tuple[int, bytes]]] = {}
        self._offsets: dict[str, int] = {}
        self._readers: dict[str, anyio.Event] = {}

    async def append(self, queue: str, payload: bytes) -> None:
        items = self._queues.setdefault(queue, deque())
        offset = self._offsets[queue] = self._offsets.get(queue, 0) + 1
        items.append((offset, payload))
        if len(items) > self._queue_limit:
            items.popleft()
        woken = self._readers.pop(queue, None)
        if woken is not None:
            woken.set()

    @asynccontextmanager
    async def read(self, queue: str, after: str) -> AsyncIterator[AsyncIterator[tuple[str, bytes]]]:
        yield _QueueReader(self, queue, int(after))

    async def publish(self, channel: str, payload: bytes) -> int:
        listeners = self._listeners.get(channel, ())
        for listener in list(listeners):
            with suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                listener.send_nowait(payload)
        return 1 if listeners else 0

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[AsyncIterator[bytes]]:
        send, receive = anyio.create_memory_object_stream[bytes](self._depth)
        listeners = self._listeners.setdefault(channel, set())
        listeners.add(send)
        try:
            yield receive
        finally:
            listeners.discard(send)
            if not listeners:
                del self._listeners[channel]
            send.close()
            receive.close()


class _QueueReader:
    """What :meth:`MemoryBus.read` yields: the queue's messages after an offset, waiting for more."""

    def __init__(self, bus: MemoryBus, queue: str, last: int) -> None:
        self._bus = bus
        self._queue = queue
        self._last = last

    def __aiter__(self) -> _QueueReader:
        return self

    async def __anext__(self) -> tuple[str, bytes]:
        bus = self._bus
        while True:
            items = bus._queues.get(self._queue)
            while items and items[0][0] <= self._last:
                items.popleft()  # read past: acknowledged
            if items:
                offset, payload = items[0]
                self._last = offset
                return str(offset), payload
            await bus._readers.setdefault(self._queue, anyio.Event()).wait()


class MemoryStore:
    """Every port in this process. The default store of a server: one process is the whole deployment."""

    shared = False

    def __init__(self) -> None:
        self.replica = secrets.token_hex(8)
        self.sessions = MemorySessionDirectory(self.replica)
        self.events = MemoryEventStore()
        self.urls = MemoryUrlRegistry()
        self.bus = MemoryBus()
        self.tasks = MemoryTaskRegistry(self.replica)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Nothing to keep alive: the state lives in this process."""
        yield

    async def check(self) -> None:
        """Always ready: the state lives in this process."""
        return

    async def forward(self, session_id: str, expected: SessionRecord, payload: bytes) -> bool:
        """Append ``payload`` to the owner's queue if the directory still says ``expected`` (nothing awaits between
        the check and the append, so it is one step here too)."""
        if await self.sessions.lookup(session_id) != expected:
            return False
        await self.bus.append(replica_channel(expected.owner), payload)
        return True

    def seal_with(self, sealer: Sealer) -> None:
        """Nothing to seal: nothing leaves this process."""
