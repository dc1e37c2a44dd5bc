"""Connection pools sized for Streamable HTTP: many long-lived response streams at once.

A call that waits on a person holds its POST's response stream open (an SSE stream) for as long as the person
takes, so a client with a thousand calls waiting holds a thousand connections. httpcore's pool looks at every
connection and every queued request each time a request starts or a response ends, so with N streams open each
answer costs O(N) and answering N questions costs O(N²): 1,000 released answers took about 9 s, nearly all of it in
the pool's bookkeeping. :class:`ShardedTransport` spreads connections over small pools (``SHARD_SIZE`` each) and
gives a new request to the least busy one, so that bookkeeping stays O(``SHARD_SIZE``) whatever the number of
streams.
"""

from __future__ import annotations

import functools
import math
import ssl
from collections.abc import AsyncIterator

import httpx2 as httpx

SHARD_SIZE = 32
"""Connections per pool: large enough to reuse connections, small enough that a pool's bookkeeping is cheap."""

DEFAULT_LIMITS = httpx.Limits(max_connections=4096, max_keepalive_connections=SHARD_SIZE, keepalive_expiry=5.0)
"""The default for ``Client.http``: room for thousands of calls waiting at once (each holds a connection), and
idle connections kept for reuse, per pool."""


@functools.cache
def default_tls() -> ssl.SSLContext:
    """The verifying TLS context every pool of this process shares.

    Making one loads the system's certificate authorities, about 20 ms of CPU: a program that opens a client per
    session (50 sessions, say) paid that for each, a second of CPU, even for ``http://`` servers. A context is
    safe to share between connections; ``verify=`` given to a pool still wins.
    """
    return httpx.create_ssl_context()


class ShardedTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport made of pools of at most ``SHARD_SIZE`` connections each.

    Args:
        limits: ``max_connections`` bounds the connections of all pools together (``None``: no bound);
            ``max_keepalive_connections`` and ``keepalive_expiry`` apply to each pool.
        options: other arguments for each pool's :class:`httpx.AsyncHTTPTransport` (``verify``, ``http2``...).
    """

    def __init__(self, limits: httpx.Limits = DEFAULT_LIMITS, **options: object) -> None:
        total = limits.max_connections
        self._max_shards = math.inf if total is None else max(1, math.ceil(total / SHARD_SIZE))
        per_shard = SHARD_SIZE if total is None else max(1, total // max(1, math.ceil(total / SHARD_SIZE)))
        self._shard_limits = httpx.Limits(
            max_connections=per_shard,
            max_keepalive_connections=min(per_shard, limits.max_keepalive_connections or per_shard),
            keepalive_expiry=limits.keepalive_expiry,
        )
        self._per_shard = per_shard
        self._options = options if "verify" in options else {**options, "verify": default_tls()}
        self._shards: list[httpx.AsyncHTTPTransport] = []
        self._busy: list[int] = []  # requests in flight per shard, from the request until its response is closed

    def _pick(self) -> int:
        """The shard with room for one more request, else a new shard, else the least busy one (which queues it)."""
        for index, busy in enumerate(self._busy):
            if busy < self._per_shard:
                return index
        if len(self._shards) < self._max_shards:
            self._shards.append(httpx.AsyncHTTPTransport(limits=self._shard_limits, **self._options))  # type: ignore[arg-type]
            self._busy.append(0)
            return len(self._shards) - 1
        return min(range(len(self._busy)), key=self._busy.__getitem__)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = self._pick()
        self._busy[index] += 1
        try:
            response = await self._shards[index].handle_async_request(request)
        except BaseException:
            self._busy[index] -= 1
            raise
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        response.stream = _Released(stream, self._busy, index)
        return response

    async def aclose(self) -> None:
        for shard in self._shards:
            await shard.aclose()

    @property
    def shards(self) -> int:
        """How many pools exist (for tests and diagnostics)."""
        return len(self._shards)


class _Released(httpx.AsyncByteStream):
    """A response body that gives its shard's slot back when it is closed (once)."""

    __slots__ = ("_busy", "_index", "_open", "_stream")

    def __init__(self, stream: httpx.AsyncByteStream, busy: list[int], index: int) -> None:
        self._stream = stream
        self._busy = busy
        self._index = index
        self._open = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        if self._open:
            self._open = False
            self._busy[self._index] -= 1
        await self._stream.aclose()
