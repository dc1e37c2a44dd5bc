"""The bus on Redis: each replica's queue (a stream, ``P queue:``) and wake-ups over pub/sub (``P bus:``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import anyio
import anyio.abc
from redis.asyncio.client import PubSub

from .._lane import Command, Lane
from ._shared import _FAILURES, _fields, _ms, _Shared, logger


class _Messages:
    """The payloads arriving on one subscription, until its connection is lost (then iteration simply ends).

    Reading waits at most ``heartbeat`` seconds at a time; after a silent heartbeat it PINGs on the subscription's
    connection, and a second silent heartbeat means that connection is dead (a Redis that vanished without closing
    the socket), so even then the iterator ends within two heartbeats instead of hanging.
    """

    def __init__(self, pubsub: PubSub, heartbeat: float, shared: _Shared, channel: str) -> None:
        self._pubsub = pubsub
        self._heartbeat = heartbeat
        self._open = True
        self._shared = shared
        self._channel = channel

    def __aiter__(self) -> _Messages:
        return self

    async def __anext__(self) -> bytes:
        pinged = False
        while self._open:
            try:
                message = await self._pubsub.get_message(timeout=self._heartbeat)
                if message is None:
                    if pinged:
                        break
                    await self._pubsub.ping()
                    pinged = True
                    continue
            except _FAILURES:
                break
            pinged = False
            data = message.get("data")
            if message.get("type") == "message" and isinstance(data, bytes):
                opened = self._shared.unseal(data, self._channel)
                if opened is not None:
                    return opened
                logger.warning("dropped a message on %r that did not open with the deployment's keys", self._channel)
        self._open = False
        raise StopAsyncIteration


_SETTLE_TURNS = 3
"""Turns of the event loop a queue reader lets pass before it asks Redis for more, once a batch is handed out.

Why: the message just handed out woke work that is waiting for it (a session's dispatch and then the tool that
asked, or the response relaying a stream), a few hops of the loop away. Asking for more first (building and
sending ``XTRIM`` + ``XREAD``, a few hundred microseconds of redis-py) would put that cost on the path of every
forwarded answer and relayed event. Three turns cover the hops from the reader to the tool or to the HTTP
response; a message that arrives meanwhile waits in the queue (Redis keeps it) for as many turns."""


class _QueueReader:
    """The messages of one queue (a Redis stream) after an offset: ``XREAD BLOCK`` in turns shorter than the socket
    timeout, so a dead connection is noticed within ``timeout``; each batch read is acknowledged (``XTRIM MINID``)
    once handled, pipelined with the next read (one round trip for both). Any failure ends the iteration: read
    again from the last offset. The reads go on a lane of the reader's own (:mod:`.._lane`: the reply of a wake-up
    reaches the reader without redis-py's layers), or on the listener's connections over TLS."""

    def __init__(self, shared: _Shared, key: str, after: str, lane: Lane | None) -> None:
        self._shared = shared
        self._key = key
        self._last = after
        self._batch: list[tuple[str, bytes]] = []
        self._trim = False
        self._block = _ms(shared.timeout / 2)
        self._lane = lane

    def __aiter__(self) -> _QueueReader:
        return self

    async def __anext__(self) -> tuple[str, bytes]:
        if not self._batch and self._trim:
            for _ in range(_SETTLE_TURNS):  # let what the last message woke run first (see _SETTLE_TURNS)
                await asyncio.sleep(0)
        while not self._batch:
            try:
                found = await self._read()
            except _FAILURES:
                raise StopAsyncIteration from None
            for _, entries in found:
                for raw_offset, fields in entries:
                    offset = raw_offset.decode()
                    opened = self._shared.unseal(fields.get(b"m", b""), self._key)
                    if opened is None:
                        logger.warning(
                            "dropped a message in %r that did not open with this deployment's keys", self._key
                        )
                        self._last, self._trim = offset, True
                        continue
                    self._batch.append((offset, opened))
            self._batch.reverse()
        offset, payload = self._batch.pop()
        self._last = offset
        self._trim = True
        return offset, payload

    async def _read(self) -> list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]:
        """One ``XREAD BLOCK`` after the last offset, with the ``XTRIM`` of what was handled if any is due."""
        trim, self._trim = self._trim, False
        if self._lane is not None:
            read: Command = ("XREAD", "COUNT", 256, "BLOCK", self._block, "STREAMS", self._key, self._last)
            commands: list[Command] = [("XTRIM", self._key, "MINID", self._last), read] if trim else [read]
            replies = await self._lane.execute(commands)
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            streams = cast("list[tuple[bytes, list[tuple[bytes, list[bytes]]]]] | None", replies[-1]) or []
            return [(name, [(offset, _fields(flat)) for offset, flat in entries]) for name, entries in streams]
        listener = self._shared.listener
        if trim:  # what was read before is handled: Redis may forget it (sent with the read)
            async with listener.pipeline(transaction=False) as pipe:
                pipe.xtrim(self._key, minid=self._last, approximate=False)
                pipe.xread({self._key: self._last}, count=256, block=self._block)
                _, found = await pipe.execute()
        else:
            found = await listener.xread({self._key: self._last}, count=256, block=self._block)
        return cast("list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]", found or [])


class RedisBus:
    """Queues between replicas on Redis streams (kept until read, read from an offset), and channels on pub/sub
    (at most once, to whoever is subscribed now)."""

    def __init__(self, shared: _Shared, *, heartbeat: float, queue_limit: int, queue_ttl: float) -> None:
        self._shared = shared
        self._heartbeat = heartbeat
        self.queue_limit = queue_limit
        self.queue_ttl = _ms(queue_ttl)
        """In ms."""

    async def append(self, queue: str, payload: bytes) -> None:
        """``XADD`` (capped at ``queue_limit`` entries) and renew the queue's TTL, in one round trip."""
        key = self._shared.key("queue", queue)
        sealed = self._shared.seal(payload, key)
        writes: list[Command] = [
            ("XADD", key, "MAXLEN", "~", self.queue_limit, "*", "m", sealed),
            ("PEXPIRE", key, self.queue_ttl),
        ]
        with self._shared.failing("sending on a queue", queue):
            await self._shared.writes.run(writes)

    @asynccontextmanager
    async def read(self, queue: str, after: str) -> AsyncIterator[AsyncIterator[tuple[str, bytes]]]:
        """Read ``queue`` from ``after`` on a connection of its own (never retried: a failure ends it)."""
        lane = self._shared.reader_lane()
        try:
            yield _QueueReader(self._shared, self._shared.key("queue", queue), after, lane)
        finally:
            if lane is not None:
                lane.close()

    async def publish(self, channel: str, payload: bytes) -> int:
        """``PUBLISH`` ``payload``; returns how many subscriptions received it (a replica holds one per channel)."""
        with self._shared.failing("publishing on a channel", channel):
            key = self._shared.key("bus", channel)
            return int(await self._shared.client.publish(key, self._shared.seal(payload, key)))

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[AsyncIterator[bytes]]:
        """Listen to ``channel`` on a connection of its own for the block; the subscription is live once entered.

        Entering raises :class:`StoreUnavailable` if Redis cannot be reached; once entered, a lost connection ends
        the iterator (subscribe again to resume: messages published meanwhile are gone, as pub/sub promises).
        """
        pubsub = self._shared.listener.pubsub()
        try:
            with self._shared.failing("subscribing to a channel", channel):
                await pubsub.subscribe(self._shared.key("bus", channel))
                while True:  # wait for the confirmation: a message published after this block starts reaches it
                    confirmation = await pubsub.get_message(timeout=self._shared.timeout)
                    if confirmation is None:
                        raise TimeoutError("no subscription confirmation")
                    if confirmation.get("type") == "subscribe":
                        break
            yield _Messages(pubsub, self._heartbeat, self._shared, self._shared.key("bus", channel))
        finally:
            with anyio.move_on_after(self._shared.timeout, shield=True):
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis leaves it unannotated
