"""Newline-delimited framing for stdio (and any byte stream): one JSON-RPC message per line.

Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/stdio — messages are delimited by
newlines and MUST NOT contain embedded newlines. A line longer than ``max_size`` is skipped whole (its bytes are
never buffered beyond the limit) and reported once, so a peer cannot make us hold an unbounded buffer and the
session keeps serving the lines after it.
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD = 4096
"""How many bytes from the start of an oversized line are kept, to tell what it was (its id and its kind)."""

TAIL = 512
"""How many bytes from the end of an oversized line are kept: some peers write the id last."""


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the size limit, dropped whole: ``size`` bytes in all, ``limit`` the limit it broke.

    ``head`` and ``tail`` are its first :data:`HEAD` and last :data:`TAIL` bytes (empty when unknown): enough
    for :func:`~elicitor.protocol.peek_envelope` to find the request or response it was, so that the request it
    answered fails at once, or the peer's request is refused under its own id, instead of waiting for ever.
    """

    size: int
    head: bytes = b""
    tail: bytes = b""
    limit: int = 0


class LineFramer:
    """Split a byte stream into lines. Feed it whatever ``read`` returned; blank lines are skipped.

    ``\\r\\n`` endings are accepted. ``feed(b"")`` is not special: call :meth:`close` at end of stream. A line
    longer than ``max_size`` is reported once, as :class:`Oversized`, when it ends; the bytes in between are
    dropped as they come (at most ``max_size`` + :data:`HEAD` + :data:`TAIL` are ever held).
    """

    __slots__ = ("_buffer", "_dropped", "_head", "_max_size", "_tail")

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._buffer = b""
        self._dropped = 0
        """Bytes seen of the oversized line being dropped (0: none is)."""
        self._head = b""
        self._tail = b""

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """Return the complete lines (without their newline) and ``Oversized`` markers found so far."""
        out: list[bytes | Oversized] = []
        if b"\n" not in data:
            self._append_partial(data)
            return out
        pieces = data.split(b"\n")
        tail = pieces.pop()
        first = True
        for piece in pieces:
            if first:
                first = False
                if self._dropped:
                    out.append(self._ended(piece))
                    continue
                if self._buffer:
                    piece = self._buffer + piece
                    self._buffer = b""
            if len(piece) > self._max_size:
                out.append(Oversized(len(piece), piece[:HEAD], piece.removesuffix(b"\r")[-TAIL:], self._max_size))
                continue
            if piece.endswith(b"\r"):
                piece = piece[:-1]
            if piece.strip():
                out.append(piece)
        self._append_partial(tail)
        return out

    def _append_partial(self, data: bytes) -> None:
        if not data:
            return
        if self._dropped:
            self._dropped += len(data)
            self._tail = (self._tail + data[-TAIL - 1 :])[-TAIL - 1 :]
            return
        self._buffer += data
        if len(self._buffer) > self._max_size:
            self._dropped = len(self._buffer)
            self._head, self._tail = self._buffer[:HEAD], self._buffer[-TAIL - 1 :]
            self._buffer = b""

    def _ended(self, end: bytes) -> Oversized:
        """The oversized line being dropped ends with ``end``."""
        tail = (self._tail + end[-TAIL - 1 :]).removesuffix(b"\r")[-TAIL:]
        marker = Oversized(self._dropped + len(end), self._head, tail, self._max_size)
        self._dropped, self._head, self._tail = 0, b"", b""
        return marker

    def close(self) -> bytes | Oversized | None:
        """End of stream: a final unterminated line, if any (peers may omit the last newline), or the oversized
        one it was."""
        if self._dropped:
            return self._ended(b"")
        rest, self._buffer = self._buffer, b""
        if not rest.strip():
            return None
        return rest.removesuffix(b"\r")
