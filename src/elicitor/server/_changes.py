"""The change bus: list-changed and resource-updated notices, to every connection and listener, on every replica."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..state import Store, StoreUnavailable, Subscription
from ..types import JSONObject

logger = logging.getLogger("elicitor.server")


class ChangeBus:
    """Fans change notifications out to every connection and ``subscriptions/listen`` stream that wants them.

    Each listener gets a bounded queue; a listener that stops reading loses changes rather than holding memory.
    With a shared store a change goes out on the ``changes`` channel and comes back to every replica, this one
    included, which fans it out to its own listeners (:meth:`relay` runs that for the replica).
    """

    def __init__(self, store: Store, depth: int = 256) -> None:
        self._store = store
        self._depth = depth
        self._listeners: set[MemoryObjectSendStream[tuple[str, JSONObject]]] = set()
        self._outbox: MemoryObjectSendStream[bytes] | None = None
        self.subscription = Subscription("changes")
        """The ``changes`` channel, as ``/healthz`` reports it."""

    @contextmanager
    def listen(self) -> Iterator[MemoryObjectReceiveStream[tuple[str, JSONObject]]]:
        send, receive = anyio.create_memory_object_stream[tuple[str, JSONObject]](self._depth)
        self._listeners.add(send)
        try:
            yield receive
        finally:
            self._listeners.discard(send)
            send.close()
            receive.close()

    def publish(self, method: str, params: JSONObject) -> None:
        if not self._store.shared:
            self._fan_out(method, params)
            return
        try:
            if self._outbox is None:
                raise anyio.WouldBlock
            self._outbox.send_nowait(_encode_change([method, params]))
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.warning("change notices are not being relayed (is the HTTP app running?); dropped %s", method)

    def _fan_out(self, method: str, params: JSONObject) -> None:
        for listener in list(self._listeners):
            with suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                listener.send_nowait((method, params))

    async def relay(self) -> None:
        """Publish this replica's changes to all replicas, and fan theirs out here, until cancelled."""
        self._outbox, pending = anyio.create_memory_object_stream[bytes](self._depth)
        async with self._outbox, pending, anyio.create_task_group() as tg:
            tg.start_soon(self._send_out, pending)
            await self.subscription.run(lambda: self._store.bus.subscribe("changes"), self._receive)

    async def _receive(self, payload: bytes) -> None:
        with suppress(msgspec.ValidationError, msgspec.DecodeError):
            method, params = _decode_change(payload)
            self._fan_out(method, params)

    @property
    def listening(self) -> bool:
        """Whether changes from other replicas reach this one now (always, with a store of its own)."""
        return not self._store.shared or self.subscription.listening

    async def _send_out(self, pending: MemoryObjectReceiveStream[bytes]) -> None:
        async for payload in pending:
            try:
                await self._store.bus.publish("changes", payload)
            except StoreUnavailable as exc:
                logger.warning("a change notice was lost: %s", exc)
            except Exception:
                logger.exception("a change notice was lost")


_encode_change = msgspec.json.Encoder().encode
_decode_change = msgspec.json.Decoder(tuple[str, dict[str, Any]]).decode
