"""The event store on Redis: the last events of each SSE stream, for a resume (``P events:``)."""

from __future__ import annotations

from typing import cast

from .._lane import Command
from ._shared import _ms, _Shared


class RedisEventStore:
    """The last ``per_stream`` events of each SSE stream, as a sorted set scored by sequence.

    Members are ``<sequence>:<message>``, so a store sent twice adds nothing, and writes that complete out of order
    (concurrent messages of one stream) are kept in sequence order all the same.
    """

    def __init__(self, shared: _Shared, *, per_stream: int, ttl: float) -> None:
        self._shared = shared
        self._per_stream = per_stream
        self._ttl = _ms(ttl)

    async def store(self, stream: str, sequence: int, message: bytes) -> None:
        """Keep ``message`` as event ``sequence``, dropping the oldest beyond the bound and renewing the TTL."""
        key = self._shared.key("events", stream)
        writes: list[Command] = [
            ("ZADD", key, sequence, b"%d:%s" % (sequence, message)),
            ("ZREMRANGEBYRANK", key, 0, -self._per_stream - 1),
            ("PEXPIRE", key, self._ttl),
        ]
        with self._shared.failing("storing an event"):
            await self._shared.writes.run(writes)

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]]:
        """The kept events after sequence ``after``, oldest first (Redis filters: one ``ZRANGEBYSCORE``)."""
        with self._shared.failing("replaying events"):
            found = await self._shared.client.zrangebyscore(self._shared.key("events", stream), f"({after}", "+inf")
        members = cast("list[bytes]", found or [])  # bytes: decode_responses is off
        events = []
        for member in members:
            sequence, _, message = member.partition(b":")
            events.append((int(sequence), message))
        return events

    async def discard(self, stream: str) -> None:
        """Forget ``stream``: its session ended."""
        with self._shared.failing("discarding events"):
            await self._shared.client.delete(self._shared.key("events", stream))
