"""A one-shot wake-up for a task awaiting a response: what ``anyio.Event`` does, lighter per instance.

Thousands of requests may wait at once (people answering forms), so their size matters: on asyncio,
``anyio.Event`` wraps an ``asyncio.Event`` whose waiter deque alone is ~760 bytes. A bare future does the same job
in about a tenth of that. Other backends use ``anyio.Event``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import anyio


class Waiter:
    """Set once by the reader; awaited once by the requester."""

    __slots__ = ("_event", "_future")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._future: asyncio.Future[None] | None = loop.create_future() if loop is not None else None
        self._event: anyio.Event | None = anyio.Event() if loop is None else None

    def set(self) -> None:
        if self._future is not None:
            if not self._future.done():
                self._future.set_result(None)
        else:
            assert self._event is not None
            self._event.set()

    def is_set(self) -> bool:
        if self._future is not None:
            return self._future.done() and not self._future.cancelled()
        assert self._event is not None
        return self._event.is_set()

    def wait(self) -> Awaitable[None]:
        """What to await until :meth:`set`: the future itself on asyncio, no coroutine around it (a waiting
        request would hold its frame, 0.2 KiB, for as long as the peer takes)."""
        if self._future is not None:
            return self._future
        assert self._event is not None
        return self._event.wait()
