"""Where SSE events wait for a client to resume a stream (2025-11-25 resumability), behind a small interface.

An event id is ``<stream key>.<sequence>``: the key says which stream it belongs to (the spec requires replaying
only the disconnected stream), the sequence orders events within it. A store keeps the most recent events of each
stream; a store shared by several processes (Redis, later) lets a client resume on another replica.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, Protocol, TypeVar

S = TypeVar("S")


class EventStore(Protocol):
    """Keeps recent events per stream so that a client can resume with ``Last-Event-ID``.

    Example::

        store = MemoryEventStore(per_stream=100)
        await store.store("k1", 1, b'{"jsonrpc":"2.0",...}')
        assert await store.replay("k1", after=0) == [(1, b'{"jsonrpc":"2.0",...}')]
    """

    async def store(self, stream: str, sequence: int, message: bytes) -> None:
        """Remember ``message`` as event ``sequence`` of ``stream``."""
        ...

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]]:
        """The events of ``stream`` after ``after``, oldest first (those still kept)."""
        ...

    async def discard(self, stream: str) -> None:
        """Forget ``stream`` (its session ended)."""
        ...


class SessionStore(Protocol[S]):
    """Where an HTTP server finds the handshake-era session a request names (``Mcp-Session-Id``).

    A session here is a live object (the connection's dispatch, in this process); the interface is the seam for a
    store that also records which replica holds a session, so that others can route to it.

    Example::

        store = MemorySessionStore()
        store.add("abc", session)
        assert store.get("abc") is session
    """

    def add(self, session_id: str, session: S) -> None: ...

    def get(self, session_id: str) -> S | None: ...

    def remove(self, session_id: str) -> S | None: ...

    def values(self) -> list[S]: ...

    def __len__(self) -> int: ...


class MemorySessionStore(Generic[S]):
    """The default :class:`SessionStore`: a dict in this process."""

    def __init__(self) -> None:
        self._sessions: dict[str, S] = {}

    def add(self, session_id: str, session: S) -> None:
        self._sessions[session_id] = session

    def get(self, session_id: str) -> S | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: str) -> S | None:
        return self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)

    def values(self) -> list[S]:
        return list(self._sessions.values())


class MemoryEventStore:
    """The default :class:`EventStore`: the last ``per_stream`` events of at most ``streams`` streams, in memory."""

    def __init__(self, *, per_stream: int = 256, streams: int = 4096) -> None:
        self._per_stream = per_stream
        self._limit = streams
        self._events: dict[str, deque[tuple[int, bytes]]] = {}

    async def store(self, stream: str, sequence: int, message: bytes) -> None:
        events = self._events.get(stream)
        if events is None:
            if len(self._events) >= self._limit:
                del self._events[next(iter(self._events))]
            events = self._events[stream] = deque(maxlen=self._per_stream)
        events.append((sequence, message))

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]]:
        return [(seq, message) for seq, message in self._events.get(stream, ()) if seq > after]

    async def discard(self, stream: str) -> None:
        self._events.pop(stream, None)


def parse_event_id(value: str) -> tuple[str, int] | None:
    """Split ``<stream key>.<sequence>``; ``None`` if it is not one of ours."""
    key, dot, sequence = value.rpartition(".")
    if not dot or not key or not sequence.isdigit():
        return None
    return key, int(sequence)
