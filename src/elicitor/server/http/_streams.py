"""The logical SSE streams of a handshake-era session, and which connection delivers each.

Spec: https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#resumability-and-redelivery —
every message the server sends about a request is numbered and kept, so a client whose connection dropped resumes
the stream with ``Last-Event-ID`` and gets what it missed, on this replica or any other.

One connection at a time delivers a stream; it holds a :class:`Claim`. A resume supersedes the connection holding
the stream: a client that resumes has given up on its old connection, and the server may not know yet that it is
dead (a half-open TCP connection lasts minutes, a proxy may keep it open), so refusing the resume until then would
strand the client. A request for the same stream without ``Last-Event-ID`` (a second standalone GET) is refused
with 409 instead: the client has one connection open on purpose.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from ..._loop import running_asyncio_loop
from ...session import Waiter
from ...state import EventStore, StoreUnavailable
from ._asgi import Stoppable

logger = logging.getLogger("elicitor.http")

MAX_QUEUED = 256
"""Messages a stream keeps for a reader that does not read (the event store keeps as many for a resume)."""

SUPERSEDE_WAIT = 5.0
"""Seconds a resume waits for the connection it supersedes to stop delivering (it stops at its next step)."""


class Claim:
    """One connection's hold on delivering a :class:`Stream`; see the module's docstring for who wins."""

    __slots__ = ("_released", "_scope", "previous", "released", "superseded")

    def __init__(self, previous: Claim | None) -> None:
        self.previous = previous
        """The claim this one superseded, until :meth:`settle` saw it released."""
        self.superseded = False
        self.released = False
        self._scope: Stoppable | None = None
        self._released: anyio.Event | None = None  # made only when a newer claim waits for this one

    def bind(self, scope: Stoppable) -> None:
        """Deliver within ``scope``: superseding the claim cancels it (at once if that already happened)."""
        self._scope = scope
        if self.superseded:
            scope.cancel()

    def supersede(self) -> None:
        self.superseded = True
        if self._scope is not None:
            self._scope.cancel()

    async def settle(self) -> None:
        """Wait until the connection this claim superseded stopped delivering, so that events reach one only.

        Bounded by :data:`SUPERSEDE_WAIT`: the old delivery stops at its next step, cancelled; a send blocked on a
        dead connection is the only thing that could hold it longer, and what it took is given back either way.
        """
        previous, self.previous = self.previous, None
        if previous is None or previous.released:
            return
        if previous._released is None:
            previous._released = anyio.Event()
        with anyio.move_on_after(SUPERSEDE_WAIT):
            await previous._released.wait()

    def _release(self) -> None:
        self.released = True
        self.previous = None
        if self._released is not None:
            self._released.set()


class Stream:
    """One logical SSE stream of a handshake session: what the server sends about one request (or none).

    Messages are numbered and kept in the event store, so a client whose connection dropped can resume it; the
    connection currently delivering the stream reads them from a queue and skips what it already delivered.

    A message the event store cannot keep when it is sent (Redis away) is kept here until the store takes it: it
    is stored again with the stream's next message and before a resume's replay, and a replay meanwhile serves it
    from here. Once delivered, a message is in the client's hands or nowhere (a relay whose client left, the last
    bytes of a connection that dropped): a resume from before it must still find it, or the question it asks
    is never answered and the call waits for ever.
    """

    __slots__ = ("_events", "_final_kept", "_on_kept", "_unkept", "_unsent", "done", "holder", "key", "out", "sequence")

    def __init__(self, key: str, events: EventStore, on_kept: Callable[[str], None] | None = None) -> None:
        self.key = key
        self.sequence = 0
        self.done = False
        self._events = events
        self._on_kept = on_kept
        self.out = _Queue()
        self.holder: Claim | None = None
        """The connection delivering this stream now, if any."""
        self._unsent: list[tuple[int, bytes, bool]] | None = None
        self._unkept: dict[int, bytes] | None = None
        """Messages the event store could not keep yet, by sequence (see the class's docstring)."""
        self._final_kept = False

    async def put(self, message: bytes, final: bool) -> None:
        """Number ``message``, queue it for delivery, then keep it for resumption.

        Numbering and queueing happen before the first await, so messages sent concurrently (two questions asked
        at once) keep their order live even while a networked store's writes complete out of order; the store
        orders what it keeps by sequence.
        """
        self.sequence += 1
        sequence = self.sequence
        self.out.put((sequence, message, final))
        if final:
            self.done = True
        if await self._keep(sequence, message, final) and self._unkept:
            await self._keep_again()
        self._forget_if_kept()

    async def _keep(self, sequence: int, message: bytes, final: bool) -> bool:
        """Store one message; one the store cannot take is held in ``_unkept`` (at most ``MAX_QUEUED``, as many as
        the event store keeps of a stream) and ``False`` returned."""
        try:
            await self._events.store(self.key, sequence, message)
        except StoreUnavailable as exc:  # delivered live all the same; held here for a resume meanwhile
            if self._unkept is None:
                self._unkept = {}
            if sequence not in self._unkept:
                logger.warning(
                    "event %s.%d not kept for resumption yet (held until it is): %s", self.key, sequence, exc
                )
            self._unkept[sequence] = message
            if len(self._unkept) > MAX_QUEUED:
                del self._unkept[min(self._unkept)]
            return False
        if self._unkept:
            self._unkept.pop(sequence, None)
        if final:
            self._final_kept = True
        return True

    async def _keep_again(self) -> None:
        """Store what the store could not keep before, oldest first, until it fails again."""
        for sequence, message in sorted((self._unkept or {}).items()):
            if not await self._keep(sequence, message, self.done and sequence == self.sequence):
                return

    def _forget_if_kept(self) -> None:
        if self._final_kept and not self._unkept and self._on_kept is not None:
            on_kept, self._on_kept = self._on_kept, None
            on_kept(self.key)  # the whole stream is in the event store: a resume is served from there

    async def replay(self, after: int) -> list[tuple[int, bytes]]:
        """The messages after sequence ``after``, oldest first, for a resume: the event store's, and those it could
        not keep yet (stored again first: the store may be back).

        Raises:
            StoreUnavailable: the event store cannot be read.
        """
        if self._unkept:
            await self._keep_again()
            self._forget_if_kept()
        history = await self._events.replay(self.key, after)
        if not self._unkept:
            return history
        merged = dict(history)
        merged.update((sequence, message) for sequence, message in self._unkept.items() if sequence > after)
        return sorted(merged.items())

    @classmethod
    def finished(cls, key: str, events: EventStore) -> Stream:
        """A stream whose final event was sent and kept, as a resume sees it: its events are in the store."""
        stream = cls(key, events)
        stream.done = True
        stream.out.close()
        return stream

    def take(self) -> Awaitable[tuple[int, bytes, bool]]:
        """The next event to deliver: one a pump could not deliver first, else the next one sent.

        Not a coroutine of its own: a pump waits here for as long as a person takes, and a frame more per waiting
        call is 0.2 KiB more.
        """
        if self._unsent:
            return _ready(self._unsent.pop())
        return self.out.receive()

    def poll(self, nudge: Callable[[], None]) -> tuple[int, bytes, bool] | None:
        """The next event to deliver if there is one, else ``None`` and ``nudge`` is called at the next one (once).

        For a pump that waits on something else meanwhile (the client's leaving, in the response's own task).

        Raises:
            anyio.ClosedResourceError: the stream is closed and nothing is left to deliver.
        """
        if self._unsent:
            return self._unsent.pop()
        return self.out.poll(nudge)

    def unpoll(self, nudge: Callable[[], None]) -> None:
        """``nudge`` is not to be called any more (its pump ended)."""
        self.out.unpoll(nudge)

    def give_back(self, item: tuple[int, bytes, bool]) -> None:
        """A pump took ``item`` but may not have delivered it: the next pump starts with it.

        The event store keeps it too, but a store restarted without persistence would not; a resuming client
        skips what it had already received (its ``Last-Event-ID``).
        """
        if self._unsent is None:
            self._unsent = []
        self._unsent.append(item)

    @property
    def attached(self) -> bool:
        """Whether a connection delivers this stream now."""
        return self.holder is not None

    def claim(self, *, supersede: bool) -> Claim | None:
        """Hold the stream for one connection; None when it is held and ``supersede`` is false (a 409).

        Takes effect before any await, so of two requests at once exactly one holds it. With ``supersede`` (a
        resume), the holder is told to stop; :meth:`Claim.settle` waits until it did.
        """
        held = self.holder
        if held is not None:
            if not supersede:
                return None
            held.supersede()
        claim = self.holder = Claim(held)
        return claim

    def release(self, claim: Claim) -> None:
        """``claim``'s connection stopped delivering; the stream is free unless a newer claim holds it already."""
        if self.holder is claim:
            self.holder = None
        claim._release()

    def event_id(self, sequence: int) -> str:
        return f"{self.key}.{sequence}"

    @property
    def dropped(self) -> int:
        """The highest sequence the live queue dropped unread (its reader was too slow); 0 if none."""
        return self.out.dropped

    def close(self) -> None:
        self.out.close()


async def _ready(item: tuple[int, bytes, bool]) -> tuple[int, bytes, bool]:
    return item


class _Queue:
    """What a :class:`Stream` holds for its pump: a FIFO with at most one waiting reader, bounded.

    The policy for a reader that falls behind: past ``MAX_QUEUED`` undelivered messages the oldest is dropped (it
    is kept in the event store) and ``dropped`` says so; the pump then ends the response, and the client resumes
    with ``Last-Event-ID``, served from the event store. Memory stays bounded, and nothing is skipped unseen.

    The same contract as an anyio memory object stream for this use (``receive`` waits, ``close`` drops what is
    undelivered and wakes the reader with ``ClosedResourceError``), at a tenth of its memory: a stream exists for
    every request in flight, and most never hold more than one message. Its reader waits on a :class:`Waiter` (a
    bare future on asyncio), made when it waits: an ``anyio.Event`` there cost 1.5 KiB per waiting call.
    """

    __slots__ = ("_closed", "_items", "_nudge", "_waiter", "dropped")

    def __init__(self) -> None:
        self._items: list[tuple[int, bytes, bool]] = []
        self._waiter: Waiter | None = None
        self._nudge: Callable[[], None] | None = None
        """Called at the next put or close instead of a waiter (see :meth:`poll`)."""
        self._closed = False
        self.dropped = 0
        """The highest sequence dropped unread (the queue was full)."""

    def put(self, item: tuple[int, bytes, bool]) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if len(self._items) >= MAX_QUEUED:  # nobody reads (a slow or gone client): the event store has them
            self.dropped = self._items.pop(0)[0]
        self._items.append(item)
        self._wake()

    async def receive(self) -> tuple[int, bytes, bool]:
        while not self._items:
            if self._closed:
                raise anyio.ClosedResourceError
            waiter = self._waiter = Waiter(running_asyncio_loop())
            try:
                await waiter.wait()
            finally:
                if self._waiter is waiter:  # cancelled, not woken: the next wait makes its own
                    self._waiter = None
        return self._items.pop(0)

    def poll(self, nudge: Callable[[], None]) -> tuple[int, bytes, bool] | None:
        """The oldest item, or ``None`` with ``nudge`` called (once) at the next put or close.

        Raises:
            anyio.ClosedResourceError: closed, and nothing is left.
        """
        if self._items:
            self._nudge = None
            return self._items.pop(0)
        if self._closed:
            raise anyio.ClosedResourceError
        self._nudge = nudge
        return None

    def unpoll(self, nudge: Callable[[], None]) -> None:
        if self._nudge is nudge:
            self._nudge = None

    def close(self) -> None:
        self._closed = True
        self._items.clear()
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.set()
        nudge, self._nudge = self._nudge, None
        if nudge is not None:
            nudge()
