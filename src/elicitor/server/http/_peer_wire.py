"""What replicas say to each other on the bus about handshake-era sessions (see :mod:`._peers`), and the landing
replica's end of a stream its owner pumps to it.

Each message is a msgpack-encoded tagged struct on the owner's (or the landing replica's) channel; a replica that
reads one it cannot decode drops it and says so in the log, never fails.
"""

from __future__ import annotations

from contextlib import suppress

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ...types import RequestId
from .._url import UrlComplete


class Hop(msgspec.Struct, array_like=True, frozen=True):
    """What a forwarded answer or request tells its owner for tracing: the forwarding replica's span
    (``traceparent``), the id of the request it answers (or, a request's, its own), when it was put in the store
    (wall clock, ns) and by which replica."""

    span: str
    answered: RequestId
    sent: int
    by: str


class Deliver(msgspec.Struct, tag="deliver", frozen=True, omit_defaults=True):
    session: str
    body: bytes
    hop: Hop | None = None
    """Only with a tracer on the forwarding replica (an untraced Deliver is as it always was)."""


class Open(msgspec.Struct, tag="open", frozen=True, omit_defaults=True):
    session: str
    request: RequestId
    body: bytes
    reply: str
    token: str
    hop: Hop | None = None
    """Only with a tracer on the forwarding replica (an untraced Open is as it always was)."""
    peer: dict[str, str | int] | None = None
    """Only with telemetry on at the forwarding replica: who POSTed the request there (``client.address``,
    ``client.port``, ``network.protocol.version``), for the owner's span serving it, which names the client, not
    the replica that forwarded it. A replica that does not know the field ignores it."""


class Attach(msgspec.Struct, tag="attach", frozen=True):
    session: str
    stream: str | None
    after: int
    reply: str
    token: str


class Detach(msgspec.Struct, tag="detach", frozen=True):
    token: str


class End(msgspec.Struct, tag="end", frozen=True):
    session: str


class Opened(msgspec.Struct, tag="opened", frozen=True):
    token: str
    stream: str


class Item(msgspec.Struct, tag="item", frozen=True):
    token: str
    stream: str
    sequence: int
    message: bytes
    final: bool


class Closed(msgspec.Struct, tag="closed", frozen=True):
    token: str
    status: int
    reason: str


PeerMessage = Deliver | Open | Attach | Detach | End | Opened | Item | Closed | UrlComplete
encode_peer_message = msgspec.msgpack.Encoder().encode
decode_peer_message = msgspec.msgpack.Decoder(PeerMessage).decode


class Moved(Exception):
    """A message sent to the owner a replica remembered was not sent: the session ended, is not that principal's,
    or its owner's lease lapsed. Look the session up again (nothing was sent)."""


RELAY_DEPTH = 256
"""Messages a relay holds for a client that reads slowly before it ends the relay (the client then resumes)."""


class RemoteStream:
    """The landing replica's end of a stream another replica pumps: reads like the owner's own stream."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.key = ""
        self.status = 0
        """Why the owner closed it without a final message (404, 409...), or 0."""
        self.reason = ""
        self.finished = False
        self.dropped = 0
        """Always 0: a relay that falls behind ends instead (see :meth:`push`)."""
        self._in: MemoryObjectSendStream[tuple[int, bytes, bool]]
        self.out: MemoryObjectReceiveStream[tuple[int, bytes, bool]]
        self._in, self.out = anyio.create_memory_object_stream[tuple[int, bytes, bool]](RELAY_DEPTH)

    def event_id(self, sequence: int) -> str:
        return f"{self.key}.{sequence}"

    async def take(self) -> tuple[int, bytes, bool]:
        return await self.out.receive()

    def give_back(self, item: tuple[int, bytes, bool]) -> None:
        """Nothing to keep here: a resume gets what this replica could not deliver from the owner (its event store,
        or its memory while the store cannot take it yet)."""

    def push(self, message: Opened | Item | Closed) -> None:
        """Take a message from the owner. A client that reads too slowly to keep ``RELAY_DEPTH`` messages in hand
        ends its relay (503): it resumes with ``Last-Event-ID``, served from the event store, instead of this
        replica holding an unbounded queue for it."""
        if isinstance(message, Item):
            self.key = message.stream
            try:
                self._in.send_nowait((message.sequence, message.message, message.final))
            except anyio.WouldBlock:
                self.lost(503, "Service unavailable: the client reads too slowly; resume the stream")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            else:
                self.finished = self.finished or message.final
        elif isinstance(message, Opened):
            self.key = message.stream
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._in.send_nowait((0, b"", False))
        else:
            self.status, self.reason = message.status, message.reason
            self.finished = True
            self._in.close()

    def close(self) -> None:
        """The relay is over: drop whatever is left."""
        self._in.close()
        self.out.close()

    def end(self) -> None:
        """End the response here, with nothing lost: the stream goes on at its owner, and the client resumes it
        (``Last-Event-ID``) on another replica. What this replica took from the owner is still delivered first."""
        self._in.close()

    def lost(self, status: int = 404, reason: str = "Session ended: the replica running it stopped") -> None:
        """End the stream: its owner is gone (404), or its client reads too slowly to keep up (503)."""
        self.status, self.reason = status, reason
        self._in.close()
