"""The client's ``request_timeout``: a request gives up when the server has been silent too long.

"Silent" means nothing at all arrived (no answer, progress, log message or request of the server's own) for
``timeout`` seconds since the later of the request's start and the last thing heard; the clock stops while a
handler answers a request from the server (a person filling a form takes their time). On expiry the request's
scope is cancelled, which sends ``notifications/cancelled`` (2025-11-25 basic/lifecycle, "Timeouts").

Hearing from the server must cost O(1) whatever the number of waiting requests (a client may have thousands
pending), so it only records a time. One watchdog task looks at the oldest waiting request alone: requests are
kept in the order they started, and the last-heard time is shared, so the oldest always expires first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import TracebackType

import anyio

from .._loop import running_asyncio_loop


class QuietClock:
    """Deadlines for the requests of one client, pushed back by anything heard from the server."""

    __slots__ = ("_added", "_now", "_scope_type", "_waiting", "answering", "heard", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.heard = -math.inf
        self.answering = 0
        """Server requests a handler is answering now; while any is, no clock runs."""
        self._waiting: dict[anyio.CancelScope, float] = {}
        self._added = anyio.Event()
        self._now: Callable[[], float] | None = None
        """The event loop's clock (``anyio.current_time`` looks the backend up on each call): set at first use."""
        self._scope_type: Callable[[], anyio.CancelScope] = anyio.CancelScope

    def _clock(self) -> Callable[[], float]:
        loop = running_asyncio_loop()
        if loop is not None:
            self._now = loop.time
            self._scope_type = type(anyio.CancelScope())  # the backend's class: no backend lookup per request
        else:
            self._now = anyio.current_time
        return self._now

    def heard_from_server(self) -> None:
        self.heard = (self._now or self._clock())()

    def request(self) -> _Request:
        """A scope to wait for one request in (``with clock.request() as scope:``); the watchdog cancels it when
        the server is silent too long."""
        return _Request(self)

    async def watch(self) -> None:
        """The watchdog: runs for the client's lifetime."""
        while True:
            if not self._waiting:
                self._added = anyio.Event()
                await self._added.wait()
                continue
            if self.answering:
                # When the handler finishes it marks the server as heard, so no deadline can fall before then.
                await anyio.sleep(self.timeout)
                continue
            now = anyio.current_time()
            oldest = next(iter(self._waiting.values()))
            deadline = max(oldest, self.heard) + self.timeout
            if deadline > now:
                await anyio.sleep(deadline - now)  # deadlines only move later meanwhile: never late
                continue
            expired = []
            for scope, started in self._waiting.items():
                if max(started, self.heard) + self.timeout > now:
                    break
                expired.append(scope)
            for scope in expired:
                del self._waiting[scope]
                scope.cancel()


class _Request:
    """One request's place on the clock, for the duration of a ``with`` block (a class rather than a generator
    context manager: it is entered once per request, every round of a call)."""

    __slots__ = ("_clock", "_scope")

    def __init__(self, clock: QuietClock) -> None:
        self._clock = clock
        self._scope: anyio.CancelScope | None = None

    def __enter__(self) -> anyio.CancelScope:
        clock = self._clock
        now = (clock._now or clock._clock())()
        scope = self._scope = clock._scope_type()
        waiting = clock._waiting
        if not waiting:  # otherwise the watchdog is not waiting for an addition (see watch)
            clock._added.set()
        waiting[scope] = now
        try:
            return scope.__enter__()
        except BaseException:
            del waiting[scope]
            raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        scope = self._scope
        assert scope is not None
        try:
            return scope.__exit__(kind, exc, traceback)
        finally:
            self._clock._waiting.pop(scope, None)
