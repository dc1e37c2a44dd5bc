"""The client's ``request_timeout``: a request gives up when the server has been silent too long.

"Silent" means nothing at all arrived (no answer, progress, log message or request of the server's own) for
``timeout`` seconds since the later of the request's start and the last thing heard; the clock stops while a
handler answers a request from the server (a person filling a form takes their time). On expiry the request is
cancelled, which sends ``notifications/cancelled`` (2025-11-25 basic/lifecycle, "Timeouts"): on asyncio its task
is cancelled as ``asyncio.timeout`` cancels one (a counted cancellation, taken back on the way out, so any other
cancellation goes on), with no cancel scope per request (entering and leaving one is a third of the clock's cost
per request, every round of a call); elsewhere an anyio cancel scope is cancelled.

Hearing from the server must cost O(1) whatever the number of waiting requests (a client may have thousands
pending), so it only records a time. One watchdog task looks at the oldest waiting request alone: requests are
kept in the order they started, and the last-heard time is shared, so the oldest always expires first.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio

from .._loop import running_asyncio_loop


class QuietClock:
    """Deadlines for the requests of one client, pushed back by anything heard from the server."""

    __slots__ = ("_added", "_native", "_now", "_waiting", "answering", "heard", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.heard = -math.inf
        self.answering = 0
        """Server requests a handler is answering now; while any is, no clock runs."""
        self._waiting: dict[_Request, float] = {}
        self._added = anyio.Event()
        self._now: Callable[[], float] | None = None
        """The event loop's clock (``anyio.current_time`` looks the backend up on each call): set at first use."""
        self._native = False
        """Whether requests run on asyncio (their tasks are cancelled, not a scope): set at first use."""

    def _clock(self) -> Callable[[], float]:
        loop = running_asyncio_loop()
        if loop is not None:
            self._now = loop.time
            self._native = True
        else:
            self._now = anyio.current_time
        return self._now

    def heard_from_server(self) -> None:
        self.heard = (self._now or self._clock())()

    def request(self) -> _Request:
        """Where to wait for one request (``with clock.request():``): the watchdog cancels what waits there when
        the server is silent too long, and the block is left without an exception (the caller raises
        ``TimeoutError`` after it)."""
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
            for request, started in self._waiting.items():
                if max(started, self.heard) + self.timeout > now:
                    break
                expired.append(request)
            for request in expired:
                del self._waiting[request]
                request.expire()


class _Request:
    """One request's place on the clock, for the duration of a ``with`` block (a class rather than a generator
    context manager: it is entered once per request, every round of a call)."""

    __slots__ = ("_cancelling", "_clock", "_expired", "_scope", "_task")

    def __init__(self, clock: QuietClock) -> None:
        self._clock = clock
        self._scope: anyio.CancelScope | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelling = 0
        self._expired = False

    def __enter__(self) -> None:
        clock = self._clock
        now = (clock._now or clock._clock())()
        if clock._native:
            task = self._task = asyncio.current_task()
            assert task is not None
            self._cancelling = task.cancelling()
        else:
            scope = self._scope = anyio.CancelScope()
            scope.__enter__()
        waiting = clock._waiting
        if not waiting:  # otherwise the watchdog is not waiting for an addition (see watch)
            clock._added.set()
        waiting[self] = now

    def expire(self) -> None:
        """The server was silent too long: stop the wait."""
        if self._task is not None:
            self._expired = True
            self._task.cancel()
        elif self._scope is not None:
            self._scope.cancel()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        self._clock._waiting.pop(self, None)
        task = self._task
        if task is None:
            assert self._scope is not None
            return self._scope.__exit__(kind, exc, traceback)
        if not self._expired:
            return False
        # Ours, unless someone else cancelled the task too (then their cancellation goes on).
        return task.uncancel() <= self._cancelling and kind is not None and issubclass(kind, asyncio.CancelledError)
