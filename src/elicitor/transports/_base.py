"""The transport interface: move framed messages, nothing else.

A transport knows bytes and framing; it knows no JSON-RPC. The session layer calls it. ``related`` names the peer
request a message belongs to (or answers), and ``final`` marks the answer itself, so that transports with
per-request streams (Streamable HTTP) can route a message and end a request's stream; stream transports (stdio)
ignore both.
"""

from __future__ import annotations

from typing import Protocol

from ..protocol import Oversized
from ..types import RequestId


class Transport(Protocol):
    """One connection to a peer.

    Example — a session's read loop::

        while True:
            try:
                message = await transport.receive()
            except anyio.EndOfStream:
                break
            ...
            await transport.send(reply, related=request_id)
    """

    async def receive(self) -> bytes | Oversized:
        """The next framed message, or ``Oversized`` for one dropped for its size.

        Raises:
            anyio.EndOfStream: the peer closed the connection.
        """
        ...

    async def send(self, message: bytes, related: RequestId | None = None, *, final: bool = False) -> None:
        """Send one message (without framing; the transport adds it).

        Raises:
            anyio.BrokenResourceError: the peer is gone.
        """
        ...

    async def aclose(self) -> None:
        """Close the connection; idempotent."""
        ...
