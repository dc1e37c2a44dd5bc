"""Server-Sent Events, sans-I/O: encoding events (server) and decoding a byte stream into events (client).

Spec: https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation — lines end with
CRLF, LF or CR; ``field: value`` with one optional space after the colon; lines starting with ``:`` are comments;
``data`` lines accumulate (joined by LF); a blank line dispatches the event; ``retry`` takes only digits; an ``id``
containing NUL is ignored. MCP messages are single-line JSON, so each message is one ``data`` line.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_RETRY = 3_600_000
"""The longest reconnection delay taken from a ``retry`` field, in milliseconds (an hour): a larger value is read
as this, so a hostile stream cannot make a client wait for years or overflow a float."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event. ``id`` is the last event id seen on the stream (it persists across events)."""

    data: str
    event: str = "message"
    id: str | None = None


def encode_event(data: bytes, *, event_id: str | None = None, retry: int | None = None) -> bytes:
    """One SSE event carrying ``data`` (which must not contain line breaks; JSON from msgspec never does)."""
    head = b""
    if event_id is not None:
        head += b"id: " + event_id.encode() + b"\n"
    if retry is not None:
        head += b"retry: " + str(retry).encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """Split one of our event ids, ``<stream key>.<sequence>``; ``None`` if it is not one of ours.

    The key says which stream the event belongs to (the spec requires replaying only the disconnected stream), the
    sequence orders events within it.
    """
    key, dot, sequence = value.rpartition(".")
    # ASCII digits only: str.isdigit() also accepts "²" and other digits int() refuses; 18 digits fit a 64-bit
    # counter and stay far below int()'s limit on digits.
    if not dot or not key or not (sequence.isascii() and sequence.isdigit()) or len(sequence) > 18:
        return None
    return key, int(sequence)


def priming_event(event_id: str, retry: int | None = None) -> bytes:
    """The event a stream starts with (SEP-1699): an id and empty data, so a client can resume from it."""
    return encode_event(b"", event_id=event_id, retry=retry)


class SSEDecoder:
    """Turn chunks of an event stream into events. Feed it whatever the socket returned."""

    __slots__ = ("_buffer", "_data", "_event", "_last_id", "_pending_cr", "_retry", "_size", "max_line")

    def __init__(self, max_line: int = 4 << 20) -> None:
        self.max_line = max_line
        """The longest line, and the most data one event may carry (its ``data`` lines together)."""
        self._size = 0
        self._buffer = b""
        self._pending_cr = False
        self._data: list[str] = []
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None

    @property
    def last_event_id(self) -> str | None:
        """The id to send as ``Last-Event-ID`` when resuming (updated by events without data too)."""
        return self._last_id

    @property
    def retry(self) -> int | None:
        """The reconnection delay the server asked for, in milliseconds, if it did."""
        return self._retry

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode ``chunk``; returns the events it completed.

        Raises:
            ValueError: a line longer than ``max_line``, or an event whose data lines add up to more (a broken or
                hostile stream: a message is one line, but many short lines would otherwise pile up unbounded).
        """
        if not chunk:
            return []  # an empty read says nothing, and must not forget a CR that may pair with the next byte
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        data = self._buffer + chunk
        events: list[SSEEvent] = []
        start = 0
        length = len(data)
        while True:
            cut = _line_end(data, start)
            if cut < 0:
                break
            line = data[start:cut]
            if data[cut] == 13:  # CR, maybe followed by LF
                if cut + 1 < length:
                    start = cut + 2 if data[cut + 1] == 10 else cut + 1
                else:
                    start = cut + 1
                    self._pending_cr = True
            else:
                start = cut + 1
            event = self._line(line.decode("utf-8", "replace"))
            if event is not None:
                events.append(event)
        self._buffer = data[start:]
        if len(self._buffer) > self.max_line:
            raise ValueError(f"SSE line longer than {self.max_line} bytes")
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            data = "\n".join(self._data)
            event_type = self._event or "message"
            self._data = []
            self._size = 0
            self._event = ""
            if not data:  # e.g. a priming event: it moves the last event id but dispatches nothing
                return None
            return SSEEvent(data, event_type, self._last_id)
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._size += len(value) + 1
            if self._size > self.max_line:
                raise ValueError(f"SSE event with more than {self.max_line} bytes of data")
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():  # "consists of only ASCII digits"
            self._retry = min(int(value), MAX_RETRY) if len(value) <= 12 else MAX_RETRY
        return None


def _line_end(data: bytes, start: int) -> int:
    lf = data.find(b"\n", start)
    cr = data.find(b"\r", start)
    if cr < 0:
        return lf
    if lf < 0:
        return cr
    return min(cr, lf)
