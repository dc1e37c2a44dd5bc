"""An in-memory transport pair: two sessions in one process, for tests and embedding."""

from __future__ import annotations

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..protocol import Oversized
from ..types import RequestId


class MemoryTransport:
    """One end of an in-memory connection; see :func:`memory_pair`."""

    def __init__(self, inbox: MemoryObjectReceiveStream[bytes], outbox: MemoryObjectSendStream[bytes]) -> None:
        self._inbox = inbox
        self._outbox = outbox

    async def receive(self) -> bytes | Oversized:
        return await self._inbox.receive()

    async def send(self, message: bytes, related: RequestId | None = None, *, final: bool = False) -> None:
        await self._outbox.send(message)

    async def aclose(self) -> None:
        await self._outbox.aclose()
        await self._inbox.aclose()


def memory_pair(buffer: int = 1024) -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected transports: what one sends, the other receives."""
    a_send, b_receive = anyio.create_memory_object_stream[bytes](buffer)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](buffer)
    return MemoryTransport(a_receive, a_send), MemoryTransport(b_receive, b_send)
