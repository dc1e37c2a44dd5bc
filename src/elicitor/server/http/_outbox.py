"""Answers a replica took for another replica's session while the store stayed away past the hold.

A person's answer (or a client's notification) for a session another replica runs travels through the store. While
the store is away, the POST carrying it waits (see :class:`~elicitor.server._hold.StoreHold`); past that bound it
used to be refused with 503. A client that sends it again loses nothing, but the official SDKs' clients never
resend a refused answer: the question then waited in the owner's call until its ``elicitation_timeout`` (an hour
by default, for ever with ``None``), the person's answer lost, and so did the client's call. So
past the bound the message is kept here instead, the POST is answered 202, and the message goes on to the session
once the store is back, in the order taken.

The outbox is bounded (:data:`OUTBOX_MESSAGES` messages, :data:`OUTBOX_BYTES` bytes of bodies): past either, the
POST is refused with 503 as before, so a long outage under heavy traffic cannot exhaust the replica's memory. The
same message sent again while kept (a client resending after a refusal) is kept once; one that reaches the owner
twice anyway (a relay try that timed out but arrived) is an answer to a question already answered, which the
owner's session ignores, so it counts once. What the outbox holds lives in this replica's memory only: if the
replica dies before the store is back, those messages are lost, as a POST in flight is, and the owner's call waits
until its session ends (see ``SessionTransport.idle_for``).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable

import anyio

from ...state import StoreUnavailable

logger = logging.getLogger("elicitor.server")

OUTBOX_MESSAGES = 1024
"""Messages one replica keeps at most for the store to come back (past it, a POST is refused with 503)."""

OUTBOX_BYTES = 8 * 1024 * 1024
"""Bytes of message bodies one replica keeps at most for the store to come back (past it, 503)."""

RELAY_RETRY = 0.5
"""Seconds between two attempts to pass a kept message on while the store is still away."""

Relay = Callable[[str, "str | None", bytes], Awaitable[None]]
"""Passes one kept message (session id, principal, body) on to its session; raises :class:`StoreUnavailable` if
the store is still away (tried again later), returns once it is delivered or known undeliverable."""


class Outbox:
    """The messages one replica keeps for other replicas' sessions until the store is back (see the module)."""

    __slots__ = ("_bytes", "_kept", "_queue", "_ready", "_relay", "max_bytes", "max_messages")

    def __init__(self, relay: Relay, max_messages: int = OUTBOX_MESSAGES, max_bytes: int = OUTBOX_BYTES) -> None:
        self._relay = relay
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._queue: deque[tuple[str, str | None, bytes]] = deque()
        self._kept: set[tuple[str, bytes]] = set()
        """What the queue holds, by session and body: the same message taken twice is kept once."""
        self._bytes = 0
        self._ready: anyio.Event | None = None
        """Set when a message is kept while :meth:`run` waits for one."""

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, session_id: str, principal: str | None, body: bytes) -> bool:
        """Keep ``body`` for ``session_id`` until the store is back; ``False`` (not kept) if the outbox is full."""
        if (session_id, body) in self._kept:
            return True
        if len(self._queue) >= self.max_messages or self._bytes + len(body) > self.max_bytes:
            logger.warning("the outbox is full: a message for session %.8s... is refused", session_id)
            return False
        self._queue.append((session_id, principal, body))
        self._kept.add((session_id, body))
        self._bytes += len(body)
        if self._ready is not None:
            self._ready.set()
        return True

    async def run(self) -> None:
        """Pass the kept messages on, oldest first, each as soon as the store takes it; runs until cancelled."""
        while True:
            if not self._queue:
                self._ready = anyio.Event()
                await self._ready.wait()
            while self._queue:
                session_id, principal, body = self._queue[0]
                try:
                    await self._relay(session_id, principal, body)
                except StoreUnavailable:
                    await anyio.sleep(RELAY_RETRY)
                    continue
                except Exception:  # one undeliverable message must not block the others behind it
                    logger.exception("a kept message for session %.8s... could not be passed on", session_id)
                self._queue.popleft()
                self._kept.discard((session_id, body))
                self._bytes -= len(body)

    def lost(self) -> int:
        """Messages still kept (the replica is stopping: they are lost); logged, and the outbox emptied."""
        count = len(self._queue)
        if count:
            logger.warning("%d kept message(s) for other replicas' sessions are lost: the store is still away", count)
        self._queue.clear()
        self._kept.clear()
        self._bytes = 0
        return count
