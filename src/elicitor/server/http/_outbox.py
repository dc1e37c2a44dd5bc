"""Answers a replica took for another replica's session while the store stayed away past the hold.

A person's answer (or a client's notification) for a session another replica runs travels through the store. While
the store is away, the POST carrying it waits (see :class:`~elicitor.server._hold.StoreHold`); past that bound it
used to be refused with 503. A client that sends it again loses nothing, but the official SDKs' clients never
resend a refused answer: the question then waited in the owner's call until its ``elicitation_timeout`` (an hour
by default, for ever with ``None``), the person's answer lost, and so did the client's call. So
past the bound the message is kept here instead, the POST is answered 202, and the message goes on to the session
once the store is back.

Messages are passed on session by session, up to :data:`RELAY_AT_ONCE` sessions at a time, each session's in the
order taken: an answer for a session whose owner died meanwhile takes the owner's ``gone_after`` (seconds) to be
found undeliverable, and one at a time those held every answer behind them, a live session's too. While the store
is still away, each of those sessions tries it every :data:`RELAY_RETRY` seconds, as a held request does.

The outbox is bounded (:data:`OUTBOX_MESSAGES` messages, :data:`OUTBOX_BYTES` bytes of bodies): past either, the
POST is refused with 503 as before, so a long outage under heavy traffic cannot exhaust the replica's memory. A
message kept longer than :data:`OUTBOX_KEEP` is dropped: the call it answers gave up on it by then. The
same message sent again while kept (a client resending after a refusal) is kept once; one that reaches the owner
twice anyway (a relay try that timed out but arrived) is an answer to a question already answered, which the
owner's session ignores, so it counts once. What the outbox holds lives in this replica's memory only: if the
replica dies before the store is back, those messages are lost, as a POST in flight is, and the owner's call waits
until its session ends (see ``SessionTransport.idle_for``) or its question's ``elicitation_timeout``.

What happens to each message is counted (``elicitor.outbox.messages``, by outcome and reason) and what is held now
is observed (``elicitor.outbox.held``, ``elicitor.outbox.held.size``): see ``docs/observability.md``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable

import anyio

from ...state import StoreUnavailable
from ...telemetry import _state as _telemetry

logger = logging.getLogger("elicitor.server")

OUTBOX_MESSAGES = 1024
"""Messages one replica keeps at most for the store to come back (past it, a POST is refused with 503)."""

OUTBOX_BYTES = 8 * 1024 * 1024
"""Bytes of message bodies one replica keeps at most for the store to come back (past it, 503)."""

OUTBOX_KEEP = 3600.0
"""Seconds a message is kept at most: the default ``elicitation_timeout``, past which the question it answers has
ended without it. Dropped then (``expired``) rather than kept for ever while the store stays away."""

RELAY_RETRY = 0.5
"""Seconds between two attempts to pass a kept message on while the store is still away."""

RELAY_AT_ONCE = 32
"""Sessions whose kept messages are passed on at the same time: an owner found dead holds up its own sessions'
messages (``gone_after`` each), not every other session's behind them."""

Relay = Callable[[str, "str | None", bytes], Awaitable[bool]]
"""Passes one kept message (session id, principal, body) on to its session: ``True`` once it is delivered,
``False`` if it is known undeliverable (the session is gone); raises :class:`StoreUnavailable` if the store is
still away (tried again later)."""

Kept = tuple["str | None", bytes, float]
"""One kept message: its principal, its body, and the clock reading when it was taken."""


class Outbox:
    """The messages one replica keeps for other replicas' sessions until the store is back (see the module)."""

    __slots__ = (
        "__weakref__",
        "_bytes",
        "_count",
        "_kept",
        "_ready",
        "_relay",
        "_sessions",
        "_started",
        "at_once",
        "max_bytes",
        "max_messages",
    )

    def __init__(
        self,
        relay: Relay,
        max_messages: int = OUTBOX_MESSAGES,
        max_bytes: int = OUTBOX_BYTES,
        at_once: int = RELAY_AT_ONCE,
    ) -> None:
        self._relay = relay
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.at_once = at_once
        """Sessions passed on at the same time (see :data:`RELAY_AT_ONCE`)."""
        self._sessions: dict[str, deque[Kept]] = {}
        """What is kept, by session, the sessions in the order their first message was taken."""
        self._started: set[str] = set()
        """Sessions whose messages a task of :meth:`run` is passing on (or waits to)."""
        self._kept: set[tuple[str, bytes]] = set()
        """What is kept, by session and body: the same message taken twice is kept once."""
        self._count = 0
        self._bytes = 0
        self._ready: anyio.Event | None = None
        """Set when a message is kept while :meth:`run` waits for one."""
        _telemetry.track_outbox(self)  # observed for as long as it lives, should metrics start later

    def __len__(self) -> int:
        return self._count

    @property
    def size(self) -> int:
        """Bytes of message bodies kept now."""
        return self._bytes

    def put(self, session_id: str, principal: str | None, body: bytes) -> bool:
        """Keep ``body`` for ``session_id`` until the store is back; ``False`` (not kept) if the outbox is full."""
        if (session_id, body) in self._kept:
            return True
        if self._count >= self.max_messages or self._bytes + len(body) > self.max_bytes:
            logger.warning("the outbox is full: a message for session %.8s... is refused", session_id)
            _counted("dropped", "full")
            return False
        self._sessions.setdefault(session_id, deque()).append((principal, body, anyio.current_time()))
        self._kept.add((session_id, body))
        self._count += 1
        self._bytes += len(body)
        _counted("kept")
        if self._ready is not None:
            self._ready.set()
        return True

    async def run(self) -> None:
        """Pass the kept messages on as soon as the store takes them, at most :attr:`at_once` sessions at a time,
        each session's oldest first; runs until cancelled."""
        limit = anyio.CapacityLimiter(self.at_once)
        async with anyio.create_task_group() as tg:
            while True:
                waiting = [session_id for session_id in self._sessions if session_id not in self._started]
                if not waiting:
                    self._ready = anyio.Event()
                    await self._ready.wait()
                    continue
                for session_id in waiting:
                    self._started.add(session_id)
                    tg.start_soon(self._pass_on, session_id, limit)

    async def _pass_on(self, session_id: str, limit: anyio.CapacityLimiter) -> None:
        """Pass on ``session_id``'s kept messages, one after the other, until none is left."""
        async with limit:
            try:
                while queue := self._sessions.get(session_id):
                    principal, body, taken = queue[0]
                    outcome, reason = await self._one(session_id, principal, body, taken)
                    if self._sessions.get(session_id) is not queue:  # emptied meanwhile (see lost)
                        break
                    queue.popleft()
                    self._kept.discard((session_id, body))
                    self._count -= 1
                    self._bytes -= len(body)
                    _counted(outcome, reason)
                    if not queue:
                        del self._sessions[session_id]
            finally:  # with no wait since the last look: a message kept from now on gets a task of its own
                self._started.discard(session_id)

    async def _one(self, session_id: str, principal: str | None, body: bytes, taken: float) -> tuple[str, str | None]:
        """Pass on one message, tried again while the store is away; what became of it: (outcome, reason)."""
        while True:
            if anyio.current_time() - taken > OUTBOX_KEEP:
                logger.warning("a kept message for session %.8s... is dropped: kept too long", session_id)
                return "dropped", "expired"
            try:
                delivered = await self._relay(session_id, principal, body)
            except StoreUnavailable:
                await anyio.sleep(RELAY_RETRY)
                continue
            except Exception:  # one undeliverable message must not block the others behind it
                logger.exception("a kept message for session %.8s... could not be passed on", session_id)
                return "dropped", "failed"
            return ("relayed", None) if delivered else ("dropped", "gone")

    def lost(self) -> int:
        """Messages still kept (the replica is stopping: they are lost); logged, and the outbox emptied."""
        count = self._count
        if count:
            logger.warning("%d kept message(s) for other replicas' sessions are lost: the store is still away", count)
            _counted("dropped", "stopped", count)
        self._sessions.clear()
        self._kept.clear()
        self._count = 0
        self._bytes = 0
        return count


def _counted(outcome: str, reason: str | None = None, messages: int = 1) -> None:
    """``messages`` kept messages had ``outcome`` (``kept``, ``relayed``, ``dropped`` for ``reason``)."""
    if _telemetry.state.on:
        from ...telemetry import _hooks

        _hooks.outbox_messages(outcome, reason, messages)
