"""Newline-delimited framing for stdio (and any byte stream): one JSON-RPC message per line.

Spec: https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/stdio — messages are delimited by
newlines and MUST NOT contain embedded newlines. A line longer than ``max_size`` is skipped whole (its bytes are
never buffered beyond the limit) and reported once, so a peer cannot make us hold an unbounded buffer and the
session keeps serving the lines after it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line exceeded the size limit and was dropped; ``size`` is how many bytes had been seen when it was."""

    size: int


class LineFramer:
    """Split a byte stream into lines. Feed it whatever ``read`` returned; blank lines are skipped.

    ``\\r\\n`` endings are accepted. ``feed(b"")`` is not special: call :meth:`close` at end of stream.
    """

    __slots__ = ("_buffer", "_discarding", "_max_size")

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._buffer = b""
        self._discarding = False

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """Return the complete lines (without their newline) and ``Oversized`` markers found so far."""
        out: list[bytes | Oversized] = []
        if b"\n" not in data:
            self._append_partial(data, out)
            return out
        pieces = data.split(b"\n")
        tail = pieces.pop()
        first = True
        for piece in pieces:
            if first:
                first = False
                if self._discarding:
                    self._discarding = False
                    self._buffer = b""
                    continue
                if self._buffer:
                    piece = self._buffer + piece
                    self._buffer = b""
            if len(piece) > self._max_size:
                out.append(Oversized(len(piece)))
                continue
            if piece.endswith(b"\r"):
                piece = piece[:-1]
            if piece.strip():
                out.append(piece)
        self._append_partial(tail, out)
        return out

    def _append_partial(self, data: bytes, out: list[bytes | Oversized]) -> None:
        if self._discarding or not data:
            return
        self._buffer += data
        if len(self._buffer) > self._max_size:
            out.append(Oversized(len(self._buffer)))
            self._buffer = b""
            self._discarding = True

    def close(self) -> bytes | None:
        """End of stream: return a final unterminated line, if any (peers may omit the last newline)."""
        rest, self._buffer = self._buffer, b""
        if self._discarding or not rest.strip():
            return None
        return rest.removesuffix(b"\r")
